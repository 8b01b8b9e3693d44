//! aarch64 Advanced SIMD (NEON) kernels, 16 pixels a step: `vld3q_u8` /
//! `vld4q_u8` de-interleave the source, `vst4q` interleaves the destination.
//! IEEE half is converted with `FCVTN`/`FCVTN2` (f32 to f16) and
//! `FCVTL`/`FCVTL2` (f16 to f32) in inline assembly: Rust's f16 NEON
//! intrinsics are not stable yet. These are base Armv8-A Advanced SIMD
//! instructions (not the optional FEAT_FP16 arithmetic), so every aarch64
//! core has them, a Cortex-A72 included.
//!
//! # Safety (all `unsafe fn` here)
//! NEON is part of every aarch64 CPU; loop guards bound every load by the
//! source slice and every store by the destination slice.

use std::arch::aarch64::*;
use std::arch::asm;

use super::super::plan::Plan;
use super::super::float::{f16_to_f32, f32_to_f16};
use super::super::format::Element;
use super::scalar::{self, bt601};
use super::{affine, Encoder, Kernel, Nv12Row, BF16, BF16_FAST, DIV, F16, FMA, REFINED};

pub(super) fn encoders(element: Element, planar: bool, channels: usize, identity: bool) -> Vec<Kernel> {
    let mut kernels = Vec::new();
    macro_rules! by_channels {
        ($f:ident, [$($g:tt),*], $kind:ident, $name:expr) => {
            kernels.push(Kernel {
                name: $name,
                encoder: match channels {
                    1 => Encoder::$kind($f::<1, $($g),*>),
                    3 => Encoder::$kind($f::<3, $($g),*>),
                    _ => Encoder::$kind($f::<4, $($g),*>),
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
        (Element::F32, true) => fma_then_div!(planes, [false], Planar, "neon/planar-f32"),
        (Element::F16, true) => fma_then_div!(planes, [true], Planar, "neon/planar-f16"),
        _ => {}
    }
    kernels
}

pub(super) fn nv12_decoder() -> (Nv12Row, &'static str) {
    (nv12_row, "neon/nv12")
}

/// Whether the plan swaps R and B (RGB <-> BGR); the other order is identity.
/// GRAY's map ([0, 0, 0]) reads the same either way.
fn swaps(map: [usize; 3]) -> bool {
    map == [2, 1, 0]
}

/// 16 source pixels as three byte vectors, in destination channel order.
#[inline(always)]
unsafe fn load16<const C: usize, const SWAP: bool>(src: *const u8) -> [uint8x16_t; 3] {
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
    if SWAP {
        [c, b, a]
    } else {
        [a, b, c]
    }
}

/// The 16 bytes of `x` as four vectors of 4 f32.
#[inline(always)]
unsafe fn widen(x: uint8x16_t) -> [float32x4_t; 4] {
    let lo = vmovl_u8(vget_low_u8(x));
    let hi = vmovl_high_u8(x);
    [vmovl_u16(vget_low_u16(lo)), vmovl_high_u16(lo), vmovl_u16(vget_low_u16(hi)), vmovl_high_u16(hi)]
        .map(|w| vcvtq_f32_u32(w))
}

/// `(x - mean) / scale` in the arithmetic `ARITH` (see `FMA`), with the
/// constants `affine::<ARITH>` gives.
#[inline(always)]
unsafe fn normalise<const ARITH: u8>(x: float32x4_t, a: float32x4_t, b: float32x4_t, c: float32x4_t) -> float32x4_t {
    match ARITH {
        FMA => vfmaq_f32(a, x, b),
        REFINED => {
            let t = vsubq_f32(x, a);
            let q = vmulq_f32(t, c);
            vfmaq_f32(q, vfmsq_f32(t, q, b), c)
        }
        _ => vdivq_f32(vsubq_f32(x, a), b),
    }
}

unsafe fn packed_u8<const C: usize>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
    if swaps(plan.map) {
        packed_u8_in::<C, true>(plan, src, dst)
    } else {
        packed_u8_in::<C, false>(plan, src, dst)
    }
}

unsafe fn packed_u8_in<const C: usize, const SWAP: bool>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
    let n = dst.len() / 4;
    let pad = vdupq_n_u8(plan.pad as u8);
    let mut i = 0;
    while i + 16 <= n && (i + 16) * C <= src.len() {
        let [r, g, b] = load16::<C, SWAP>(src.as_ptr().add(i * C));
        vst4q_u8(dst.as_mut_ptr().add(i * 4), uint8x16x4_t(r, g, b, pad));
        i += 16;
    }
    scalar::packed::<u8, C>(plan, &src[(i * C).min(src.len())..], &mut dst[i * 4..]);
}

/// Four f32 to bf16 bits (`BF16` or `BF16_FAST` rounding), in integer arithmetic.
#[inline(always)]
unsafe fn bf16_of<const KIND: u8>(f: float32x4_t) -> uint16x4_t {
    let bits = vreinterpretq_u32_f32(f);
    let rounded = if KIND == BF16_FAST {
        vaddq_u32(bits, vdupq_n_u32(0x8000))
    } else {
        let lsb = vandq_u32(vshrq_n_u32::<16>(bits), vdupq_n_u32(1));
        vaddq_u32(vaddq_u32(bits, vdupq_n_u32(0x7FFF)), lsb)
    };
    vshrn_n_u32::<16>(rounded)
}

/// Eight f32 (`lo`, then `hi`) to IEEE half bits with `FCVTN` / `FCVTN2`:
/// rounded to nearest, ties to even (the FPCR's default mode, which Rust code
/// may assume and which Linux gives every process), overflow to infinity,
/// subnormal halves kept, a NaN quieted with the top of its payload kept:
/// what `half`'s software conversion ([`f32_to_f16`]) gives, bit for bit.
#[inline(always)]
fn f16x8_of(lo: float32x4_t, hi: float32x4_t) -> uint16x8_t {
    let out: uint16x8_t;
    // SAFETY: the two instructions exist on every aarch64 CPU (Advanced SIMD,
    // which the aarch64 targets enable), and touch only the vector registers
    // allocated here: they read `lo` and `hi` and write `out`, which is an
    // `out` (not `lateout`) operand, so it never shares a register with `hi`,
    // read by FCVTN2 after FCVTN has written `out`. No memory (`nomem`), no
    // stack (`nostack`); the result depends only on the inputs (`pure`): the
    // rounding mode comes from the FPCR, which Rust requires to be at its
    // default. FCVTN may set FPSR's cumulative exception flags, as Rust's own
    // float arithmetic does, so `preserves_flags` is not claimed.
    unsafe {
        asm!(
            "fcvtn {out:v}.4h, {lo:v}.4s",
            "fcvtn2 {out:v}.8h, {hi:v}.4s",
            lo = in(vreg) lo,
            hi = in(vreg) hi,
            out = out(vreg) out,
            options(pure, nomem, nostack),
        );
    }
    out
}

/// Eight IEEE half bits to f32 with `FCVTL` / `FCVTL2` (lanes 0-3, then
/// 4-7): exact; a NaN keeps its payload and is quieted, as [`f16_to_f32`]
/// does (the FPCR's default: no default-NaN mode, no alternative half format).
#[inline(always)]
fn f32x8_of_f16(h: uint16x8_t) -> [float32x4_t; 2] {
    let (lo, hi): (float32x4_t, float32x4_t);
    // SAFETY: as in `f16x8_of`: base Advanced SIMD instructions on allocated
    // vector registers only. `lo` is an `out` operand, so FCVTL cannot
    // overwrite `h` before FCVTL2 reads it; `hi`, written last, may share
    // `h`'s register (`lateout`). No memory, no stack, pure; FPSR flags may
    // change (a signalling NaN raises Invalid), so flags are not preserved.
    unsafe {
        asm!(
            "fcvtl {lo:v}.4s, {h:v}.4h",
            "fcvtl2 {hi:v}.4s, {h:v}.8h",
            h = in(vreg) h,
            lo = out(vreg) lo,
            hi = lateout(vreg) hi,
            options(pure, nomem, nostack),
        );
    }
    [lo, hi]
}

/// `dst[i] = f16(src[i])` over the common length, 8 values a step.
pub(crate) fn f32_slice_to_f16(src: &[f32], dst: &mut [u16]) {
    let n = src.len().min(dst.len());
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n bounds the 8 values read from `src` and the 8
        // written to `dst`.
        unsafe {
            let [lo, hi] = [0, 4].map(|q| vld1q_f32(src.as_ptr().add(i + q)));
            vst1q_u16(dst.as_mut_ptr().add(i), f16x8_of(lo, hi));
        }
        i += 8;
    }
    for (d, &s) in dst[i..n].iter_mut().zip(&src[i..n]) {
        *d = f32_to_f16(s);
    }
}

/// `dst[i] = f32(src[i])` for IEEE half bits, over the common length.
pub(crate) fn f16_slice_to_f32(src: &[u16], dst: &mut [f32]) {
    let n = src.len().min(dst.len());
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: as in `f32_slice_to_f16`.
        unsafe {
            let [lo, hi] = f32x8_of_f16(vld1q_u16(src.as_ptr().add(i)));
            vst1q_f32(dst.as_mut_ptr().add(i), lo);
            vst1q_f32(dst.as_mut_ptr().add(i + 4), hi);
        }
        i += 8;
    }
    for (d, &s) in dst[i..n].iter_mut().zip(&src[i..n]) {
        *d = f16_to_f32(s);
    }
}

