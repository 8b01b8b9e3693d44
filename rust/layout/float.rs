//! Scalar conversions between f32 and the 16-bit float formats, the reference
//! every SIMD path must match bit for bit, and slice conversions that pick the
//! fastest path the CPU offers.

use half::f16;

use super::simd::SimdLevel;

/// f32 to bfloat16 bits, rounding to nearest, ties to even. A NaN becomes the
/// quiet NaN 0x7FC0 with its sign kept, as ml_dtypes (and Eigen) do.
#[inline(always)]
pub fn f32_to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) as u16 & 0x8000) | 0x7FC0;
    }
    // Adding 0x7FFF plus the lowest kept bit rounds ties to even; a carry
    // into the exponent is the correct rounding up (to infinity at the top).
    let lsb = (bits >> 16) & 1;
    ((bits + 0x7FFF + lsb) >> 16) as u16
}

/// bfloat16 bits to f32: exact (a bfloat16 is the top half of an f32).
#[inline(always)]
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

/// f32 to IEEE half bits, rounding to nearest even, in portable code.
#[inline(always)]
pub fn f32_to_f16(x: f32) -> u16 {
    f16::from_f32_const(x).to_bits()
}

/// IEEE half bits to f32 (exact), in portable code.
#[inline(always)]
pub fn f16_to_f32(bits: u16) -> f32 {
    f16::from_bits(bits).to_f32_const()
}

/// Runs `$body` compiled for the best instruction set of `$level`: the same
/// portable loop, auto-vectorised by LLVM for AVX2 or AVX-512 where allowed.
macro_rules! multiversion {
    ($level:expr, fn $name:ident $(<$g:ident: $bound:path>)? ($($arg:ident: $ty:ty),*) $body:block) => {{
        #[inline(always)]
        fn portable $(<$g: $bound>)? ($($arg: $ty),*) $body
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma,f16c")]
        fn avx2 $(<$g: $bound>)? ($($arg: $ty),*) { portable($($arg),*) }
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
        fn avx512 $(<$g: $bound>)? ($($arg: $ty),*) { portable($($arg),*) }
        let run = |$($arg: $ty),*| match $level {
            // SAFETY: `$level` is a level this CPU supports (SimdLevel::resolve
            // or is_supported checked it), so its instructions are present.
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2 => unsafe { avx2($($arg),*) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => unsafe { avx512($($arg),*) },
            _ => portable($($arg),*),
        };
        run
    }};
}
pub(crate) use multiversion;

/// `dst[i] = bf16(src[i])` for equal-length slices.
pub fn f32_slice_to_bf16(src: &[f32], dst: &mut [u16], level: SimdLevel) {
    assert_eq!(src.len(), dst.len());
    let run = multiversion!(
        level,
        fn body(src: &[f32], dst: &mut [u16]) {
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = f32_to_bf16(s);
            }
        }
    );
    run(src, dst)
}

/// `dst[i] = f32(src[i])` for bfloat16 bits.
pub fn bf16_slice_to_f32(src: &[u16], dst: &mut [f32], level: SimdLevel) {
    assert_eq!(src.len(), dst.len());
    let run = multiversion!(
        level,
        fn body(src: &[u16], dst: &mut [f32]) {
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = bf16_to_f32(s);
            }
        }
    );
    run(src, dst)
}

/// `dst[i] = f16(src[i])`: F16C instructions through `half` on x86_64,
/// NEON's FCVTN on aarch64 (every core: `half` uses Arm instructions only
/// with the optional FP16 extension), portable code for the scalar path.
pub fn f32_slice_to_f16(src: &[f32], dst: &mut [u16], level: SimdLevel) {
    use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
    assert_eq!(src.len(), dst.len());
    match level {
        SimdLevel::Scalar => {
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = f32_to_f16(s);
            }
        }
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => super::kernels::neon::f32_slice_to_f16(src, dst),
        _ => dst.reinterpret_cast_mut::<f16>().convert_from_f32_slice(src),
    }
}

