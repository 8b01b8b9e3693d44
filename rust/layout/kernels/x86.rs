//! x86_64 implementations of [`Simd`]: AVX2 (8 pixels a step) and AVX-512
//! (16 pixels a step), the latter with whole-register byte permutes where the
//! CPU has VBMI. The kernels themselves are in vector.rs; here are the parts
//! that differ per instruction set: gathering a step of source pixels into
//! 32-bit lanes (in-lane byte shuffles, or VBMI permutes; a pad lane reads
//! 0), interleaving 16-bit floats and NV12's bytes into pixels, and the
//! registration of the kernels each level offers.
//!
//! # Safety (all `unsafe fn` here)
//! The caller must have checked that the CPU supports the kernel's level
//! (`SimdLevel::is_supported`); the plan only holds kernels of such a level.
//! Pointers given to the `Simd` methods are valid for the bytes each method
//! says it reads or writes (the generic kernels' loop guards see to it).

use std::arch::x86_64::*;

use super::super::colour::SHIFT;
use super::super::format::Element;
use super::super::plan::{Permutes, Plan, YuvOut};
use super::super::simd::SimdLevel;
use super::vector::{self, bf16_high, stamp, Job, Quads, Quantise, Simd, Words};
use super::{Encoder, Kernel, Nv12Pair, Nv12Row, Yuv422Row, BF16, BF16_FAST, BF16_NATIVE, DIV, F16, FMA, REFINED};

// `pixels_of_sums` takes `sum >> SHIFT` as the high word shifted by 4.
const _: () = assert!(SHIFT == 20);

mod avx2 {
    use super::*;
    stamp!(super::Avx2, "avx2,fma,f16c");
    stamp!(words: super::Avx2, "avx2,fma,f16c");
    stamp!(int8: super::Avx2, "avx2,fma,f16c");
}
mod avx512 {
    use super::*;
    stamp!(super::Avx512<false>, "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c");
    stamp!(quads: super::Avx512<false>, "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c");
    stamp!(words: super::Avx512<false>, "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c");
    stamp!(int8: super::Avx512<false>, "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c");
}
mod vbmi {
    use super::*;
    stamp!(super::Avx512<true>, "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx2,fma,f16c");
    stamp!(quads: super::Avx512<true>, "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx2,fma,f16c");
    stamp!(int8: super::Avx512<true>, "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx2,fma,f16c");
}
/// VBMI kernels with the AVX512-BF16 conversion instruction (`BF16_NATIVE`).
mod vbmi_bf16 {
    use super::*;
    stamp!(super::Avx512<true>, "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,avx512bf16,avx2,fma,f16c");
}

pub(super) fn encoders(
    level: SimdLevel,
    element: Element,
    planar: bool,
    channels: usize,
    identity: bool,
) -> Vec<Kernel> {
    use SimdLevel::{Avx2, Avx512, Avx512Vbmi};
    let mut kernels = Vec::new();
    // `by_channels!(path, [generics after C], Packed|Planar, name)`
    macro_rules! by_channels {
        ($($f:ident)::+, [$($g:tt),*], $kind:ident, $name:expr) => {
            kernels.push(Kernel {
                name: $name,
                encoder: match channels {
                    1 => Encoder::$kind($($f)::+::<1, $($g),*>),
                    3 => Encoder::$kind($($f)::+::<3, $($g),*>),
                    _ => Encoder::$kind($($f)::+::<4, $($g),*>),
                },
            })
        };
    }
    // One kernel per arithmetic (see `FMA`), in the order a plan tries them.
    macro_rules! fma_then_div {
        ($($f:ident)::+, [$($g:tt),*], $kind:ident, $name:expr) => {{
            by_channels!($($f)::+, [$($g,)* FMA], $kind, concat!($name, "/fma"));
            by_channels!($($f)::+, [$($g,)* REFINED], $kind, concat!($name, "/refined"));
            by_channels!($($f)::+, [$($g,)* DIV], $kind, concat!($name, "/div"));
        }};
    }
    match (level, element, planar) {
        // u8 layouts with normalisation round through the scalar tables.
        (_, Element::U8, false) if !identity => {}
        (Avx2, Element::U8, false) => by_channels!(avx2::packed_u8, [], Packed, "avx2/u8"),
        (Avx512, Element::U8, false) => by_channels!(avx512::packed_u8, [], Packed, "avx512/u8"),
        (Avx512Vbmi, Element::U8, false) => by_channels!(vbmi::packed_u8, [], Packed, "avx512vbmi/u8"),
        (Avx2, Element::Bf16, false) => {
            fma_then_div!(avx2::packed_16, [BF16_FAST], Packed, "avx2/bf16-fast");
            fma_then_div!(avx2::packed_16, [BF16], Packed, "avx2/bf16");
        }
        (Avx2, Element::F16, false) => fma_then_div!(avx2::packed_16, [F16], Packed, "avx2/f16"),
        (Avx512, Element::Bf16, false) => {
            fma_then_div!(avx512::packed_16_quads, [BF16_FAST], Packed, "avx512/bf16-fast");
            fma_then_div!(avx512::packed_16_quads, [BF16], Packed, "avx512/bf16");
        }
        (Avx512, Element::F16, false) => fma_then_div!(avx512::packed_16_quads, [F16], Packed, "avx512/f16"),
        (Avx512Vbmi, Element::Bf16, false) => {
            if is_x86_feature_detected!("avx512bf16") {
                fma_then_div!(vbmi_bf16::packed_16, [BF16_NATIVE], Packed, "avx512vbmi/bf16-native");
            }
            fma_then_div!(vbmi::packed_16_quads, [BF16_FAST], Packed, "avx512vbmi/bf16-fast");
            fma_then_div!(vbmi::packed_16_quads, [BF16], Packed, "avx512vbmi/bf16");
        }
        (Avx512Vbmi, Element::F16, false) => fma_then_div!(vbmi::packed_16, [F16], Packed, "avx512vbmi/f16"),
        (Avx2, Element::F32, true) => fma_then_div!(avx2::planar, [false], Planar, "avx2/planar-f32"),
        (Avx2, Element::F16, true) => fma_then_div!(avx2::planar, [true], Planar, "avx2/planar-f16"),
        (Avx512, Element::F32, true) => fma_then_div!(avx512::planar, [false], Planar, "avx512/planar-f32"),
        (Avx512, Element::F16, true) => fma_then_div!(avx512::planar, [true], Planar, "avx512/planar-f16"),
        (Avx512Vbmi, Element::F32, true) => fma_then_div!(vbmi::planar, [false], Planar, "avx512vbmi/planar-f32"),
        (Avx512Vbmi, Element::F16, true) => fma_then_div!(vbmi::planar, [true], Planar, "avx512vbmi/planar-f16"),
        _ => {}
    }
    kernels
}

