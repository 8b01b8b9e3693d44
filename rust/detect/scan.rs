//! The class scan of a channel-major output `[4+nc+extra, N]`: every anchor's
//! best class score, and the anchors whose best is above the threshold.
//!
//! Read where the model wrote them (f32, f16 and bf16 in place; other types
//! and strides converted to f32 a block at a time), a group of anchors at a
//! time:
//!
//! 1. the maximum of each column over all class rows, in SIMD registers (one
//!    `max` per register of scores, eight independent chains);
//! 2. for the few columns whose maximum is above `conf`, the class: the first
//!    row holding that maximum, read back while the group is still in L1.
//!
//! This is exactly a scan with `v > best` (the first class wins ties, as
//! torch's `max`; NaN never wins): `max(v, best)` keeps `best` unless
//! `v > best`, so the maximum is bit for bit one of the scores, and the first
//! row equal to it is the first row that raised it. f16 and bf16 are compared
//! as signed integers, NaN made zero: that is their order for non-negative
//! values, and puts every negative below them; only maxima above
//! `conf >= 0` are used, and for those the two orders agree.

use super::tensor::{Element, Matrix};

/// Anchors per block of the outputs converted to f32 first (80 classes: 160 KiB).
const BLOCK: usize = 512;

/// Anchors per group: eight 32-byte registers of sixteen 16-bit floats (or
/// eight f32), 256 bytes of each row; a group of 80 classes (20 KiB) stays in
/// L1 for the second pass.
const GROUP: usize = 128;

/// An anchor whose best class score is above the threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub anchor: usize,
    pub score: f32,
    pub class: u32,
}

/// The anchors of `output` (channel-major: row `first + c` holds class c's
/// scores) whose best score over `nc` classes is strictly above `conf`
/// (`conf >= 0`), in anchor order, appended to `hits`.
pub fn scan(output: Matrix<'_>, first: usize, nc: usize, conf: f32, hits: &mut Vec<Hit>) {
    let n = output.cols;
    if nc == 0 || n == 0 {
        return;
    }
    let kernel = Kernel::get();
    match output.element() {
        Element::F32 => {
            if let Some((rows, stride)) = output.packed::<f32>(first, 0, nc, n) {
                return kernel.block::<F32>(rows, stride, nc, n, conf, 0, hits);
            }
        }
        Element::F16 => {
            if let Some((rows, stride)) = output.packed::<u16>(first, 0, nc, n) {
                return kernel.block::<F16>(rows, stride, nc, n, conf, 0, hits);
            }
        }
        Element::Bf16 => {
            if let Some((rows, stride)) = output.packed::<u16>(first, 0, nc, n) {
                return kernel.block::<Bf16>(rows, stride, nc, n, conf, 0, hits);
            }
        }
        Element::I8 { .. } | Element::U8 { .. } => {}
    }
    // Other element types and strides: each block converted to f32 first.
    let mut converted = Vec::new();
    let mut scratch = [0f32; super::tensor::CHUNK];
    for start in (0..n).step_by(BLOCK) {
        let width = BLOCK.min(n - start);
        converted.resize(nc * width, 0.0);
        for (c, row) in converted.chunks_exact_mut(width).enumerate() {
            output.row_chunks_in(first + c, start..start + width, &mut scratch, |at, values| {
                row[at - start..at - start + values.len()].copy_from_slice(values);
            });
        }
        kernel.block::<F32>(&converted, width, nc, width, conf, start, hits);
    }
}

