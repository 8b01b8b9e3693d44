//! Row kernels: one source row in, one destination row (or one row of each
//! plane) out. The scalar kernels are the reference; SIMD kernels do the
//! bulk of a row and hand the tail to the scalar ones.

use super::format::Element;
pub(crate) use super::plan::{Encoder, InterleaveRow, Kernel, Nv12Row, PackedRow, Plan, SplitRow};
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
        Element::U8 => pick!(u8),
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

/// 3-byte pixels to 3-byte pixels with no arithmetic (RGB <-> BGR, or the
/// same order): a row copy, or R and B swapped.
pub(crate) fn byte_reorder(level: SimdLevel, map: [usize; 3]) -> Option<Kernel> {
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
        ([0, 1, 2], _) => ("copy", copy),
        #[cfg(target_arch = "x86_64")]
        ([2, 1, 0], SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi) => ("avx2/swap-rb", swap_rb_avx2),
        ([2, 1, 0], _) => ("portable/swap-rb", swap_rb_portable),
        _ => return None,
    };
    Some(Kernel { name, encoder: Encoder::Packed(encoder) })
}

pub(crate) fn nv12_decoder(level: SimdLevel) -> (Nv12Row, &'static str) {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => x86::nv12_decoder(level),
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => neon::nv12_decoder(),
        _ => (scalar::nv12_row, "scalar/nv12"),
    }
}