/// Eight f32 (`lo`, then `hi`) to 16-bit floats of `KIND`.
#[inline(always)]
unsafe fn narrow<const KIND: u8>(lo: float32x4_t, hi: float32x4_t) -> uint16x8_t {
    if KIND == F16 {
        f16x8_of(lo, hi)
    } else {
        vcombine_u16(bf16_of::<KIND>(lo), bf16_of::<KIND>(hi))
    }
}

/// Packed 16-bit floats (`KIND`): four per pixel, the pad slot the plan's pad.
unsafe fn packed_16<const C: usize, const KIND: u8, const ARITH: u8>(plan: &Plan, src: &[u8], dst: &mut [u8]) {
    if swaps(plan.map) {
        packed_16_in::<C, true, KIND, ARITH>(plan, src, dst)
    } else {
        packed_16_in::<C, false, KIND, ARITH>(plan, src, dst)
    }
}

unsafe fn packed_16_in<const C: usize, const SWAP: bool, const KIND: u8, const ARITH: u8>(
    plan: &Plan,
    src: &[u8],
    dst: &mut [u8],
) {
    let n = dst.len() / 8;
    let [a, b, c] = affine::<ARITH>(plan).map(|v| [0, 1, 2].map(|k| vdupq_n_f32(v[k])));
    let pad = vdupq_n_u16(plan.pad as u16);
    let mut i = 0;
    while i + 16 <= n && (i + 16) * C <= src.len() {
        let channels = load16::<C, SWAP>(src.as_ptr().add(i * C));
        // Pixels 0-7 and 8-15: per channel, a vector of 8 16-bit floats.
        let mut halves = [[vdupq_n_u16(0); 3]; 2];
        for k in 0..3 {
            let f = widen(channels[k]).map(|x| normalise::<ARITH>(x, a[k], b[k], c[k]));
            halves[0][k] = narrow::<KIND>(f[0], f[1]);
            halves[1][k] = narrow::<KIND>(f[2], f[3]);
        }
        let out = dst.as_mut_ptr().add(i * 8).cast::<u16>();
        for (h, [r, g, b]) in halves.into_iter().enumerate() {
            vst4q_u16(out.add(32 * h), uint16x8x4_t(r, g, b, pad));
        }
        i += 16;
    }
    scalar::packed::<u16, C>(plan, &src[(i * C).min(src.len())..], &mut dst[i * 8..]);
}