/// How scores of one element type are compared: in portable code one at a
/// time, with AVX2 a register at a time.
trait Score {
    type Raw: Copy;
    /// Scores per 32-byte register.
    #[cfg(target_arch = "x86_64")]
    const LANES: usize = 32 / std::mem::size_of::<Self::Raw>();
    /// The running maximum before any row.
    const LOWEST: Self::Raw;
    fn value(raw: Self::Raw) -> f32;
    /// `v` where it is greater than `top` (NaN never is), else `top`.
    fn max(v: Self::Raw, top: Self::Raw) -> Self::Raw;
    /// Whether `raw` is the maximum `top` (a value above `conf >= 0`).
    fn is(raw: Self::Raw, top: f32) -> bool;
    /// [`Score::max`] of the LANES scores at `p` and `top`, lane by lane.
    ///
    /// # Safety
    /// The LANES elements at `p` must be readable; the CPU must have AVX2.
    #[cfg(target_arch = "x86_64")]
    unsafe fn fold(p: *const Self::Raw, top: std::arch::x86_64::__m256i) -> std::arch::x86_64::__m256i;
    /// The maxima of a register as f32, into `out[..LANES]`.
    ///
    /// # Safety
    /// `out` must hold LANES values; the CPU must have AVX2 and F16C.
    #[cfg(target_arch = "x86_64")]
    unsafe fn values(top: std::arch::x86_64::__m256i, out: *mut f32);
}

struct F32;
struct F16;
struct Bf16;

