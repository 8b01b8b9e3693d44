//! NEON's 16-bit float conversions. IEEE half is converted with
//! `FCVTN`/`FCVTN2` (f32 to f16) and `FCVTL`/`FCVTL2` (f16 to f32) in inline
//! assembly: Rust's f16 NEON intrinsics are not stable yet. These are base
//! Armv8-A Advanced SIMD instructions (not the optional FEAT_FP16
//! arithmetic), so every aarch64 core has them, a Cortex-A72 included.

use std::arch::aarch64::*;
use std::arch::asm;

use super::float::{f16_to_f32, f32_to_f16};

/// Eight f32 (`lo`, then `hi`) to IEEE half bits with `FCVTN` / `FCVTN2`:
/// rounded to nearest, ties to even (the FPCR's default mode, which Rust code
/// may assume and which Linux gives every process), overflow to infinity,
/// subnormal halves kept, a NaN quieted with the top of its payload kept:
/// what `half`'s software conversion ([`f32_to_f16`]) gives, bit for bit.
#[inline(always)]
pub(crate) fn f16x8_of(lo: float32x4_t, hi: float32x4_t) -> uint16x8_t {
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