pub(super) fn nv12_decoder(level: SimdLevel, bytes: usize) -> (Nv12Row, &'static str) {
    match (level, bytes) {
        (SimdLevel::Avx512, 3) => (avx512::nv12_row::<3>, "avx512/nv12-rgb"),
        (SimdLevel::Avx512, _) => (avx512::nv12_row::<4>, "avx512/nv12"),
        (SimdLevel::Avx512Vbmi, 3) => (avx512::nv12_row::<3>, "avx512vbmi/nv12-rgb"),
        (SimdLevel::Avx512Vbmi, _) => (avx512::nv12_row::<4>, "avx512vbmi/nv12"),
        (_, 3) => (avx2::nv12_row::<3>, "avx2/nv12-rgb"),
        _ => (avx2::nv12_row::<4>, "avx2/nv12"),
    }
}

pub(super) fn yuv422_decoder(level: SimdLevel, bytes: usize, y_first: bool) -> (Yuv422Row, &'static str) {
    let avx512 = matches!(level, SimdLevel::Avx512 | SimdLevel::Avx512Vbmi);
    match (avx512, bytes, y_first) {
        (true, 3, true) => (avx512::yuv422_row::<3, true>, "avx512/yuyv-rgb"),
        (true, 3, false) => (avx512::yuv422_row::<3, false>, "avx512/uyvy-rgb"),
        (true, _, true) => (avx512::yuv422_row::<4, true>, "avx512/yuyv"),
        (true, _, false) => (avx512::yuv422_row::<4, false>, "avx512/uyvy"),
        (false, 3, true) => (avx2::yuv422_row::<3, true>, "avx2/yuyv-rgb"),
        (false, 3, false) => (avx2::yuv422_row::<3, false>, "avx2/uyvy-rgb"),
        (false, _, true) => (avx2::yuv422_row::<4, true>, "avx2/yuyv"),
        (false, _, false) => (avx2::yuv422_row::<4, false>, "avx2/uyvy"),
    }
}

/// The int8 encoders of this level: the fused multiply-add first, then the
/// two exact divisions.
pub(super) fn int8_encoders(level: SimdLevel, channels: usize, dst_channels: usize) -> Vec<Kernel> {
    let mut kernels = Vec::new();
    macro_rules! push {
        ($m:ident, $name:literal) => {
            for (arith, suffix) in [(FMA, "/fma"), (DIV, "/div")] {
                let encoder: super::PackedRow = match (channels, dst_channels == 3, arith) {
                    (1, false, FMA) => $m::packed_i8::<1, 4, FMA>,
                    (1, false, _) => $m::packed_i8::<1, 4, DIV>,
                    (1, true, FMA) => $m::packed_i8::<1, 3, FMA>,
                    (1, true, _) => $m::packed_i8::<1, 3, DIV>,
                    (3, false, FMA) => $m::packed_i8::<3, 4, FMA>,
                    (3, false, _) => $m::packed_i8::<3, 4, DIV>,
                    (3, true, FMA) => $m::packed_i8::<3, 3, FMA>,
                    (3, true, _) => $m::packed_i8::<3, 3, DIV>,
                    (_, false, FMA) => $m::packed_i8::<4, 4, FMA>,
                    (_, false, _) => $m::packed_i8::<4, 4, DIV>,
                    (_, true, FMA) => $m::packed_i8::<4, 3, FMA>,
                    (_, true, _) => $m::packed_i8::<4, 3, DIV>,
                };
                let name = match (dst_channels, suffix) {
                    (3, "/fma") => concat!($name, "-rgb/fma"),
                    (3, _) => concat!($name, "-rgb/div"),
                    (_, "/fma") => concat!($name, "/fma"),
                    _ => concat!($name, "/div"),
                };
                kernels.push(Kernel { name, encoder: Encoder::Packed(encoder) });
            }
        };
    }
    match level {
        SimdLevel::Avx512Vbmi => push!(vbmi, "avx512vbmi/i8"),
        SimdLevel::Avx512 => push!(avx512, "avx512/i8"),
        _ => push!(avx2, "avx2/i8"),
    }
    kernels
}

/// The 10-bit decoder (P010, or I010 with `low`) of this level (AVX-512's
/// serves both AVX-512 levels: it needs no VBMI).
pub(super) fn yuv10_decoder(level: SimdLevel, bytes: usize, low: bool) -> (Nv12Row, &'static str) {
    let avx512 = matches!(level, SimdLevel::Avx512 | SimdLevel::Avx512Vbmi);
    match (avx512, bytes, low) {
        (true, 3, false) => (avx512::yuv10_row::<3, false>, "avx512/p010-rgb"),
        (true, _, false) => (avx512::yuv10_row::<4, false>, "avx512/p010"),
        (true, 3, true) => (avx512::yuv10_row::<3, true>, "avx512/i010-rgb"),
        (true, _, true) => (avx512::yuv10_row::<4, true>, "avx512/i010"),
        (false, 3, false) => (avx2::yuv10_row::<3, false>, "avx2/p010-rgb"),
        (false, _, false) => (avx2::yuv10_row::<4, false>, "avx2/p010"),
        (false, 3, true) => (avx2::yuv10_row::<3, true>, "avx2/i010-rgb"),
        (false, _, true) => (avx2::yuv10_row::<4, true>, "avx2/i010"),
    }
}

/// In each 16-byte lane (4 pixel pairs of a packed 4:2:2 row), the mask
/// that puts pair k's first (`second`: its second) chroma byte in dword k,
/// zero-extended; with `swapped` the other way round.
fn chroma_422_mask(y_first: bool, swapped: bool, second: bool) -> [u8; 16] {
    let at = usize::from(y_first) + 2 * usize::from(second != swapped);
    std::array::from_fn(|i| if i % 4 == 0 { (4 * (i / 4) + at) as u8 } else { 0x80 })
}

/// In each 16-byte lane, pair k's even (`odd`) pixel's luma as the bytes
/// [0, Y, Y, 0] of dword k (see `luma_products`).
fn luma_422_mask(y_first: bool, odd: bool) -> [u8; 16] {
    let at = usize::from(!y_first) + 2 * usize::from(odd);
    std::array::from_fn(|i| if i % 4 == 1 || i % 4 == 2 { (4 * (i / 4) + at) as u8 } else { 0x80 })
}

pub(super) fn nv12_pair_decoder(level: SimdLevel, bytes: usize) -> Nv12Pair {
    match (level, bytes) {
        (SimdLevel::Avx512 | SimdLevel::Avx512Vbmi, 3) => avx512::nv12_pair::<3>,
        (SimdLevel::Avx512 | SimdLevel::Avx512Vbmi, _) => avx512::nv12_pair::<4>,
        (_, 3) => avx2::nv12_pair::<3>,
        _ => avx2::nv12_pair::<4>,
    }
}

