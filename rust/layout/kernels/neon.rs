//! aarch64 Advanced SIMD (NEON) implementation of [`Simd`], 16 pixels a
//! step (a vector of the abstraction is four NEON registers): `vld3q_u8` /
//! `vld4q_u8` de-interleave the source, `vst4q` interleaves the destination.
//! The kernels themselves are in vector.rs. Also NEON's rows written by
//! hand: 4-byte pixels to 3-byte ones and the YUV rearrangements. IEEE half
//! is written with `crate::simd::neon`'s `FCVTN` helper (the f16 slices'
//! too).
//!
//! # Safety (all `unsafe fn` here)
//! NEON is part of every aarch64 CPU; pointers given to the `Simd` methods
//! are valid for the bytes each method says it reads or writes (the generic
//! kernels' loop guards see to it).

use std::arch::aarch64::*;

use super::super::colour::SHIFT;
use super::super::format::Element;
use super::super::plan::{Encoder, Kernel, Nv12Pair, Nv12Row, PackedRow, Plan, Yuv422Row};
use super::resample::Resample;
use super::scalar;
use super::vector::{bf16_high, Job, Quantise, Simd, Words, BF16, BF16_FAST, DIV, F16, FMA, REFINED};
use crate::simd::neon::f16x8_of;

// `shr_yuv` shifts by a literal (the intrinsics' shift types differ).
const _: () = assert!(SHIFT == 20);

mod stamped {
    use super::Neon;
    crate::layout::kernels::stamp_kernels!(Neon, ["neon"]: conversion, words, int8);
}

pub(crate) fn encoders(element: Element, planar: bool, channels: usize, identity: bool) -> Vec<Kernel> {
    let mut kernels = Vec::new();
    macro_rules! by_channels {
        ($f:ident, [$($g:tt),*], $kind:ident, $name:expr) => {
            kernels.push(Kernel {
                name: $name,
                encoder: match channels {
                    1 => Encoder::$kind(stamped::$f::<1, $($g),*>),
                    3 => Encoder::$kind(stamped::$f::<3, $($g),*>),
                    _ => Encoder::$kind(stamped::$f::<4, $($g),*>),
                },
            })
        };
    }
    // One kernel per arithmetic (see `FMA`), in the order a plan tries them.
    macro_rules! fma_then_div {
        ($f:ident, [$($g:tt),*], $kind:ident, $name:expr) => {{
            by_channels!($f, [$($g,)* FMA], $kind, concat!($name, "/fma"));
            by_channels!($f, [$($g,)* REFINED], $kind, concat!($name, "/refined"));
            by_channels!($f, [$($g,)* DIV], $kind, concat!($name, "/div"));
        }};
    }
    match (element, planar) {
        (Element::U8, false) if identity => by_channels!(packed_u8, [], Packed, "neon/u8"),
        (Element::Bf16, false) => {
            fma_then_div!(packed_16, [BF16_FAST], Packed, "neon/bf16-fast");
            fma_then_div!(packed_16, [BF16], Packed, "neon/bf16");
        }
        (Element::F16, false) => fma_then_div!(packed_16, [F16], Packed, "neon/f16"),
        (Element::F32, true) => fma_then_div!(planar, [false], Planar, "neon/planar-f32"),
        (Element::F16, true) => fma_then_div!(planar, [true], Planar, "neon/planar-f16"),
        _ => {}
    }
    kernels
}

pub(crate) fn nv12_decoder(bytes: usize) -> (Nv12Row, &'static str) {
    match bytes {
        3 => (stamped::nv12_row::<3>, "neon/nv12-rgb"),
        _ => (stamped::nv12_row::<4>, "neon/nv12"),
    }
}

pub(crate) fn yuv422_decoder(bytes: usize, y_first: bool) -> (Yuv422Row, &'static str) {
    match (bytes, y_first) {
        (3, true) => (stamped::yuv422_row::<3, true>, "neon/yuyv-rgb"),
        (3, false) => (stamped::yuv422_row::<3, false>, "neon/uyvy-rgb"),
        (_, true) => (stamped::yuv422_row::<4, true>, "neon/yuyv"),
        (_, false) => (stamped::yuv422_row::<4, false>, "neon/uyvy"),
    }
}

