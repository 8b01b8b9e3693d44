//! Row kernels: one source row in, one destination row (or one row of each
//! plane) out. The scalar kernels are the reference; SIMD kernels do the
//! bulk of a row and hand the tail to the scalar ones.

use super::format::Element;
pub(crate) use super::plan::{Encoder, InterleaveRow, Kernel, Nv12Pair, Nv12Row, PackedRow, Plan, SplitRow, Yuv422Row};
use super::simd::SimdLevel;

#[cfg(target_arch = "aarch64")]
pub(crate) mod neon;
pub(crate) mod scalar;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod vector;
#[cfg(target_arch = "x86_64")]
mod x86;
pub(crate) mod yuv;

/// 16-bit float kinds of the packed kernels. BF16 rounds to nearest even;
/// BF16_FAST rounds ties away from zero (fewer instructions), so a plan takes
/// it only where no value of the 256 lands on a tie (BF16_NATIVE only where
/// flushing subnormals changes nothing); F16 is IEEE half, rounded to nearest
/// even.
pub(crate) const BF16: u8 = 0;
pub(crate) const F16: u8 = 1;
pub(crate) const BF16_FAST: u8 = 2;
/// bf16 by the AVX512-BF16 instruction: to nearest even, subnormals flushed.
#[cfg(target_arch = "x86_64")]
pub(crate) const BF16_NATIVE: u8 = 3;

/// How a kernel computes `(x - mean) / scale`; a plan takes the first, in
/// this order, that reproduces the reference for its parameters.
/// `x * (1 / scale) + (-mean / scale)`: one fused multiply-add.
pub(crate) const FMA: u8 = 0;
/// The quotient from the reciprocal, corrected once by its exact remainder
/// (`r = t - q * scale`, then `q + r * (1 / scale)`): two fused multiply-adds and a
/// multiply, usually the correctly rounded quotient, faster than dividing.
pub(crate) const REFINED: u8 = 1;
/// A true division, IEEE-exact like the reference.
pub(crate) const DIV: u8 = 2;

/// The constants per destination slot that `normalise::<ARITH>` takes:
/// `[bias, inv_scale, -]` for `FMA`, else `[mean, scale, inv_scale]`.
pub(crate) fn affine<const ARITH: u8>(plan: &Plan) -> [[f32; 4]; 3] {
    match ARITH {
        FMA => [plan.bias, plan.inv_scale, plan.inv_scale],
        _ => [plan.mean, plan.scale, plan.inv_scale],
    }
}

/// The table kernel for `channels`-byte source pixels and a destination of
/// `element`: planar, or packed with `dst_channels` (3, or 4 with a pad).
pub(crate) fn scalar_encoder(element: Element, planar: bool, channels: usize, dst_channels: usize) -> Encoder {
    use scalar::{packed, packed3, planar as plan};
    macro_rules! by_channels {
        ($f:ident, $kind:ident, $t:ty) => {
            match channels {
                1 => Encoder::$kind($f::<$t, 1>),
                3 => Encoder::$kind($f::<$t, 3>),
                _ => Encoder::$kind($f::<$t, 4>),
            }
        };
    }
    macro_rules! pick {
        ($t:ty) => {
            match (planar, dst_channels) {
                (true, _) => by_channels!(plan, Planar, $t),
                (false, 3) => by_channels!(packed3, Packed, $t),
                (false, _) => by_channels!(packed, Packed, $t),
            }
        };
    }
    match element {
        Element::U8 | Element::I8 => pick!(u8),
        Element::Bf16 | Element::F16 => pick!(u16),
        Element::F32 => pick!(f32),
    }
}

/// SIMD encoders for this case, fastest first; empty when there is none.
/// `identity` says the normalisation is `(x - 0) / 1`.
#[allow(unused_variables)]
pub(crate) fn simd_encoders(
    level: SimdLevel,
    element: Element,
    planar: bool,
    channels: usize,
    identity: bool,
) -> Vec<Kernel> {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => {
            x86::encoders(level, element, planar, channels, identity)
        }
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => neon::encoders(element, planar, channels, identity),
        _ => Vec::new(),
    }
}