/// Three planes of f32 or (`HALF`) IEEE half.
unsafe fn planes<const C: usize, const HALF: bool, const ARITH: u8>(
    plan: &Plan,
    src: &[u8],
    p0: &mut [u8],
    p1: &mut [u8],
    p2: &mut [u8],
) {
    if swaps(plan.map) {
        planes_in::<C, true, HALF, ARITH>(plan, src, p0, p1, p2)
    } else {
        planes_in::<C, false, HALF, ARITH>(plan, src, p0, p1, p2)
    }
}

unsafe fn planes_in<const C: usize, const SWAP: bool, const HALF: bool, const ARITH: u8>(
    plan: &Plan,
    src: &[u8],
    p0: &mut [u8],
    p1: &mut [u8],
    p2: &mut [u8],
) {
    let size = if HALF { 2 } else { 4 };
    let n = p0.len().min(p1.len()).min(p2.len()) / size;
    let [a, b, c] = affine::<ARITH>(plan).map(|v| [0, 1, 2].map(|k| vdupq_n_f32(v[k])));
    let mut i = 0;
    while i + 16 <= n && (i + 16) * C <= src.len() {
        let channels = load16::<C, SWAP>(src.as_ptr().add(i * C));
        for (k, plane) in [&mut *p0, &mut *p1, &mut *p2].into_iter().enumerate() {
            let f = widen(channels[k]).map(|x| normalise::<ARITH>(x, a[k], b[k], c[k]));
            let out = plane.as_mut_ptr().add(i * size);
            if HALF {
                let out = out.cast::<u16>();
                vst1q_u16(out, f16x8_of(f[0], f[1]));
                vst1q_u16(out.add(8), f16x8_of(f[2], f[3]));
            } else {
                for (q, x) in f.into_iter().enumerate() {
                    vst1q_f32(out.cast::<f32>().add(4 * q), x);
                }
            }
        }
        i += 16;
    }
    let s = &src[(i * C).min(src.len())..];
    let (t0, t1, t2) = (&mut p0[i * size..], &mut p1[i * size..], &mut p2[i * size..]);
    if HALF {
        scalar::planar::<u16, C>(plan, s, t0, t1, t2)
    } else {
        scalar::planar::<f32, C>(plan, s, t0, t1, t2)
    }
}