pub(crate) fn nv12_pair_decoder(bytes: usize) -> Nv12Pair {
    match bytes {
        3 => stamped::nv12_pair::<3>,
        _ => stamped::nv12_pair::<4>,
    }
}

/// The int8 encoders: the fused multiply-add first, then the two exact divisions.
pub(crate) fn int8_encoders(channels: usize, dst_channels: usize) -> Vec<Kernel> {
    let mut kernels = Vec::new();
    for (arith, suffix) in [(FMA, "/fma"), (DIV, "/div")] {
        let encoder: PackedRow = match (channels, dst_channels == 3, arith) {
            (1, false, FMA) => stamped::packed_i8::<1, 4, FMA>,
            (1, false, _) => stamped::packed_i8::<1, 4, DIV>,
            (1, true, FMA) => stamped::packed_i8::<1, 3, FMA>,
            (1, true, _) => stamped::packed_i8::<1, 3, DIV>,
            (3, false, FMA) => stamped::packed_i8::<3, 4, FMA>,
            (3, false, _) => stamped::packed_i8::<3, 4, DIV>,
            (3, true, FMA) => stamped::packed_i8::<3, 3, FMA>,
            (3, true, _) => stamped::packed_i8::<3, 3, DIV>,
            (_, false, FMA) => stamped::packed_i8::<4, 4, FMA>,
            (_, false, _) => stamped::packed_i8::<4, 4, DIV>,
            (_, true, FMA) => stamped::packed_i8::<4, 3, FMA>,
            (_, true, _) => stamped::packed_i8::<4, 3, DIV>,
        };
        let name = match (dst_channels, suffix) {
            (3, "/fma") => "neon/i8-rgb/fma",
            (3, _) => "neon/i8-rgb/div",
            (_, "/fma") => "neon/i8/fma",
            _ => "neon/i8/div",
        };
        kernels.push(Kernel { name, encoder: Encoder::Packed(encoder) });
    }
    kernels
}

/// The 10-bit decoder: P010, or I010 with `low`.
pub(crate) fn yuv10_decoder(bytes: usize, low: bool) -> (Nv12Row, &'static str) {
    match (bytes, low) {
        (3, false) => (stamped::yuv10_row::<3, false>, "neon/p010-rgb"),
        (_, false) => (stamped::yuv10_row::<4, false>, "neon/p010"),
        (3, true) => (stamped::yuv10_row::<3, true>, "neon/i010-rgb"),
        (_, true) => (stamped::yuv10_row::<4, true>, "neon/i010"),
    }
}

/// 4-byte pixels to 3-byte ones (`kernels::byte_reorder`), 16 pixels a
/// step: `vld4q` splits the channels, `vst3q` writes three.
pub(crate) fn drop_pad<const SWAP: bool>(_: &Plan, src: &[u8], dst: &mut [u8]) {
    let n = (src.len() / 4).min(dst.len() / 3);
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: NEON is part of every aarch64 CPU; i + 16 <= n bounds the
        // 64 bytes read at 4i and the 48 written at 3i.
        unsafe {
            let x = vld4q_u8(src.as_ptr().add(4 * i));
            let (first, last) = if SWAP { (x.2, x.0) } else { (x.0, x.2) };
            vst3q_u8(dst.as_mut_ptr().add(3 * i), uint8x16x3_t(first, x.1, last));
        }
        i += 16;
    }
    scalar::drop_pad_pixels::<SWAP>(&src[4 * i..], &mut dst[3 * i..]);
}

// The YUV rearrangements (kernels::splitter, interleaver):
// camera rows into the NV12 decoders' input.

