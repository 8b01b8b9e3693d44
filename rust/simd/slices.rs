//! Slices of f32 to and from the 16-bit float formats, in the instruction
//! set they are given: written once and stamped (bf16), or through `half`'s
//! F16C path and NEON's FCVTN/FCVTL (f16).

use half::f16;

use super::float::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use super::level::SimdLevel;
use super::stamp;

/// `dst[i] = bf16(src[i])` for equal-length slices.
pub fn f32_slice_to_bf16(src: &[f32], dst: &mut [u16], level: SimdLevel) {
    assert_eq!(src.len(), dst.len());
    let run = stamp!(
        for level,
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
    let run = stamp!(
        for level,
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
        SimdLevel::Neon => super::neon::f32_slice_to_f16(src, dst),
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
        SimdLevel::Neon => super::neon::f16_slice_to_f32(src, dst),
        _ => src.reinterpret_cast::<f16>().convert_to_f32_slice(dst),
    }
}