/// The `shuffle_epi8` mask that puts a lane's 8 chroma pairs' first bytes
/// in its low half and their second bytes in its high half (`swapped`: the
/// other way round).
fn chroma_split(swapped: bool) -> [u8; 16] {
    let first = if swapped { 1 } else { 0 };
    std::array::from_fn(|i| (2 * (i % 8) + (first + i / 8) % 2) as u8)
}

/// Where AVX2's `channels` moves the source dwords of 8 pixels so that 4
/// pixels start each 16-byte lane, in pixel order (`Job::Planar`): one byte
/// apart for GRAY, `C` bytes apart otherwise. (`Permutes::spread` for `Job::Packed16`.)
const fn in_order(channels: usize) -> [i32; 8] {
    match channels {
        1 => [0, 0, 0, 0, 1, 1, 1, 1],
        3 => [0, 1, 2, 3, 3, 4, 5, 6],
        _ => [0, 1, 2, 3, 4, 5, 6, 7],
    }
}

/// `Simd`'s arithmetic for one x86 vector width: the intrinsic of each operation.
macro_rules! arithmetic {
    ($f:ty, $i:ty, $splat:ident, $splat_i:ident, $to_f32:ident, $sub:ident, $mul:ident, $div:ident, $fmadd:ident,
     $fnmadd:ident, $bits:ident, $add_i:ident, $and_i:ident, $mul_i:ident, $srli:ident) => {
        #[inline(always)]
        unsafe fn splat(x: f32) -> $f {
            $splat(x)
        }
        #[inline(always)]
        unsafe fn splat_i(x: i32) -> $i {
            $splat_i(x)
        }
        #[inline(always)]
        unsafe fn to_f32(x: $i) -> $f {
            $to_f32(x)
        }
        #[inline(always)]
        unsafe fn sub(a: $f, b: $f) -> $f {
            $sub(a, b)
        }
        #[inline(always)]
        unsafe fn mul(a: $f, b: $f) -> $f {
            $mul(a, b)
        }
        #[inline(always)]
        unsafe fn div(a: $f, b: $f) -> $f {
            $div(a, b)
        }
        #[inline(always)]
        unsafe fn mul_add(a: $f, b: $f, c: $f) -> $f {
            $fmadd(a, b, c)
        }
        #[inline(always)]
        unsafe fn neg_mul_add(a: $f, b: $f, c: $f) -> $f {
            $fnmadd(a, b, c)
        }
        #[inline(always)]
        unsafe fn bits(f: $f) -> $i {
            $bits(f)
        }
        #[inline(always)]
        unsafe fn add_i(a: $i, b: $i) -> $i {
            $add_i(a, b)
        }
        #[inline(always)]
        unsafe fn and_i(a: $i, b: $i) -> $i {
            $and_i(a, b)
        }
        #[inline(always)]
        unsafe fn mul_i(a: $i, b: $i) -> $i {
            $mul_i(a, b)
        }
        #[inline(always)]
        unsafe fn shr16(a: $i) -> $i {
            $srli::<16>(a)
        }
    };
}

/// AVX2, FMA and F16C: 8 pixels a step, in-lane byte shuffles (`Permutes`).
#[derive(Clone, Copy)]
pub(super) struct Avx2;

pub(super) struct Avx2Tables {
    /// Source dwords to 16-byte lanes (`channels`).
    permute: __m256i,
    /// `shuffle_epi8` masks, the same in both lanes: per channel for
    /// `channels`; the first alone for `rgbx_u8` and `store_rgbx_bytes`.
    masks: [__m256i; 3],
    /// The pad, where it goes in a 32-bit lane.
    pad: __m256i,
}

#[inline(always)]
unsafe fn both_lanes(mask: [u8; 16]) -> __m256i {
    let lane = _mm_loadu_si128(mask.as_ptr().cast());
    _mm256_set_m128i(lane, lane)
}

impl Simd for Avx2 {
    const LANES: usize = 8;
    type I = __m256i;
    type F = __m256;
    type Tables = Avx2Tables;

    #[inline(always)]
    unsafe fn tables<const C: usize>(job: Job<'_>) -> Avx2Tables {
        let zero = _mm256_setzero_si256();
        let load = |idx: [i32; 8]| _mm256_loadu_si256(idx.as_ptr().cast());
        let mut t = Avx2Tables { permute: zero, masks: [zero; 3], pad: zero };
        match job {
            Job::Bytes(plan) => {
                t.masks[0] = both_lanes(plan.permutes.lane_pixels);
                t.pad = _mm256_set1_epi32((plan.pad << 24) as i32);
            }
            Job::Planar(plan) => {
                t.permute = load(in_order(C));
                let [m0, m1, m2] = &plan.permutes.widen;
                t.masks = [both_lanes(*m0), both_lanes(*m1), both_lanes(*m2)];
            }
            Job::Packed16(plan) | Job::Quads(plan) => {
                t.permute = load(Permutes::spread(C));
                let [m0, m1, m2] = &plan.permutes.split;
                let load = |m: &[u8; 32]| _mm256_loadu_si256(m.as_ptr().cast());
                t.masks = [load(m0), load(m1), load(m2)];
                t.pad = _mm256_set1_epi32((plan.pad << 16) as i32);
            }
            Job::Yuv422 { pad, swapped, y_first } => {
                t.masks[0] = both_lanes(chroma_422_mask(y_first, swapped, false));
                t.masks[1] = both_lanes(chroma_422_mask(y_first, swapped, true));
                t.pad = _mm256_set1_epi16(i16::from(pad));
            }
            Job::Nv12 { swapped, pad } => {
                t.masks[0] = both_lanes(chroma_split(swapped));
                t.pad = _mm256_set1_epi16(i16::from(pad));
            }
        }
        t
    }

    #[inline(always)]
    fn src_bytes<const C: usize>() -> usize {
        // A 3-channel step loads 32 bytes for its 24.
        if C == 3 {
            32
        } else {
            8 * C
        }
    }

    arithmetic!(
        __m256,
        __m256i,
        _mm256_set1_ps,
        _mm256_set1_epi32,
        _mm256_cvtepi32_ps,
        _mm256_sub_ps,
        _mm256_mul_ps,
        _mm256_div_ps,
        _mm256_fmadd_ps,
        _mm256_fnmadd_ps,
        _mm256_castps_si256,
        _mm256_add_epi32,
        _mm256_and_si256,
        _mm256_mullo_epi32,
        _mm256_srli_epi32
    );

    #[inline(always)]
    unsafe fn rgbx_u8<const C: usize>(t: &Avx2Tables, src: *const u8, dst: *mut u8) {
        let v = match C {
            1 => _mm256_cvtepu8_epi32(_mm_loadl_epi64(src.cast())),
            3 => _mm256_permutevar8x32_epi32(_mm256_loadu_si256(src.cast()), _mm256_setr_epi32(0, 1, 2, 3, 3, 4, 5, 6)),
            _ => _mm256_loadu_si256(src.cast()),
        };
        _mm256_storeu_si256(dst.cast(), _mm256_or_si256(_mm256_shuffle_epi8(v, t.masks[0]), t.pad));
    }