/// `vld2q_u8` deinterleaves 32 bytes into 16 even and 16 odd bytes.
#[target_feature(enable = "neon")]
pub(crate) unsafe fn split_row(row: &[u8], even: &mut [u8], odd: &mut [u8]) {
    let n = (row.len() / 2).min(even.len()).min(odd.len());
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: i + 16 <= n bounds the 32 bytes read and the 16 written to each output.
        let x = vld2q_u8(row.as_ptr().add(2 * i));
        vst1q_u8(even.as_mut_ptr().add(i), x.0);
        vst1q_u8(odd.as_mut_ptr().add(i), x.1);
        i += 16;
    }
    scalar::split_row(&row[2 * i..], &mut even[i..], &mut odd[i..]);
}

/// 16 bytes of U and of V a step: `vst2q_u8` (I420) or `vst2q_u16` (I010).
#[target_feature(enable = "neon")]
pub(crate) unsafe fn interleave_row<const BYTES: usize>(u: &[u8], v: &[u8], uv: &mut [u8]) {
    const { assert!(BYTES == 1 || BYTES == 2) };
    let n = u.len().min(v.len()).min(uv.len() / 2);
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: i + 16 <= n bounds the 16 bytes read from u and v and the 32 written.
        let (a, b, out) = (u.as_ptr().add(i), v.as_ptr().add(i), uv.as_mut_ptr().add(2 * i));
        if BYTES == 1 {
            vst2q_u8(out, uint8x16x2_t(vld1q_u8(a), vld1q_u8(b)));
        } else {
            vst2q_u16(out.cast(), uint16x8x2_t(vld1q_u16(a.cast()), vld1q_u16(b.cast())));
        }
        i += 16;
    }
    scalar::interleave_row::<BYTES>(&u[i..], &v[i..], &mut uv[2 * i..]);
}

/// The resize row loops: the portable ones, vectorised by LLVM for NEON.
impl Resample for Neon {}

pub(crate) mod resample {
    crate::layout::kernels::stamp_kernels!(super::Neon, ["neon"]: resample);
}

/// Four NEON registers: the 16 lanes of a vector of the abstraction.
type X4<T> = [T; 4];

#[inline(always)]
fn each<T: Copy, U>(a: X4<T>, f: impl Fn(T) -> U) -> X4<U> {
    [f(a[0]), f(a[1]), f(a[2]), f(a[3])]
}

/// `Simd` methods that are one intrinsic on each of the four registers
/// (on x86 one intrinsic is the whole method: `arithmetic!`).
macro_rules! per_register {
    ($($name:ident($($arg:ident: $t:ty),+) -> $out:ty = $intrinsic:ident($($operand:ident),+);)+) => {$(
        #[inline(always)]
        unsafe fn $name($($arg: $t),+) -> $out {
            [
                $intrinsic($($operand[0]),+),
                $intrinsic($($operand[1]),+),
                $intrinsic($($operand[2]),+),
                $intrinsic($($operand[3]),+),
            ]
        }
    )+};
}

/// The 16 bytes of `x` widened to i32.
#[inline(always)]
unsafe fn widen(x: uint8x16_t) -> X4<int32x4_t> {
    let lo = vmovl_u8(vget_low_u8(x));
    let hi = vmovl_high_u8(x);
    each([vmovl_u16(vget_low_u16(lo)), vmovl_high_u16(lo), vmovl_u16(vget_low_u16(hi)), vmovl_high_u16(hi)], |w| {
        vreinterpretq_s32_u32(w)
    })
}

/// NEON (every aarch64 core).
#[derive(Clone, Copy)]
pub(super) struct Neon;

pub(super) struct NeonTables {
    /// R and B swapped (RGB <-> BGR); the plans' other order is the identity,
    /// and GRAY's map ([0, 0, 0]) reads the same either way.
    swap: bool,
    /// Packed 4:2:2 rows: YUYV (else UYVY).
    y_first: bool,
    pad_u8: uint8x16_t,
    pad_u16: uint16x8_t,
}

impl Neon {
    /// Arithmetic shift right by `colour::SHIFT`.
    #[inline(always)]
    unsafe fn shr_yuv(a: X4<int32x4_t>) -> X4<int32x4_t> {
        each(a, |a| vshrq_n_s32::<20>(a))
    }

