//! Scalar conversions between f32 and the 16-bit float formats: the
//! reference every SIMD path must match bit for bit (the slice conversions,
//! which run the instruction set they are given, are in slices.rs).

use half::f16;

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
}
