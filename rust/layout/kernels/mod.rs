//! Row kernels: one source row in, one destination row (or one row of each
//! plane) out. The scalar kernels are the reference; SIMD kernels do the
//! bulk of a row and hand the tail to the scalar ones.

use super::convert::Plan;
use super::format::Element;
use super::simd::SimdLevel;

pub(crate) mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86;
#[cfg(target_arch = "aarch64")]
pub(crate) mod neon;

/// A source row of pixels to one packed destination row.
pub(crate) type PackedRow = unsafe fn(&Plan, &[u8], &mut [u8]);
/// A source row of pixels to one row of each of three planes.
pub(crate) type PlanarRow = unsafe fn(&Plan, &[u8], &mut [u8], &mut [u8], &mut [u8]);
/// A Y row and its UV row to 4-byte pixels (R, G, B at given positions, pad).
pub(crate) type Nv12Row = unsafe fn(&[u8], &[u8], &mut [u8], [usize; 3], u8);

#[derive(Clone, Copy)]
pub(crate) enum Encoder {
    Packed(PackedRow),
    Planar(PlanarRow),
}

/// An encoder and its name (`level/what/arithmetic`), for diagnostics and tests.
///
/// SIMD encoders compute `(x - mean) / scale` either as `x * (1 / scale) +
/// (-mean / scale)` in one fused multiply-add ("fma": fast, not always
/// exact) or with a true division ("div": IEEE-exact like the reference);
/// a plan takes the first candidate that reproduces the reference.
#[derive(Clone, Copy)]
pub(crate) struct Kernel {
    pub name: &'static str,
    pub encoder: Encoder,
}

/// 16-bit float kinds of the packed kernels. BF16 rounds to nearest even;
/// BF16_FAST rounds ties away from zero (fewer instructions), so a plan takes
/// it only where no value of the 256 lands on a tie; F16 is IEEE half,
/// rounded to nearest even.
pub(crate) const BF16: u8 = 0;
pub(crate) const F16: u8 = 1;
pub(crate) const BF16_FAST: u8 = 2;

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

/// Byte permutations for one step of 16 source pixels of `channels` bytes
/// (kernels with whole-register byte permutes, e.g. AVX-512 VBMI), built once
/// per plan. Each entry is a byte index into the step's source bytes, or
/// [`Permutes::zero`] for a byte that must be 0.
pub(crate) struct Permutes {
    /// 4-byte pixels in destination order: byte 4p+k <- pixel p, channel k.
    pub packed_bytes: [u8; 64],
    /// Quarter j, 32-bit lane 4p+k <- pixel 4j+p, channel k (the pad slot 0).
    pub packed_lanes: [[u8; 64]; 4],
    /// Channel k, 32-bit lane p <- pixel p, channel k (planar destinations).
    pub planar_lanes: [[u8; 64]; 3],
}

impl Permutes {
    /// The index of a zero byte: the last byte of a 64-byte window holding
    /// fewer than 64 source bytes (a masked load zeroes the rest), else the
    /// first byte of a second, zeroed register (two-source permutes).
    pub(crate) fn zero(channels: usize) -> u8 {
        if 16 * channels < 64 { 63 } else { 64 }
    }

    pub(crate) fn new(channels: usize, map: [usize; 3]) -> Permutes {
        let zero = Self::zero(channels);
        let from = |pixel: usize, k: usize| if k < 3 { (pixel * channels + map[k]) as u8 } else { zero };
        let mut p = Permutes { packed_bytes: [zero; 64], packed_lanes: [[zero; 64]; 4], planar_lanes: [[zero; 64]; 3] };
        for pixel in 0..16 {
            for k in 0..4 {
                p.packed_bytes[4 * pixel + k] = from(pixel, k);
                p.packed_lanes[pixel / 4][4 * (4 * (pixel % 4) + k)] = from(pixel, k);
            }
            for k in 0..3 {
                p.planar_lanes[k][4 * pixel] = from(pixel, k);
            }
        }
        p
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
pub(crate) fn simd_encoders(level: SimdLevel, element: Element, planar: bool, channels: usize, identity: bool) -> Vec<Kernel> {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => x86::encoders(level, element, planar, channels, identity),
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