    /// 16 source pixels as three byte vectors, in destination channel order.
    #[inline(always)]
    unsafe fn load16<const C: usize>(swap: bool, src: *const u8) -> [uint8x16_t; 3] {
        let [a, b, c] = match C {
            1 => {
                let g = vld1q_u8(src);
                [g, g, g]
            }
            3 => {
                let v = vld3q_u8(src);
                [v.0, v.1, v.2]
            }
            _ => {
                let v = vld4q_u8(src);
                [v.0, v.1, v.2]
            }
        };
        if swap {
            [c, b, a]
        } else {
            [a, b, c]
        }
    }

    /// 16 chroma bytes widened, less 128.
    #[inline(always)]
    unsafe fn minus_128(x: uint8x16_t) -> X4<int32x4_t> {
        each(widen(x), |w| vsubq_s32(w, vdupq_n_s32(128)))
    }

    /// NV12's fixed-point sums of 16 even and 16 odd pixels as bytes, per
    /// channel (R, G, B): pixels 0-15, then 16-31.
    #[inline(always)]
    unsafe fn sums_to_bytes(even: [X4<int32x4_t>; 3], odd: [X4<int32x4_t>; 3]) -> [[uint8x16_t; 2]; 3] {
        let [even, odd] = [even.map(|x| Self::shr_yuv(x)), odd.map(|x| Self::shr_yuv(x))];
        // Saturating narrows clamp as `saturate_cast` does.
        let bytes = |x: X4<int32x4_t>| -> uint8x16_t {
            let s = each(x, |x| vqmovn_s32(x));
            vcombine_u8(vqmovun_s16(vcombine_s16(s[0], s[1])), vqmovun_s16(vcombine_s16(s[2], s[3])))
        };
        // Even and odd pixels zipped.
        let pixels = |k: usize| {
            let (e, o) = (bytes(even[k]), bytes(odd[k]));
            [vzip1q_u8(e, o), vzip2q_u8(e, o)]
        };
        [pixels(0), pixels(1), pixels(2)]
    }

    /// 16 f32 as 16-bit floats of `KIND`: pixels 0-7, then 8-15.
    #[inline(always)]
    unsafe fn narrow<const KIND: u8>(f: X4<float32x4_t>) -> [uint16x8_t; 2] {
        if KIND == F16 {
            return [f16x8_of(f[0], f[1]), f16x8_of(f[2], f[3])];
        }
        let h = each(bf16_high::<Self, KIND>(f), |x| vshrn_n_u32::<16>(vreinterpretq_u32_s32(x)));
        [vcombine_u16(h[0], h[1]), vcombine_u16(h[2], h[3])]
    }
}

impl Simd for Neon {
    const LANES: usize = 16;
    type I = X4<int32x4_t>;
    type F = X4<float32x4_t>;
    type Tables = NeonTables;

    #[inline(always)]
    unsafe fn tables<const C: usize>(job: Job<'_>) -> NeonTables {
        let (swap, pad, y_first) = match job {
            Job::Bytes(plan) | Job::Planar(plan) | Job::Packed16(plan) | Job::Quads(plan) => {
                (plan.map == [2, 1, 0], plan.pad, false)
            }
            Job::Nv12 { pad, swapped } => (swapped, pad as u32, false),
            Job::Yuv422 { pad, swapped, y_first } => (swapped, pad as u32, y_first),
        };
        NeonTables { swap, y_first, pad_u8: vdupq_n_u8(pad as u8), pad_u16: vdupq_n_u16(pad as u16) }
    }