/// `dst[i] = f32(src[i])` for IEEE half bits (F16C through `half`, or
/// NEON's FCVTL, as in [`f32_slice_to_f16`]).
pub fn f16_slice_to_f32(src: &[u16], dst: &mut [f32], level: SimdLevel) {
    use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
    assert_eq!(src.len(), dst.len());
    match level {
        SimdLevel::Scalar => {
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = f16_to_f32(s);
            }
        }
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => super::kernels::neon::f16_slice_to_f32(src, dst),
        _ => src.reinterpret_cast::<f16>().convert_to_f32_slice(dst),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_to_nearest_even_and_keeps_nan() {
        assert_eq!(f32_to_bf16(1.0), 0x3F80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3F80_8000)), 0x3F80); // tie, even stays
        assert_eq!(f32_to_bf16(f32::from_bits(0x3F81_8000)), 0x3F82); // tie, odd rounds up
        assert_eq!(f32_to_bf16(f32::from_bits(0x3F80_8001)), 0x3F81);
        assert_eq!(f32_to_bf16(f32::MAX), 0x7F80); // rounds up to infinity
        assert_eq!(f32_to_bf16(f32::INFINITY), 0x7F80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x7F80_0001)), 0x7FC0);
        assert_eq!(f32_to_bf16(f32::from_bits(0xFFA0_0000)), 0xFFC0);
        assert_eq!(f32_to_bf16(f32::from_bits(0x807F_FFFF)), 0x8080); // subnormal rounds up
        assert_eq!(bf16_to_f32(0x4049), f32::from_bits(0x4049_0000));
    }

    #[test]
    fn every_bf16_survives_the_round_trip() {
        for bits in 0..=u16::MAX {
            let x = bf16_to_f32(bits);
            if !x.is_nan() {
                assert_eq!(f32_to_bf16(x), bits);
            }
        }
    }

    #[test]
    fn slice_paths_agree_with_scalar() {
        let values: Vec<f32> = (0..5000u32)
            .map(|i| f32::from_bits(i.wrapping_mul(2_654_435_761)))
            .chain([f32::NAN, -0.0, f32::MIN_POSITIVE / 3.0, 65520.0, 65519.0])
            .collect();
        for level in SimdLevel::available() {
            let mut bf = vec![0u16; values.len()];
            f32_slice_to_bf16(&values, &mut bf, level);
            let mut h = vec![0u16; values.len()];
            f32_slice_to_f16(&values, &mut h, level);
            for (i, &x) in values.iter().enumerate() {
                assert_eq!(bf[i], f32_to_bf16(x), "{level} bf16 of {x:e}");
                if !x.is_nan() {
                    assert_eq!(h[i], f32_to_f16(x), "{level} f16 of {x:e}");
                }
            }
            let mut back = vec![0f32; values.len()];
            f16_slice_to_f32(&h, &mut back, level);
            for (i, &b) in h.iter().enumerate() {
                assert_eq!(back[i].to_bits(), f16_to_f32(b).to_bits(), "{level} f16 {b:#x}");
            }
        }
    }

    /// Every f16 bit pattern (NaN payloads, subnormals, both zeros) to f32
    /// and back, and f32 NaNs with payloads to f16, on every level: the bits
    /// the portable conversions give.
    #[test]
    fn f16_slices_are_exact_for_every_half_and_nan_payload() {
        let all: Vec<u16> = (0..=u16::MAX).collect();
        let nans: Vec<f32> =
            [0x7F80_0001u32, 0x7F80_2000, 0x7FA0_0000, 0x7FC0_0000, 0x7FC0_1FFF, 0x7FD5_5555, 0x7FFF_FFFF]
                .into_iter()
                .flat_map(|b| [f32::from_bits(b), f32::from_bits(b | 0x8000_0000)])
                .collect();
        for level in SimdLevel::available() {
            let mut wide = vec![0f32; all.len()];
            f16_slice_to_f32(&all, &mut wide, level);
            for (&h, w) in all.iter().zip(&wide) {
                assert_eq!(w.to_bits(), f16_to_f32(h).to_bits(), "{level} f32 of f16 {h:#06x}");
            }
            let mut narrow = vec![0u16; all.len()];
            f32_slice_to_f16(&wide, &mut narrow, level);
            for (i, (&h, &n)) in all.iter().zip(&narrow).enumerate() {
                assert_eq!(n, f32_to_f16(wide[i]), "{level} f16 of f32 {:#010x}", wide[i].to_bits());
                // Every half survives the round trip, but signalling NaNs come back quiet.
                let quieted = if h & 0x7C00 == 0x7C00 && h & 0x3FF != 0 { h | 0x200 } else { h };
                assert_eq!(n, quieted, "{level} round trip of {h:#06x}");
            }
            let mut from_nans = vec![0u16; nans.len()];
            f32_slice_to_f16(&nans, &mut from_nans, level);
            for (x, h) in nans.iter().zip(from_nans) {
                assert_eq!(h, f32_to_f16(*x), "{level} f16 of NaN {:#010x}", x.to_bits());
            }
        }
    }
}