    #[inline(always)]
    unsafe fn channels<const C: usize, const PACKED: bool>(t: &Avx2Tables, src: *const u8) -> [__m256i; 3] {
        let v = match C {
            1 => _mm256_castsi128_si256(_mm_loadl_epi64(src.cast())),
            _ => _mm256_loadu_si256(src.cast()),
        };
        // 4-byte pixels in pixel order are where the shuffles want them already.
        let v = if C == 4 && !PACKED { v } else { _mm256_permutevar8x32_epi32(v, t.permute) };
        let [m0, m1, m2] = t.masks;
        if C == 1 {
            // GRAY: the three channels are one.
            let x = _mm256_shuffle_epi8(v, m0);
            return [x, x, x];
        }
        [_mm256_shuffle_epi8(v, m0), _mm256_shuffle_epi8(v, m1), _mm256_shuffle_epi8(v, m2)]
    }

    #[inline(always)]
    unsafe fn store_f32(out: *mut u8, f: __m256) {
        _mm256_storeu_ps(out.cast(), f)
    }
    #[inline(always)]
    unsafe fn store_f16(out: *mut u8, f: __m256) {
        _mm_storeu_si128(out.cast(), _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f))
    }

    /// With each 16-bit float in the high half of its 32-bit lane, a blend
    /// puts R (or B) and G (or the pad) side by side, and the lane order of
    /// `spread` (0, 1, 4, 5 | 2, 3, 6, 7) lets two in-lane unpacks leave
    /// pixels 0-3 and 4-7 in order: no pack, no cross-lane permute.
    #[inline(always)]
    unsafe fn store_rgbx16<const KIND: u8>(t: &Avx2Tables, out: *mut u8, rgb: [__m256; 3]) {
        #[inline(always)]
        unsafe fn high_half<const KIND: u8>(f: __m256) -> __m256i {
            match KIND {
                // The 8 halves come out in lane order; widening keeps it.
                F16 => _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f))),
                _ => bf16_high::<Avx2, KIND>(f),
            }
        }
        let [r, g, b] = [high_half::<KIND>(rgb[0]), high_half::<KIND>(rgb[1]), high_half::<KIND>(rgb[2])];
        // 32-bit lanes of (R, G) and (B, pad) words.
        let rg = _mm256_blend_epi16::<0xAA>(_mm256_srli_epi32::<16>(r), g);
        let bp = _mm256_blend_epi16::<0xAA>(_mm256_srli_epi32::<16>(b), t.pad);
        _mm256_storeu_si256(out.cast(), _mm256_unpacklo_epi32(rg, bp));
        _mm256_storeu_si256(out.add(32).cast(), _mm256_unpackhi_epi32(rg, bp));
    }

    #[inline(always)]
    unsafe fn luma_pairs(y: *const u8, offset: u8) -> [__m256i; 2] {
        let even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        let l = _mm_shuffle_epi8(_mm_subs_epu8(_mm_loadu_si128(y.cast()), _mm_set1_epi8(offset as i8)), even_odd);
        [_mm256_cvtepu8_epi32(l), _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(l))]
    }
    /// `vpmaddwd`, one uop, multiplies exactly: each 32-bit lane holds the
    /// words `256 (Y - 128)` and `Y`, the factor `cy >> 8` and `cy & 255`,
    /// so the lane's sum is `Y * cy - 32768 * (cy >> 8)` (`luma_bias`). Both
    /// lanes hold the 16 luma bytes, so one byte shuffle makes the words of
    /// 8 pixels (the even ones or the odd ones), and an xor turns `Y` into
    /// the signed `Y - 128` in the high byte.
    #[inline(always)]
    unsafe fn luma_products(y: *const u8, offset: u8, factor: __m256i) -> [__m256i; 2] {
        let l =
            _mm256_subs_epu8(_mm256_broadcastsi128_si256(_mm_loadu_si128(y.cast())), _mm256_set1_epi8(offset as i8));
        // Pixel p's bytes [0, Y, Y, 0] in lane j's dword k, for p = 8j + 2k (even), 8j + 2k + 1 (odd).
        let z = -128;
        let even = _mm256_setr_epi8(
            z, 0, 0, z, z, 2, 2, z, z, 4, 4, z, z, 6, 6, z, z, 8, 8, z, z, 10, 10, z, z, 12, 12, z, z, 14, 14, z,
        );
        let odd = _mm256_add_epi8(even, _mm256_set1_epi32(0x0001_0100));
        let signed = _mm256_set1_epi32(0x8000);
        let product = |mask: __m256i| _mm256_madd_epi16(_mm256_xor_si256(_mm256_shuffle_epi8(l, mask), signed), factor);
        [product(even), product(odd)]
    }
    fn luma_factor(cy: i32) -> i32 {
        ((cy & 0xFF) << 16) | (cy >> 8)
    }
    fn luma_bias(cy: i32) -> i32 {
        -32768 * (cy >> 8)
    }
    #[inline(always)]
    unsafe fn chroma(t: &Avx2Tables, uv: *const u8) -> [__m256i; 2] {
        // U then V (or V then U, `swapped`): the split mask of `tables`.
        let c = _mm_shuffle_epi8(_mm_loadu_si128(uv.cast()), _mm256_castsi256_si128(t.masks[0]));
        let minus_128 = |h: __m128i| _mm256_sub_epi32(_mm256_cvtepu8_epi32(h), _mm256_set1_epi32(128));
        [minus_128(c), minus_128(_mm_srli_si128::<8>(c))]
    }
    /// 32 bytes are 8 pixel pairs, pairs 0-3 in lane 0 and 4-7 in lane 1,
    /// as `chroma` has them: byte shuffles alone make `luma_products`' words.
    #[inline(always)]
    unsafe fn luma_products_422<const Y_FIRST: bool>(row: *const u8, offset: u8, factor: __m256i) -> [__m256i; 2] {
        let q = _mm256_loadu_si256(row.cast());
        let offset = _mm256_set1_epi32(i32::from(offset) * 0x0001_0100);
        let signed = _mm256_set1_epi32(0x8000);
        let product = |mask: [u8; 16]| {
            let words = _mm256_subs_epu8(_mm256_shuffle_epi8(q, both_lanes(mask)), offset);
            _mm256_madd_epi16(_mm256_xor_si256(words, signed), factor)
        };
        [product(luma_422_mask(Y_FIRST, false)), product(luma_422_mask(Y_FIRST, true))]
    }
    #[inline(always)]
    unsafe fn chroma_422(t: &Avx2Tables, row: *const u8) -> [__m256i; 2] {
        let q = _mm256_loadu_si256(row.cast());
        let minus_128 = |mask: __m256i| _mm256_sub_epi32(_mm256_shuffle_epi8(q, mask), _mm256_set1_epi32(128));
        [minus_128(t.masks[0]), minus_128(t.masks[1])]
    }
    /// R, G, B (`RGB_ORDER`) and the pad of 16 pixels in pixel order, as
    /// `[pixels 0-3 | 8-11]` and `[pixels 4-7 | 12-15]`.
    const RGB_ORDER: bool = true;
    fn nv12_positions(pos: [usize; 3]) -> bool {
        pos == [0, 1, 2] || pos == [2, 1, 0]
    }
    #[inline(always)]
    unsafe fn store_rgbx_sums(t: &Avx2Tables, out: *mut u8, even: [__m256i; 3], odd: [__m256i; 3]) {
        let [lo, hi] = Self::pixels_of_sums(t, even, odd);
        _mm256_storeu_si256(out.cast(), _mm256_permute2x128_si256::<0x20>(lo, hi));
        _mm256_storeu_si256(out.add(32).cast(), _mm256_permute2x128_si256::<0x31>(lo, hi));
    }
    /// As `store_rgbx_sums`, then each lane's 4 pixels lose their pad bytes
    /// (12 bytes at its start) and the lanes' 12 bytes are put together: 8
    /// pixels in 24 bytes, stored as 16 + 8, twice.
    #[inline(always)]
    unsafe fn store_rgb_sums(t: &Avx2Tables, out: *mut u8, even: [__m256i; 3], odd: [__m256i; 3]) {
        let [lo, hi] = Self::pixels_of_sums(t, even, odd);
        let drop_pad = _mm256_setr_epi8(
            0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -128, -128, -128, -128, //
            0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -128, -128, -128, -128,
        );
        let gather = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7);
        for (k, eight) in [_mm256_permute2x128_si256::<0x20>(lo, hi), _mm256_permute2x128_si256::<0x31>(lo, hi)]
            .into_iter()
            .enumerate()
        {
            let packed = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(eight, drop_pad), gather);
            let at = out.add(24 * k);
            _mm_storeu_si128(at.cast(), _mm256_castsi256_si128(packed));
            _mm_storel_epi64(at.add(16).cast(), _mm256_extracti128_si256::<1>(packed));
        }
    }
}