    #[inline(always)]
    unsafe fn splat(x: f32) -> Self::F {
        [vdupq_n_f32(x); 4]
    }
    #[inline(always)]
    unsafe fn splat_i(x: i32) -> Self::I {
        [vdupq_n_s32(x); 4]
    }
    per_register! {
        to_f32(x: Self::I) -> Self::F = vcvtq_f32_s32(x);
        sub(a: Self::F, b: Self::F) -> Self::F = vsubq_f32(a, b);
        mul(a: Self::F, b: Self::F) -> Self::F = vmulq_f32(a, b);
        div(a: Self::F, b: Self::F) -> Self::F = vdivq_f32(a, b);
        mul_add(a: Self::F, b: Self::F, c: Self::F) -> Self::F = vfmaq_f32(c, a, b);
        neg_mul_add(a: Self::F, b: Self::F, c: Self::F) -> Self::F = vfmsq_f32(c, a, b);
        bits(f: Self::F) -> Self::I = vreinterpretq_s32_f32(f);
        add_i(a: Self::I, b: Self::I) -> Self::I = vaddq_s32(a, b);
        and_i(a: Self::I, b: Self::I) -> Self::I = vandq_s32(a, b);
        mul_i(a: Self::I, b: Self::I) -> Self::I = vmulq_s32(a, b);
        // One multiply-accumulate per register for the chroma terms.
        add_chroma(acc: Self::I, x: Self::I, factor: Self::I) -> Self::I = vmlaq_s32(acc, x, factor);
    }
    #[inline(always)]
    unsafe fn shr16(a: Self::I) -> Self::I {
        each(a, |a| vreinterpretq_s32_u32(vshrq_n_u32::<16>(vreinterpretq_u32_s32(a))))
    }

    #[inline(always)]
    unsafe fn rgbx_u8<const C: usize>(t: &NeonTables, src: *const u8, dst: *mut u8) {
        let [r, g, b] = Self::load16::<C>(t.swap, src);
        vst4q_u8(dst, uint8x16x4_t(r, g, b, t.pad_u8));
    }

    #[inline(always)]
    unsafe fn channels<const C: usize, const PACKED: bool>(t: &NeonTables, src: *const u8) -> [Self::I; 3] {
        let [r, g, b] = Self::load16::<C>(t.swap, src);
        if C == 1 {
            let x = widen(r);
            return [x, x, x];
        }
        [widen(r), widen(g), widen(b)]
    }

    #[inline(always)]
    unsafe fn store_f32(out: *mut u8, f: Self::F) {
        let out = out.cast::<f32>();
        for (q, x) in f.into_iter().enumerate() {
            vst1q_f32(out.add(4 * q), x);
        }
    }
    #[inline(always)]
    unsafe fn store_f16(out: *mut u8, f: Self::F) {
        let out = out.cast::<u16>();
        vst1q_u16(out, f16x8_of(f[0], f[1]));
        vst1q_u16(out.add(8), f16x8_of(f[2], f[3]));
    }

    #[inline(always)]
    unsafe fn store_rgbx16<const KIND: u8>(t: &NeonTables, out: *mut u8, rgb: [Self::F; 3]) {
        let [r, g, b] = [Self::narrow::<KIND>(rgb[0]), Self::narrow::<KIND>(rgb[1]), Self::narrow::<KIND>(rgb[2])];
        let out = out.cast::<u16>();
        for h in 0..2 {
            vst4q_u16(out.add(32 * h), uint16x8x4_t(r[h], g[h], b[h], t.pad_u16));
        }
    }