/// 16 pixels of NV12: OpenCV's fixed-point arithmetic in i32 lanes, clamped
/// by saturating narrows as `saturate_cast` does.
unsafe fn nv12_row(y: &[u8], uv: &[u8], out: &mut [u8], pos: [usize; 3], pad: u8) {
    match pos {
        [0, 1, 2] => nv12_row_in::<false>(y, uv, out, pad),
        [2, 1, 0] => nv12_row_in::<true>(y, uv, out, pad),
        _ => scalar::nv12_row(y, uv, out, pos, pad),
    }
}

unsafe fn nv12_row_in<const SWAP: bool>(y: &[u8], uv: &[u8], out: &mut [u8], pad: u8) {
    use bt601::*;
    let n = y.len().min(uv.len()).min(out.len() / 4);
    let pad_bytes = vdupq_n_u8(pad);
    let signed = |x: uint16x8_t| -> [int32x4_t; 2] {
        [vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(x))), vreinterpretq_s32_u32(vmovl_high_u16(x))]
    };
    let mut i = 0;
    while i + 16 <= n {
        let luma = vqsubq_u8(vld1q_u8(y.as_ptr().add(i)), vdupq_n_u8(16));
        let [y0, y1] = signed(vmovl_u8(vget_low_u8(luma)));
        let [y2, y3] = signed(vmovl_high_u8(luma));
        let ys = [y0, y1, y2, y3].map(|v| vmlaq_n_s32(vdupq_n_s32(HALF), v, CY));
        let chroma = vld2_u8(uv.as_ptr().add(i));
        let u = signed(vmovl_u8(chroma.0)).map(|v| vsubq_s32(v, vdupq_n_s32(128)));
        let v = signed(vmovl_u8(chroma.1)).map(|v| vsubq_s32(v, vdupq_n_s32(128)));
        // Four chroma samples per vector; each serves two neighbouring pixels.
        let per_pixel = |t: [int32x4_t; 2]| [vzip1q_s32(t[0], t[0]), vzip2q_s32(t[0], t[0]), vzip1q_s32(t[1], t[1]), vzip2q_s32(t[1], t[1])];
        let rt = per_pixel([vmulq_n_s32(v[0], CVR), vmulq_n_s32(v[1], CVR)]);
        let gt = per_pixel([0, 1].map(|h| vmlaq_n_s32(vmulq_n_s32(v[h], CVG), u[h], CUG)));
        let bt = per_pixel([vmulq_n_s32(u[0], CUB), vmulq_n_s32(u[1], CUB)]);
        let channel = |t: [int32x4_t; 4]| -> uint8x16_t {
            let s = [0, 1, 2, 3].map(|q| vqmovn_s32(vshrq_n_s32::<20>(vaddq_s32(ys[q], t[q]))));
            vcombine_u8(vqmovun_s16(vcombine_s16(s[0], s[1])), vqmovun_s16(vcombine_s16(s[2], s[3])))
        };
        let (r, g, b) = (channel(rt), channel(gt), channel(bt));
        let (first, last) = if SWAP { (b, r) } else { (r, b) };
        vst4q_u8(out.as_mut_ptr().add(4 * i), uint8x16x4_t(first, g, last, pad_bytes));
        i += 16;
    }
    let pos = if SWAP { [2, 1, 0] } else { [0, 1, 2] };
    scalar::nv12_row(&y[i..], &uv[i.min(uv.len())..], &mut out[4 * i..], pos, pad);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// f32 values where a conversion to f16 can go wrong: every finite f16
    /// value, the midpoints between neighbours (ties) and one f32 ulp either
    /// side, both signs; the overflow edge (65520 is the tie with 2^16);
    /// NaNs with assorted payloads, signalling and quiet; infinities, f32
    /// subnormals; then arbitrary bit patterns.
    fn hard_f32_values() -> Vec<f32> {
        let mut values = Vec::new();
        for h in 0..0x7C00u16 {
            let x = f16_to_f32(h);
            let next = if h == 0x7BFF { 65536.0 } else { f16_to_f32(h + 1) };
            let mid = ((x as f64 + next as f64) / 2.0) as f32; // exact: 12 significant bits
            for v in [x, mid, f32::from_bits(mid.to_bits() - 1), f32::from_bits(mid.to_bits() + 1)] {
                values.extend([v, -v]);
            }
        }
        for bits in [
            0x7F80_0001u32, // signalling NaN, payload only in bits f16 drops
            0x7F80_2000,    // signalling NaN, payload in the kept bits
            0x7FA0_0000,
            0x7FBF_FFFF,
            0x7FC0_0000, // the quiet NaN
            0x7FC0_1FFF,
            0x7FD5_5555,
            0x7FFF_FFFF,
            0x7F80_0000, // infinity
            0x7F7F_FFFF, // f32::MAX
            0x0000_0001, // f32 subnormals
            0x007F_FFFF,
            0x0080_0000, // the smallest normal f32
        ] {
            values.extend([f32::from_bits(bits), f32::from_bits(bits | 0x8000_0000)]);
        }
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        values.extend((0..100_000).map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            f32::from_bits((state >> 32) as u32)
        }));
        values
    }

    #[test]
    fn fcvtn_matches_half_bit_for_bit() {
        let values = hard_f32_values();
        let mut got = vec![0u16; values.len()];
        f32_slice_to_f16(&values, &mut got);
        for (x, g) in values.iter().zip(got) {
            assert_eq!(g, f32_to_f16(*x), "f16 of {x:e} ({:#010x})", x.to_bits());
        }
        // The asm helper itself, lane order included.
        let lanes: [f32; 8] = [1.0, -2.0, 0.5, 65520.0, f32::NAN, 1e-8, 3.0e-5, -0.0];
        let mut out = [0u16; 8];
        // SAFETY: `lanes` and `out` hold 8 values each.
        unsafe {
            let [lo, hi] = [0, 4].map(|q| vld1q_f32(lanes.as_ptr().add(q)));
            vst1q_u16(out.as_mut_ptr(), f16x8_of(lo, hi));
        }
        assert_eq!(out, lanes.map(f32_to_f16));
    }

    #[test]
    fn fcvtl_matches_half_for_every_f16() {
        let all: Vec<u16> = (0..=u16::MAX).collect();
        // Odd offsets and lengths: the vector loop with a scalar tail.
        for (start, end) in [(0, all.len()), (3, all.len() - 5)] {
            let mut got = vec![0f32; end - start];
            f16_slice_to_f32(&all[start..end], &mut got);
            for (&h, g) in all[start..end].iter().zip(got) {
                let want = half::f16::from_bits(h).to_f32_const();
                assert_eq!(g.to_bits(), want.to_bits(), "f32 of f16 {h:#06x}");
            }
        }
    }
}