impl Avx2 {
    /// 16 pixels' bytes from the sums of their even and odd pixels (pairs
    /// 0-3 | 4-7 in the lanes): each even sum's high word beside its odd
    /// neighbour's puts the pixels in order (0-7 | 8-15) as `sum >> 16`, an
    /// exact shift by 4 more leaves `sum >> 20`, and saturating packs clamp
    /// it to a byte; then R, G, B and pad bytes are interleaved.
    #[inline(always)]
    unsafe fn pixels_of_sums(t: &Avx2Tables, even: [__m256i; 3], odd: [__m256i; 3]) -> [__m256i; 2] {
        let words =
            |e: __m256i, o: __m256i| _mm256_srai_epi16::<4>(_mm256_blend_epi16::<0xAA>(_mm256_srli_epi32::<16>(e), o));
        let [r, g, b] = [words(even[0], odd[0]), words(even[1], odd[1]), words(even[2], odd[2])];
        let rb = _mm256_packus_epi16(r, b); // R 0-7, B 0-7 | R 8-15, B 8-15
        let gp = _mm256_packus_epi16(g, t.pad); // G, pad
        let (rg, bp) = (_mm256_unpacklo_epi8(rb, gp), _mm256_unpackhi_epi8(rb, gp));
        [_mm256_unpacklo_epi16(rg, bp), _mm256_unpackhi_epi16(rg, bp)]
    }
}

/// AVX-512 F/BW/DQ/VL: 16 pixels a step. Without VBMI, source bytes are
/// gathered by in-lane shuffles and widening; with it (`VBMI`), by one
/// whole-register byte permute per vector (`Plan::permutes`).
#[derive(Clone, Copy)]
pub(super) struct Avx512<const VBMI: bool>;

pub(super) struct Avx512Tables {
    /// `shuffle_epi8` mask, the same in every 16-byte lane (without VBMI; NV12).
    shuffle: __m512i,
    /// VBMI byte permutes (`Permutes`).
    index: [__m512i; 4],
    /// The pad, where it goes in a 32-bit lane.
    pad: __m512i,
    /// The pad as 16 16-bit floats, and as the f32 whose bf16 it is.
    pad_16: __m256i,
    pad_f32: __m512,
    /// Word indices interleaving R, G, B and pad words (`store_rgbx16`).
    words: [__m512i; 2],
}

#[inline(always)]
unsafe fn all_lanes(mask: [u8; 16]) -> __m512i {
    _mm512_broadcast_i32x4(_mm_loadu_si128(mask.as_ptr().cast()))
}

#[inline(always)]
unsafe fn table(bytes: &[u8; 64]) -> __m512i {
    _mm512_loadu_si512(bytes.as_ptr().cast())
}

/// Word indices (as bytes) interleaving [R 0-15 | G 0-15] and [B 0-15 | pad]
/// into 8 pixels of R, G, B, pad: pixels 0-7, then 8-15.
const INTERLEAVE_WORDS: [[u8; 64]; 2] = {
    let mut index = [[0u8; 64]; 2];
    let mut w = 0;
    while w < 64 {
        let (half, p, k) = (w / 32, w % 32 / 4, w % 4);
        let word = if k == 3 { 48 } else { 16 * k + 8 * half + p } as u16;
        index[half][2 * (w % 32)] = word as u8;
        index[half][2 * (w % 32) + 1] = (word >> 8) as u8;
        w += 1;
    }
    index
};

/// The R, G, B bytes of 16 4-byte pixels.
const COLOUR_BYTES: u64 = 0x7777_7777_7777_7777;

impl<const VBMI: bool> Avx512<VBMI> {
    /// 16 pixels to 64 bytes, without VBMI: 4-byte pixels or channel runs in
    /// each 16-byte lane, as `shuffle` says.
    #[inline(always)]
    unsafe fn load16<const C: usize>(src: *const u8, shuffle: __m512i) -> __m512i {
        let v = match C {
            1 => _mm512_cvtepu8_epi32(_mm_loadu_si128(src.cast())),
            // 48 bytes, lane j getting bytes 12j..12j+12 (pixels 4j..4j+3).
            3 => _mm512_permutexvar_epi32(
                _mm512_setr_epi32(0, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 9, 9, 10, 11, 12),
                _mm512_maskz_loadu_epi8(0xFFFF_FFFF_FFFF, src.cast()),
            ),
            _ => _mm512_loadu_si512(src.cast()),
        };
        _mm512_shuffle_epi8(v, shuffle)
    }