/// 4-byte pixels to 3-byte ones with no arithmetic (RGBx/RGBA or decoded
/// YUV rows into RGB or BGR): the pad dropped, R and B swapped if `SWAP`.
/// (LLVM's vectorisation of the plain loop was 4x slower than these.)
fn drop_pad<const SWAP: bool>(level: SimdLevel) -> Kernel {
    #[inline(always)]
    fn run<const SWAP: bool>(src: &[u8], dst: &mut [u8]) {
        for (s, d) in src.chunks_exact(4).zip(dst.chunks_exact_mut(3)) {
            if SWAP {
                d.copy_from_slice(&[s[2], s[1], s[0]]);
            } else {
                d.copy_from_slice(&s[..3]);
            }
        }
    }
    fn portable<const SWAP: bool>(_: &Plan, src: &[u8], dst: &mut [u8]) {
        run::<SWAP>(src, dst)
    }
    /// 8 pixels a step: in each lane the pad bytes dropped (and R, B
    /// swapped) by one byte shuffle, the lanes' 12 bytes put together by a
    /// dword permute, stored as 16 + 8 bytes.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2<const SWAP: bool>(_: &Plan, src: &[u8], dst: &mut [u8]) {
        use std::arch::x86_64::*;
        let n = (src.len() / 4).min(dst.len() / 3);
        let lane: [i8; 16] = if SWAP {
            [2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1]
        } else {
            [0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1]
        };
        // SAFETY (every intrinsic below): AVX2 is enabled on this function,
        // which a plan only holds for a CPU that has it; the loop guard bounds
        // the 32 bytes read at 4i and the 24 written at 3i.
        unsafe {
            let half = _mm_loadu_si128(lane.as_ptr().cast());
            let shuffle = _mm256_set_m128i(half, half);
            let gather = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7);
            let mut i = 0;
            while i + 8 <= n {
                let x = _mm256_loadu_si256(src.as_ptr().add(4 * i).cast());
                let packed = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(x, shuffle), gather);
                let out = dst.as_mut_ptr().add(3 * i);
                _mm_storeu_si128(out.cast(), _mm256_castsi256_si128(packed));
                _mm_storel_epi64(out.add(16).cast(), _mm256_extracti128_si256::<1>(packed));
                i += 8;
            }
            run::<SWAP>(&src[4 * i..], &mut dst[3 * i..]);
        }
    }
    /// 16 pixels a step: `vld4q` splits the channels, `vst3q` writes three.
    #[cfg(target_arch = "aarch64")]
    fn neon<const SWAP: bool>(_: &Plan, src: &[u8], dst: &mut [u8]) {
        use std::arch::aarch64::*;
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
        run::<SWAP>(&src[4 * i..], &mut dst[3 * i..]);
    }
    let encoder: PackedRow = match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => avx2::<SWAP>,
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => neon::<SWAP>,
        _ => portable::<SWAP>,
    };
    let name = match (level, SWAP) {
        (SimdLevel::Scalar, _) => "scalar/drop-pad",
        #[cfg(target_arch = "x86_64")]
        (_, false) => "avx2/drop-pad",
        #[cfg(target_arch = "x86_64")]
        (_, true) => "avx2/drop-pad-swap-rb",
        #[cfg(not(target_arch = "x86_64"))]
        (_, false) => "neon/drop-pad",
        #[cfg(not(target_arch = "x86_64"))]
        (_, true) => "neon/drop-pad-swap-rb",
    };
    Kernel { name, encoder: Encoder::Packed(encoder) }
}