impl Score for F32 {
    type Raw = f32;
    const LOWEST: f32 = f32::NEG_INFINITY;
    #[inline(always)]
    fn value(raw: f32) -> f32 {
        raw
    }
    #[inline(always)]
    fn max(v: f32, top: f32) -> f32 {
        if v > top {
            v
        } else {
            top
        }
    }
    #[inline(always)]
    fn is(raw: f32, top: f32) -> bool {
        raw == top
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn fold(p: *const f32, top: std::arch::x86_64::__m256i) -> std::arch::x86_64::__m256i {
        use std::arch::x86_64::*;
        // SAFETY: the caller guarantees the eight f32 and AVX. max_ps(v, t) is
        // v where v > t, else t (t when v is NaN): Score::max.
        unsafe { _mm256_castps_si256(_mm256_max_ps(_mm256_loadu_ps(p), _mm256_castsi256_ps(top))) }
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn values(top: std::arch::x86_64::__m256i, out: *mut f32) {
        use std::arch::x86_64::*;
        // SAFETY: the caller guarantees eight f32 at out and AVX.
        unsafe { _mm256_storeu_ps(out, _mm256_castsi256_ps(top)) }
    }
}

/// f16 and bf16, compared by their bits as signed integers.
trait Half {
    /// The bits above which a positive value is NaN.
    const NAN_ABOVE: i16;
    fn value(raw: u16) -> f32;
    /// The bits of a value of this type given as f32.
    fn bits(value: f32) -> u16;
    /// Eight values as f32 from their bits.
    ///
    /// # Safety
    /// The CPU must have AVX2 and F16C.
    #[cfg(target_arch = "x86_64")]
    unsafe fn widen(bits: std::arch::x86_64::__m128i) -> std::arch::x86_64::__m256;
}

impl Half for F16 {
    const NAN_ABOVE: i16 = 0x7c00;
    #[inline(always)]
    fn value(raw: u16) -> f32 {
        crate::simd::f16_to_f32(raw)
    }
    #[inline(always)]
    fn bits(value: f32) -> u16 {
        crate::simd::f32_to_f16(value)
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn widen(bits: std::arch::x86_64::__m128i) -> std::arch::x86_64::__m256 {
        // SAFETY: the caller guarantees F16C; the conversion is exact.
        unsafe { std::arch::x86_64::_mm256_cvtph_ps(bits) }
    }
}

impl Half for Bf16 {
    const NAN_ABOVE: i16 = 0x7f80;
    #[inline(always)]
    fn value(raw: u16) -> f32 {
        crate::simd::bf16_to_f32(raw)
    }
    #[inline(always)]
    fn bits(value: f32) -> u16 {
        (value.to_bits() >> 16) as u16
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn widen(bits: std::arch::x86_64::__m128i) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        // SAFETY: the caller guarantees AVX2; bf16 is the top half of an f32.
        unsafe { _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(bits))) }
    }
}

impl<H: Half> Score for H {
    type Raw = u16;
    const LOWEST: u16 = i16::MIN as u16;
    #[inline(always)]
    fn value(raw: u16) -> f32 {
        H::value(raw)
    }
    #[inline(always)]
    fn max(v: u16, top: u16) -> u16 {
        let v = if v as i16 > H::NAN_ABOVE { 0 } else { v as i16 };
        v.max(top as i16) as u16
    }
    #[inline(always)]
    fn is(raw: u16, top: f32) -> bool {
        // A value above zero has one bit pattern.
        raw == H::bits(top)
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn fold(p: *const u16, top: std::arch::x86_64::__m256i) -> std::arch::x86_64::__m256i {
        use std::arch::x86_64::*;
        // SAFETY: the caller guarantees the sixteen values and AVX2.
        unsafe {
            let v = _mm256_loadu_si256(p as *const __m256i);
            let nan = _mm256_cmpgt_epi16(v, _mm256_set1_epi16(H::NAN_ABOVE));
            _mm256_max_epi16(_mm256_andnot_si256(nan, v), top)
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn values(top: std::arch::x86_64::__m256i, out: *mut f32) {
        use std::arch::x86_64::*;
        // SAFETY: the caller guarantees sixteen f32 at out, AVX2 and F16C.
        unsafe {
            _mm256_storeu_ps(out, H::widen(_mm256_castsi256_si128(top)));
            _mm256_storeu_ps(out.add(8), H::widen(_mm256_extracti128_si256::<1>(top)));
        }
    }
}

/// The instruction set the scan runs with.
#[derive(Clone, Copy)]
enum Kernel {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Kernel {
    fn get() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::simd::SimdLevel;
            // The AVX2 levels include F16C (SimdLevel checks it at run time).
            if matches!(SimdLevel::default_level(), SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vbmi) {
                return Kernel::Avx2;
            }
        }
        Kernel::Portable
    }

    /// Columns `0..width` of rows `rows[c * stride..]`, c < nc; anchors
    /// numbered from `start`.
    #[allow(clippy::too_many_arguments)]
    fn block<S: Score>(
        self,
        rows: &[S::Raw],
        stride: usize,
        nc: usize,
        width: usize,
        conf: f32,
        start: usize,
        hits: &mut Vec<Hit>,
    ) {
        assert!(nc > 0 && (nc - 1) * stride + width <= rows.len(), "scan block out of bounds");
        let done = match self {
            Kernel::Portable => 0,
            // SAFETY: Kernel::get chose Avx2 only where the CPU has AVX2 and F16C.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => unsafe { groups_avx2::<S>(rows, stride, nc, width, conf, start, hits) },
        };
        let (mut top, mut best) = ([S::LOWEST; GROUP], [0f32; GROUP]);
        for x in (done..width).step_by(GROUP) {
            let w = GROUP.min(width - x);
            let top = &mut top[..w];
            top.fill(S::LOWEST);
            for c in 0..nc {
                for (t, &v) in top.iter_mut().zip(&rows[c * stride + x..c * stride + x + w]) {
                    *t = S::max(v, *t);
                }
            }
            for (b, &t) in best.iter_mut().zip(top.iter()) {
                *b = S::value(t);
            }
            hits_of::<S>(&rows[x..], stride, nc, &best[..w], conf, start + x, hits);
        }
    }
}

/// The columns whose maximum `best` (of columns `0..best.len()` of the rows)
/// is above `conf`, with their class: the first row holding the maximum.
#[inline]
fn hits_of<S: Score>(
    rows: &[S::Raw],
    stride: usize,
    nc: usize,
    best: &[f32],
    conf: f32,
    start: usize,
    hits: &mut Vec<Hit>,
) {
    for (x, &top) in best.iter().enumerate() {
        if top > conf {
            // There is such a row: a maximum above conf is one of the scores.
            let class = (0..nc).find(|&c| S::is(rows[c * stride + x], top)).unwrap_or(0);
            hits.push(Hit { anchor: start + x, score: top, class: class as u32 });
        }
    }
}

/// The maxima and hits of whole groups of eight registers of columns (256
/// bytes of each row); returns how many columns it did.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
fn groups_avx2<S: Score>(
    rows: &[S::Raw],
    stride: usize,
    nc: usize,
    width: usize,
    conf: f32,
    start: usize,
    hits: &mut Vec<Hit>,
) -> usize {
    use std::arch::x86_64::*;
    let group = 8 * S::LANES;
    let groups = width / group * group;
    assert!(nc > 0 && (nc - 1) * stride + width <= rows.len(), "scan block out of bounds");
    let threshold = _mm256_set1_ps(conf);
    let mut best = [0f32; GROUP];
    for x in (0..groups).step_by(group) {
        // SAFETY: rows c < nc, columns x..x + group <= width lie in `rows`
        // (asserted above): unaligned loads; `best` holds 8 * LANES <= GROUP.
        let above = unsafe {
            let mut top = [_mm256_setzero_si256(); 8];
            let lowest = [S::LOWEST; 16];
            for t in &mut top {
                // LOWEST in every lane (a 32-byte register of it).
                *t = _mm256_loadu_si256(lowest.as_ptr() as *const __m256i);
            }
            let mut p = rows.as_ptr().add(x);
            for _ in 0..nc {
                for (k, t) in top.iter_mut().enumerate() {
                    *t = S::fold(p.add(k * S::LANES), *t);
                }
                p = p.add(stride);
            }
            let mut above = 0;
            for (k, t) in top.iter().enumerate() {
                S::values(*t, best.as_mut_ptr().add(k * S::LANES));
            }
            for k in 0..group / 8 {
                above |= _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GT_OQ>(
                    _mm256_loadu_ps(best.as_ptr().add(8 * k)),
                    threshold,
                ));
            }
            above
        };
        if above != 0 {
            hits_of::<S>(&rows[x..], stride, nc, &best[..group], conf, start + x, hits);
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every kernel of `S` on the same block: the hits of the plain `v > best` scan.
    fn check<S: Score>(rows: &[S::Raw], nc: usize, width: usize, conf: f32) -> std::result::Result<(), TestCaseError> {
        let mut want = Vec::new();
        for x in 0..width {
            let (mut top, mut class) = (f32::NEG_INFINITY, 0);
            for c in 0..nc {
                let v = S::value(rows[c * width + x]);
                if v > top {
                    (top, class) = (v, c as u32);
                }
            }
            if top > conf {
                want.push(Hit { anchor: x, score: top, class });
            }
        }
        #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
        let mut kernels = vec![Kernel::Portable];
        #[cfg(target_arch = "x86_64")]
        if crate::simd::SimdLevel::Avx2.is_supported() {
            kernels.push(Kernel::Avx2);
        }
        for kernel in kernels {
            let mut got = Vec::new();
            kernel.block::<S>(rows, width, nc, width, conf, 0, &mut got);
            prop_assert_eq!(&got, &want);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// The portable and SIMD kernels against the plain scan, whatever the
        /// CPU picks by default: ties, NaN, infinities, negatives, zeros of
        /// both signs, widths across groups and their tails.
        #[test]
        fn kernels_match_the_plain_scan(
            nc in 1usize..40,
            width in 1usize..400,
            seed in any::<u64>(),
            conf in prop_oneof![Just(0.0f32), Just(0.25), Just(0.9)],
        ) {
            let mut state = seed | 1;
            let mut next = || { state ^= state << 13; state ^= state >> 7; state ^= state << 17; state };
            let values: Vec<f32> = (0..nc * width)
                .map(|_| match next() % 20 {
                    0 => f32::NAN,
                    1 => -f32::NAN,
                    2 => f32::INFINITY,
                    3 => f32::NEG_INFINITY,
                    4 => -0.0,
                    5 => 0.0,
                    6 => -((next() % 8) as f32) / 8.0,
                    _ => (next() % 8) as f32 / 8.0,
                })
                .collect();
            check::<F32>(&values, nc, width, conf)?;
            let f16s: Vec<u16> = values.iter().map(|&v| crate::simd::f32_to_f16(v)).collect();
            check::<F16>(&f16s, nc, width, conf)?;
            let bf16s: Vec<u16> = values.iter().map(|&v| (v.to_bits() >> 16) as u16).collect();
            check::<Bf16>(&bf16s, nc, width, conf)?;
        }
    }
}