    /// The four 16-byte lanes of `v` widened to 32-bit lanes.
    #[inline(always)]
    unsafe fn widen_lanes(v: __m512i) -> [__m512i; 4] {
        [
            _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32::<0>(v)),
            _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32::<1>(v)),
            _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32::<2>(v)),
            _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32::<3>(v)),
        ]
    }

    /// With VBMI: the 16 * C source bytes of 16 pixels (a masked load: never past them).
    #[inline(always)]
    unsafe fn window<const C: usize>(src: *const u8) -> __m512i {
        let mask: u64 = if C == 4 { u64::MAX } else { (1u64 << (16 * C)) - 1 };
        _mm512_maskz_loadu_epi8(mask, src.cast())
    }

    /// With VBMI: bytes of `window` picked by `index`, where index
    /// `Permutes::zero(C)` gives 0: one permute, no masking.
    #[inline(always)]
    unsafe fn gather<const C: usize>(window: __m512i, index: __m512i) -> __m512i {
        if C == 4 {
            _mm512_permutex2var_epi8(window, index, _mm512_setzero_si512())
        } else {
            _mm512_permutexvar_epi8(index, window)
        }
    }

    /// 16 f32 as 16-bit floats of `KIND` (not `BF16_NATIVE`).
    #[inline(always)]
    unsafe fn narrow16<const KIND: u8>(f: __m512) -> __m256i {
        match KIND {
            F16 => _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f),
            _ => _mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(bf16_high::<Self, KIND>(f))),
        }
    }
}

impl<const VBMI: bool> Simd for Avx512<VBMI> {
    const LANES: usize = 16;
    type I = __m512i;
    type F = __m512;
    type Tables = Avx512Tables;

    #[inline(always)]
    unsafe fn tables<const C: usize>(job: Job<'_>) -> Avx512Tables {
        let zero = _mm512_setzero_si512();
        let mut t = Avx512Tables {
            shuffle: zero,
            index: [zero; 4],
            pad: zero,
            pad_16: _mm256_setzero_si256(),
            pad_f32: _mm512_setzero_ps(),
            words: [zero; 2],
        };
        match job {
            Job::Bytes(plan) => {
                if VBMI {
                    t.index[0] = table(&plan.permutes.packed_bytes);
                } else {
                    t.shuffle = all_lanes(plan.permutes.lane_pixels);
                }
                t.pad = _mm512_set1_epi32((plan.pad << 24) as i32);
            }
            Job::Planar(plan) | Job::Packed16(plan) => {
                if VBMI {
                    for (k, lanes) in plan.permutes.planar_lanes.iter().enumerate() {
                        t.index[k] = table(lanes);
                    }
                } else {
                    t.shuffle = all_lanes(plan.permutes.lane_channels);
                }
                if let Job::Packed16(_) = job {
                    t.words = [table(&INTERLEAVE_WORDS[0]), table(&INTERLEAVE_WORDS[1])];
                    t.pad_16 = _mm256_set1_epi16(plan.pad as i16);
                    t.pad_f32 = _mm512_set1_ps(f32::from_bits(plan.pad << 16));
                }
            }
            Job::Quads(plan) => {
                if VBMI {
                    for (k, lanes) in plan.permutes.packed_lanes.iter().enumerate() {
                        t.index[k] = table(lanes);
                    }
                } else {
                    t.shuffle = all_lanes(plan.permutes.lane_pixels);
                }
            }
            Job::Yuv422 { pad, swapped, y_first } => {
                t.index[0] = all_lanes(chroma_422_mask(y_first, swapped, false));
                t.index[1] = all_lanes(chroma_422_mask(y_first, swapped, true));
                t.pad = _mm512_set1_epi16(i16::from(pad));
            }
            Job::Nv12 { swapped, pad } => {
                t.shuffle = all_lanes(chroma_split(swapped));
                t.pad = _mm512_set1_epi16(i16::from(pad));
            }
        }
        t
    }

    arithmetic!(
        __m512,
        __m512i,
        _mm512_set1_ps,
        _mm512_set1_epi32,
        _mm512_cvtepi32_ps,
        _mm512_sub_ps,
        _mm512_mul_ps,
        _mm512_div_ps,
        _mm512_fmadd_ps,
        _mm512_fnmadd_ps,
        _mm512_castps_si512,
        _mm512_add_epi32,
        _mm512_and_si512,
        _mm512_mullo_epi32,
        _mm512_srli_epi32
    );

    #[inline(always)]
    unsafe fn rgbx_u8<const C: usize>(t: &Avx512Tables, src: *const u8, dst: *mut u8) {
        let v = if VBMI {
            _mm512_mask_permutexvar_epi8(t.pad, COLOUR_BYTES, t.index[0], Self::window::<C>(src))
        } else {
            _mm512_or_si512(Self::load16::<C>(src, t.shuffle), t.pad)
        };
        _mm512_storeu_si512(dst.cast(), v);
    }

    #[inline(always)]
    unsafe fn channels<const C: usize, const PACKED: bool>(t: &Avx512Tables, src: *const u8) -> [__m512i; 3] {
        if VBMI {
            let w = Self::window::<C>(src);
            return [
                Self::gather::<C>(w, t.index[0]),
                Self::gather::<C>(w, t.index[1]),
                Self::gather::<C>(w, t.index[2]),
            ];
        }
        // Lane k of the result: channel k of all 16 pixels.
        let gather = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        let [r, g, b, _] = Self::widen_lanes(_mm512_permutexvar_epi32(gather, Self::load16::<C>(src, t.shuffle)));
        [r, g, b]
    }