/// 3- or 4-byte pixels to 3-byte pixels with no arithmetic (RGB <-> BGR, or
/// the same order; the pad of 4-byte ones dropped): a row copy, R and B
/// swapped, or `drop_pad`.
pub(crate) fn byte_reorder(level: SimdLevel, channels: usize, map: [usize; 3]) -> Option<Kernel> {
    fn copy(_: &Plan, src: &[u8], dst: &mut [u8]) {
        let n = src.len().min(dst.len());
        dst[..n].copy_from_slice(&src[..n]);
    }
    #[inline(always)]
    fn swap_rb(src: &[u8], dst: &mut [u8]) {
        for (s, d) in src.chunks_exact(3).zip(dst.chunks_exact_mut(3)) {
            d.copy_from_slice(&[s[2], s[1], s[0]]);
        }
    }
    fn swap_rb_portable(_: &Plan, src: &[u8], dst: &mut [u8]) {
        swap_rb(src, dst)
    }
    // The same loop, vectorised by LLVM with AVX2 shuffles.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn swap_rb_avx2(_: &Plan, src: &[u8], dst: &mut [u8]) {
        swap_rb(src, dst)
    }
    let (name, encoder): (&'static str, PackedRow) = match (map, level) {
        ([0, 1, 2], _) if channels == 4 => return Some(drop_pad::<false>(level)),
        ([2, 1, 0], _) if channels == 4 => return Some(drop_pad::<true>(level)),
        (_, _) if channels != 3 => return None,
        ([0, 1, 2], _) => ("copy", copy),
        #[cfg(target_arch = "x86_64")]
        ([2, 1, 0], SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi) => ("avx2/swap-rb", swap_rb_avx2),
        ([2, 1, 0], _) => ("portable/swap-rb", swap_rb_portable),
        _ => return None,
    };
    Some(Kernel { name, encoder: Encoder::Packed(encoder) })
}

/// The NV12 row decoder of this level into pixels of `bytes` bytes (3 or 4).
pub(crate) fn nv12_decoder(level: SimdLevel, bytes: usize) -> (Nv12Row, &'static str) {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => x86::nv12_decoder(level, bytes),
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => neon::nv12_decoder(bytes),
        _ => (scalar::nv12_row, if bytes == 3 { "scalar/nv12-rgb" } else { "scalar/nv12" }),
    }
}

/// The same decoder, two rows sharing one chroma row at a time.
pub(crate) fn nv12_pair_decoder(level: SimdLevel, bytes: usize) -> Nv12Pair {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => x86::nv12_pair_decoder(level, bytes),
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => neon::nv12_pair_decoder(bytes),
        _ => scalar::nv12_pair,
    }
}

/// The decoder of packed YUYV (`y_first`) or UYVY rows into pixels of
/// `bytes` bytes at this level, where it has one (else the rows are split
/// into NV12's first, `yuv::splitter`).
pub(crate) fn yuv422_decoder(level: SimdLevel, bytes: usize, y_first: bool) -> Option<(Yuv422Row, &'static str)> {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => Some(x86::yuv422_decoder(level, bytes, y_first)),
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => Some(neon::yuv422_decoder(bytes, y_first)),
        _ => None,
    }
}

/// The 10-bit row decoder of this level into pixels of `bytes` bytes (3 or
/// 4): P010's samples (value in the top bits), or with `low` I010's.
pub(crate) fn yuv10_decoder(level: SimdLevel, bytes: usize, low: bool) -> (Nv12Row, &'static str) {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => x86::yuv10_decoder(level, bytes, low),
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => neon::yuv10_decoder(bytes, low),
        _ => match (bytes, low) {
            (3, false) => (scalar::yuv10_row::<false>, "scalar/p010-rgb"),
            (_, false) => (scalar::yuv10_row::<false>, "scalar/p010"),
            (3, true) => (scalar::yuv10_row::<true>, "scalar/i010-rgb"),
            (_, true) => (scalar::yuv10_row::<true>, "scalar/i010"),
        },
    }
}

/// SIMD int8 encoders (RGBx_I8 with `dst_channels` 4, RGB_I8 with 3) for
/// `channels`-byte source pixels, in the order a plan tries them.
#[allow(unused_variables)]
pub(crate) fn int8_encoders(level: SimdLevel, channels: usize, dst_channels: usize) -> Vec<Kernel> {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => {
            x86::int8_encoders(level, channels, dst_channels)
        }
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => neon::int8_encoders(channels, dst_channels),
        _ => Vec::new(),
    }
}