    #[inline(always)]
    unsafe fn luma_pairs(y: *const u8, offset: u8) -> [Self::I; 2] {
        let l = vld2q_u8(y);
        [widen(vqsubq_u8(l.0, vdupq_n_u8(offset))), widen(vqsubq_u8(l.1, vdupq_n_u8(offset)))]
    }
    /// `vld4q` splits 16 pairs into Y0, U, Y1, V (YUYV) or U, Y0, V, Y1 (UYVY).
    #[inline(always)]
    unsafe fn luma_products_422<const Y_FIRST: bool>(row: *const u8, offset: u8, factor: Self::I) -> [Self::I; 2] {
        let q = vld4q_u8(row);
        let (y0, y1) = if Y_FIRST { (q.0, q.2) } else { (q.1, q.3) };
        let product = |y: uint8x16_t| Self::mul_i(widen(vqsubq_u8(y, vdupq_n_u8(offset))), factor);
        [product(y0), product(y1)]
    }
    #[inline(always)]
    unsafe fn chroma_422(t: &NeonTables, row: *const u8) -> [Self::I; 2] {
        let q = vld4q_u8(row);
        let (u, v) = if t.y_first { (q.1, q.3) } else { (q.0, q.2) };
        [Self::minus_128(u), Self::minus_128(v)]
    }
    #[inline(always)]
    unsafe fn chroma_planes(a: *const u8, b: *const u8) -> [Self::I; 2] {
        [Self::minus_128(vld1q_u8(a)), Self::minus_128(vld1q_u8(b))]
    }
    #[inline(always)]
    unsafe fn chroma(_: &NeonTables, uv: *const u8) -> [Self::I; 2] {
        let c = vld2q_u8(uv);
        [Self::minus_128(c.0), Self::minus_128(c.1)]
    }
    #[inline(always)]
    unsafe fn store_rgbx_sums(t: &NeonTables, out: *mut u8, even: [Self::I; 3], odd: [Self::I; 3]) {
        let [r, g, b] = Self::sums_to_bytes(even, odd);
        let (first, last) = if t.swap { (b, r) } else { (r, b) };
        for h in [0, 1] {
            vst4q_u8(out.add(64 * h), uint8x16x4_t(first[h], g[h], last[h], t.pad_u8));
        }
    }
    /// As `store_rgbx_sums`, with `vst3q` (no pad).
    #[inline(always)]
    unsafe fn store_rgb_sums(t: &NeonTables, out: *mut u8, even: [Self::I; 3], odd: [Self::I; 3]) {
        let [r, g, b] = Self::sums_to_bytes(even, odd);
        let (first, last) = if t.swap { (b, r) } else { (r, b) };
        for h in [0, 1] {
            vst3q_u8(out.add(48 * h), uint8x16x3_t(first[h], g[h], last[h]));
        }
    }
    /// R, G, B or B, G, R, then the pad (RGBx, BGRx).
    fn nv12_positions(pos: [usize; 3]) -> bool {
        pos == [0, 1, 2] || pos == [2, 1, 0]
    }
}

/// `vld2q_u16` splits 8 word pairs into the even and the odd words.
impl Words for Neon {
    #[inline(always)]
    unsafe fn words10<const LOW: bool>(p: *const u8) -> [X4<int32x4_t>; 2] {
        let (a, b) = (vld2q_u16(p.cast()), vld2q_u16(p.add(32).cast()));
        let ten = |w: uint16x8_t| if LOW { vandq_u16(w, vdupq_n_u16(0x3FF)) } else { vshrq_n_u16::<6>(w) };
        let widen = |lo: uint16x8_t, hi: uint16x8_t| {
            let (lo, hi) = (ten(lo), ten(hi));
            each(
                [vmovl_u16(vget_low_u16(lo)), vmovl_high_u16(lo), vmovl_u16(vget_low_u16(hi)), vmovl_high_u16(hi)],
                |w| vreinterpretq_s32_u32(w),
            )
        };
        [widen(a.0, b.0), widen(a.1, b.1)]
    }
}

impl Quantise for Neon {
    #[inline(always)]
    unsafe fn round_even(f: X4<float32x4_t>) -> X4<int32x4_t> {
        // FCVTNS: to nearest, ties to even; clamped first so that a zero point cannot wrap.
        each(f, |x| vcvtnq_s32_f32(vminq_f32(vmaxq_f32(x, vdupq_n_f32(-32768.0)), vdupq_n_f32(32767.0))))
    }
    /// Saturating narrows to i8, then `vst4q` / `vst3q`.
    #[inline(always)]
    unsafe fn store_i8<const BYTES: usize>(out: *mut u8, rgb: [X4<int32x4_t>; 3], pad: X4<int32x4_t>) {
        let bytes = |x: X4<int32x4_t>| -> int8x16_t {
            let s = each(x, |x| vqmovn_s32(x));
            vcombine_s8(vqmovn_s16(vcombine_s16(s[0], s[1])), vqmovn_s16(vcombine_s16(s[2], s[3])))
        };
        let [r, g, b] = [bytes(rgb[0]), bytes(rgb[1]), bytes(rgb[2])];
        if BYTES == 4 {
            vst4q_s8(out.cast(), int8x16x4_t(r, g, b, bytes(pad)));
        } else {
            vst3q_s8(out.cast(), int8x16x3_t(r, g, b));
        }
    }
}