    #[inline(always)]
    unsafe fn store_f32(out: *mut u8, f: __m512) {
        _mm512_storeu_ps(out.cast(), f)
    }
    #[inline(always)]
    unsafe fn store_f16(out: *mut u8, f: __m512) {
        _mm256_storeu_si256(out.cast(), _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f))
    }

    /// R and G, B and pad as two vectors of 32 words, interleaved by two
    /// word permutes. `BF16_NATIVE` converts them with the AVX512-BF16
    /// instruction (the kernel's features must include it), which rounds to
    /// nearest even but flushes subnormals: a plan uses it only where it
    /// reproduces the reference.
    #[inline(always)]
    unsafe fn store_rgbx16<const KIND: u8>(t: &Avx512Tables, out: *mut u8, rgb: [__m512; 3]) {
        let [r, g, b] = rgb;
        let (rg, bp): (__m512i, __m512i) = if KIND == BF16_NATIVE {
            // 32 bf16 to 32 words: both are 64 bytes of plain bits.
            let words = |v: __m512bh| std::mem::transmute::<__m512bh, __m512i>(v);
            (words(_mm512_cvtne2ps_pbh(g, r)), words(_mm512_cvtne2ps_pbh(t.pad_f32, b)))
        } else {
            let [r, g, b] = [Self::narrow16::<KIND>(r), Self::narrow16::<KIND>(g), Self::narrow16::<KIND>(b)];
            (
                _mm512_inserti64x4::<1>(_mm512_castsi256_si512(r), g),
                _mm512_inserti64x4::<1>(_mm512_castsi256_si512(b), t.pad_16),
            )
        };
        for (h, idx) in t.words.iter().enumerate() {
            _mm512_storeu_si512(out.add(64 * h).cast(), _mm512_permutex2var_epi16(rg, *idx, bp));
        }
    }

    #[inline(always)]
    unsafe fn luma_pairs(y: *const u8, offset: u8) -> [__m512i; 2] {
        let even_odd = _mm256_setr_epi8(
            0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
        );
        let l = _mm256_shuffle_epi8(
            _mm256_subs_epu8(_mm256_loadu_si256(y.cast()), _mm256_set1_epi8(offset as i8)),
            even_odd,
        );
        // Per lane even then odd; then even 0-15, odd 0-15.
        let l = _mm256_permute4x64_epi64::<0b11_01_10_00>(l);
        [_mm512_cvtepu8_epi32(_mm256_castsi256_si128(l)), _mm512_cvtepu8_epi32(_mm256_extracti128_si256::<1>(l))]
    }
    /// As AVX2's (`vpmaddwd` on `256 (Y - 128)` and `Y`): lanes 0, 1 hold
    /// luma bytes 0-15 and lanes 2, 3 bytes 16-31, so lane j's shuffle
    /// reaches pixels 8j to 8j + 7 (pairs 4j to 4j + 3, as `chroma`'s lane j).
    #[inline(always)]
    unsafe fn luma_products(y: *const u8, offset: u8, factor: __m512i) -> [__m512i; 2] {
        let l = _mm512_castsi256_si512(_mm256_subs_epu8(_mm256_loadu_si256(y.cast()), _mm256_set1_epi8(offset as i8)));
        let l = _mm512_shuffle_i64x2::<0b01_01_00_00>(l, l);
        let z = -128;
        #[rustfmt::skip]
        let even = _mm512_set_epi8(
            z, 14, 14, z, z, 12, 12, z, z, 10, 10, z, z, 8, 8, z,
            z, 6, 6, z, z, 4, 4, z, z, 2, 2, z, z, 0, 0, z,
            z, 14, 14, z, z, 12, 12, z, z, 10, 10, z, z, 8, 8, z,
            z, 6, 6, z, z, 4, 4, z, z, 2, 2, z, z, 0, 0, z,
        );
        let odd = _mm512_add_epi8(even, _mm512_set1_epi32(0x0001_0100));
        let signed = _mm512_set1_epi32(0x8000);
        let product = |mask: __m512i| _mm512_madd_epi16(_mm512_xor_si512(_mm512_shuffle_epi8(l, mask), signed), factor);
        [product(even), product(odd)]
    }
    fn luma_factor(cy: i32) -> i32 {
        Avx2::luma_factor(cy)
    }
    fn luma_bias(cy: i32) -> i32 {
        Avx2::luma_bias(cy)
    }
    #[inline(always)]
    unsafe fn chroma(t: &Avx512Tables, uv: *const u8) -> [__m512i; 2] {
        // Per lane U then V (or V then U, `swapped`: the split mask of
        // `tables`); then U 0-15, V 0-15.
        let c = _mm256_shuffle_epi8(_mm256_loadu_si256(uv.cast()), _mm512_castsi512_si256(t.shuffle));
        let c = _mm256_permute4x64_epi64::<0b11_01_10_00>(c);
        let minus_128 = |h: __m128i| _mm512_sub_epi32(_mm512_cvtepu8_epi32(h), _mm512_set1_epi32(128));
        [minus_128(_mm256_castsi256_si128(c)), minus_128(_mm256_extracti128_si256::<1>(c))]
    }
    /// As AVX2's: 64 bytes are 16 pixel pairs, 4 to a lane.
    #[inline(always)]
    unsafe fn luma_products_422<const Y_FIRST: bool>(row: *const u8, offset: u8, factor: __m512i) -> [__m512i; 2] {
        let q = _mm512_loadu_si512(row.cast());
        let offset = _mm512_set1_epi32(i32::from(offset) * 0x0001_0100);
        let signed = _mm512_set1_epi32(0x8000);
        let product = |mask: [u8; 16]| {
            let words = _mm512_subs_epu8(_mm512_shuffle_epi8(q, all_lanes(mask)), offset);
            _mm512_madd_epi16(_mm512_xor_si512(words, signed), factor)
        };
        [product(luma_422_mask(Y_FIRST, false)), product(luma_422_mask(Y_FIRST, true))]
    }
    #[inline(always)]
    unsafe fn chroma_422(t: &Avx512Tables, row: *const u8) -> [__m512i; 2] {
        let q = _mm512_loadu_si512(row.cast());
        let minus_128 = |mask: __m512i| _mm512_sub_epi32(_mm512_shuffle_epi8(q, mask), _mm512_set1_epi32(128));
        [minus_128(t.index[0]), minus_128(t.index[1])]
    }
    const RGB_ORDER: bool = true;
    fn nv12_positions(pos: [usize; 3]) -> bool {
        pos == [0, 1, 2] || pos == [2, 1, 0]
    }
    /// As AVX2's (`pixels_of_sums`), then the lanes (pixels 0-3, 8-11, ...
    /// and 4-7, 12-15, ...) put in order.
    #[inline(always)]
    unsafe fn store_rgbx_sums(t: &Avx512Tables, out: *mut u8, even: [__m512i; 3], odd: [__m512i; 3]) {
        let [lo, hi] = Self::pixels_of_sums(t, even, odd);
        let first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
        let second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
        _mm512_storeu_si512(out.cast(), _mm512_permutex2var_epi64(lo, first, hi));
        _mm512_storeu_si512(out.add(64).cast(), _mm512_permutex2var_epi64(lo, second, hi));
    }
    /// As `store_rgbx_sums`, then each lane's pads dropped and the lanes'
    /// 12 bytes put together: 16 pixels in 48 bytes, stored as 32 + 16, twice.
    #[inline(always)]
    unsafe fn store_rgb_sums(t: &Avx512Tables, out: *mut u8, even: [__m512i; 3], odd: [__m512i; 3]) {
        let [lo, hi] = Self::pixels_of_sums(t, even, odd);
        let drop_pad =
            _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -128, -128, -128, -128));
        let first = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
        let second = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
        let gather = _mm512_setr_epi32(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 15, 15, 15, 15);
        for (k, sixteen) in [_mm512_permutex2var_epi64(lo, first, hi), _mm512_permutex2var_epi64(lo, second, hi)]
            .into_iter()
            .enumerate()
        {
            let packed = _mm512_permutexvar_epi32(gather, _mm512_shuffle_epi8(sixteen, drop_pad));
            let at = out.add(48 * k);
            _mm256_storeu_si256(at.cast(), _mm512_castsi512_si256(packed));
            _mm_storeu_si128(at.add(32).cast(), _mm512_extracti32x4_epi32::<2>(packed));
        }
    }
}

impl<const VBMI: bool> Avx512<VBMI> {
    /// As `Avx2::pixels_of_sums`, in four lanes: `[pixels 0-3 | 8-11 | 16-19 |
    /// 24-27]` and `[4-7 | 12-15 | 20-23 | 28-31]`.
    #[inline(always)]
    unsafe fn pixels_of_sums(t: &Avx512Tables, even: [__m512i; 3], odd: [__m512i; 3]) -> [__m512i; 2] {
        let words = |e: __m512i, o: __m512i| {
            _mm512_srai_epi16::<4>(_mm512_mask_blend_epi16(0xAAAA_AAAA, _mm512_srli_epi32::<16>(e), o))
        };
        let [r, g, b] = [words(even[0], odd[0]), words(even[1], odd[1]), words(even[2], odd[2])];
        let rb = _mm512_packus_epi16(r, b);
        let gp = _mm512_packus_epi16(g, t.pad);
        let (rg, bp) = (_mm512_unpacklo_epi8(rb, gp), _mm512_unpackhi_epi8(rb, gp));
        [_mm512_unpacklo_epi16(rg, bp), _mm512_unpackhi_epi16(rg, bp)]
    }
}

impl<const VBMI: bool> Quads for Avx512<VBMI> {
    #[inline(always)]
    unsafe fn quads<const C: usize>(t: &Avx512Tables, src: *const u8) -> [__m512i; 4] {
        if VBMI {
            let w = Self::window::<C>(src);
            let [i0, i1, i2, i3] = t.index;
            [Self::gather::<C>(w, i0), Self::gather::<C>(w, i1), Self::gather::<C>(w, i2), Self::gather::<C>(w, i3)]
        } else {
            Self::widen_lanes(Self::load16::<C>(src, t.shuffle))
        }
    }

    #[inline(always)]
    unsafe fn four_times(values: [f32; 4]) -> __m512 {
        _mm512_broadcast_f32x4(_mm_loadu_ps(values.as_ptr()))
    }

    #[inline(always)]
    unsafe fn store_quads16<const KIND: u8>(out: *mut u8, q: [__m512; 4]) {
        if KIND == F16 {
            for (j, f) in q.into_iter().enumerate() {
                _mm256_storeu_si256(out.add(32 * j).cast(), _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f));
            }
            return;
        }
        let high = |f: __m512| _mm512_srli_epi32::<16>(bf16_high::<Self, KIND>(f));
        let r = [high(q[0]), high(q[1]), high(q[2]), high(q[3])];
        // packus pairs lane L of both: pixels L and 4 + L; the permute restores order.
        let order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
        for h in 0..2 {
            let packed = _mm512_packus_epi32(r[2 * h], r[2 * h + 1]);
            _mm512_storeu_si512(out.add(64 * h).cast(), _mm512_permutexvar_epi64(order, packed));
        }
    }
}

/// A pair of u16 words is one 32-bit lane: the even word is its low half,
/// the odd word its high half.
impl Words for Avx2 {
    #[inline(always)]
    unsafe fn words10<const LOW: bool>(p: *const u8) -> [__m256i; 2] {
        let x = _mm256_loadu_si256(p.cast());
        if LOW {
            let ten = _mm256_set1_epi32(0x3FF);
            [_mm256_and_si256(x, ten), _mm256_and_si256(_mm256_srli_epi32::<16>(x), ten)]
        } else {
            [_mm256_srli_epi32::<22>(_mm256_slli_epi32::<16>(x)), _mm256_srli_epi32::<22>(x)]
        }
    }
}

impl<const VBMI: bool> Words for Avx512<VBMI> {
    #[inline(always)]
    unsafe fn words10<const LOW: bool>(p: *const u8) -> [__m512i; 2] {
        let x = _mm512_loadu_si512(p.cast());
        if LOW {
            let ten = _mm512_set1_epi32(0x3FF);
            [_mm512_and_si512(x, ten), _mm512_and_si512(_mm512_srli_epi32::<16>(x), ten)]
        } else {
            [_mm512_srli_epi32::<22>(_mm512_slli_epi32::<16>(x)), _mm512_srli_epi32::<22>(x)]
        }
    }
}

impl Quantise for Avx2 {
    #[inline(always)]
    unsafe fn round_even(f: __m256) -> __m256i {
        let f = _mm256_min_ps(_mm256_max_ps(f, _mm256_set1_ps(-32768.0)), _mm256_set1_ps(32767.0));
        _mm256_cvtps_epi32(f) // MXCSR's rounding: to nearest, ties to even
    }
    /// Signed packs saturate to i8; each 16-byte lane then holds 4 pixels as
    /// 4 R, 4 G, 4 B, 4 pad bytes, interleaved by one shuffle.
    #[inline(always)]
    unsafe fn store_i8<const BYTES: usize>(out: *mut u8, rgb: [__m256i; 3], pad: __m256i) {
        let bytes = _mm256_packs_epi16(_mm256_packs_epi32(rgb[0], rgb[1]), _mm256_packs_epi32(rgb[2], pad));
        if BYTES == 4 {
            let m = _mm256_setr_epi8(
                0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, //
                0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
            );
            _mm256_storeu_si256(out.cast(), _mm256_shuffle_epi8(bytes, m));
        } else {
            let m = _mm256_setr_epi8(
                0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, -128, -128, -128, -128, //
                0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, -128, -128, -128, -128,
            );
            let packed =
                _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(bytes, m), _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7));
            _mm_storeu_si128(out.cast(), _mm256_castsi256_si128(packed));
            _mm_storel_epi64(out.add(16).cast(), _mm256_extracti128_si256::<1>(packed));
        }
    }
}

impl<const VBMI: bool> Quantise for Avx512<VBMI> {
    #[inline(always)]
    unsafe fn round_even(f: __m512) -> __m512i {
        let f = _mm512_min_ps(_mm512_max_ps(f, _mm512_set1_ps(-32768.0)), _mm512_set1_ps(32767.0));
        _mm512_cvtps_epi32(f)
    }
    /// As AVX2's, four lanes of 4 pixels.
    #[inline(always)]
    unsafe fn store_i8<const BYTES: usize>(out: *mut u8, rgb: [__m512i; 3], pad: __m512i) {
        let bytes = _mm512_packs_epi16(_mm512_packs_epi32(rgb[0], rgb[1]), _mm512_packs_epi32(rgb[2], pad));
        if BYTES == 4 {
            let m = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
            _mm512_storeu_si512(out.cast(), _mm512_shuffle_epi8(bytes, m));
        } else {
            let m = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, -128, -128, -128, -128));
            let gather = _mm512_setr_epi32(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 15, 15, 15, 15);
            let packed = _mm512_permutexvar_epi32(gather, _mm512_shuffle_epi8(bytes, m));
            _mm256_storeu_si256(out.cast(), _mm512_castsi512_si256(packed));
            _mm_storeu_si128(out.add(32).cast(), _mm512_extracti32x4_epi32::<2>(packed));
        }
    }
}
