//! The resampling row loops, written once as plain Rust over fixed-size
//! channel groups and stamped per instruction set with `#[target_feature]`,
//! so that LLVM vectorises the same description for AVX2, AVX-512 and NEON.

use super::super::simd::SimdLevel;
use super::taps::{Area, Linear};

/// Two rows of bilinear sums, their two weights, the u8 row out.
type VerticalLinear = unsafe fn(&[i16], &[i16], [i16; 2], &mut [u8]);

/// Two rows in, their sums out, the two rows the next call reads.
type Horizontal2 = unsafe fn([&[u8]; 2], &Linear, [&mut [i16]; 2], [&[u8]; 2]);

/// One set of row loops, for one level and one number of channels.
#[derive(Clone, Copy)]
pub(crate) struct RowKernels {
    /// Bilinear along x: u8 pixels to fixed-point sums (weights of 2^11), shifted right by 4.
    /// The last argument is the row the next call will read (or empty): the
    /// x86 loops prefetch it, a cache line per step, while they work.
    pub horizontal_linear: unsafe fn(&[u8], &Linear, &mut [i16], &[u8]),
    /// `horizontal_linear` of two rows of the same length at once, the
    /// taps read once for both (packed sources, whose rows are read in place).
    pub horizontal_linear2: Horizontal2,
    /// Bilinear along y: two rows of sums to u8, rounded as OpenCV does.
    pub vertical_linear: VerticalLinear,
    /// Nearest along x: copies the pixels named by the table.
    pub gather: unsafe fn(&[u8], &[u32], &mut [u8]),
    /// A YUV row's 2-byte groups (two Y bytes, or a U,V pair) named by the
    /// table (group numbers), side by side: what a strong shrink decodes.
    pub groups: unsafe fn(&[u8], &[u32], &mut [u8]),
    /// Integer shrink: adds a row into the column sums.
    pub sum_rows: unsafe fn(&[u8], &mut [u32]),
    /// Integer shrink along x: the mean of `kx` column sums, of an area of `area` pixels.
    pub blocks: unsafe fn(&[u32], usize, u32, &mut [u8]),
    /// Fractional shrink: `acc = w * row` (first row) or `acc += w * row`.
    pub weigh_rows: unsafe fn(&[u8], f32, &mut [f32], bool),
    /// Fractional shrink along x, rounded to u8.
    pub area_horizontal: unsafe fn(&[f32], &Area, &mut [u8]),
}

/// The row loops. `#[inline(always)]` puts each body into the stamped
/// wrappers below, where it is compiled for that wrapper's instruction set.
mod body {
    use super::{Area, Linear};

    /// `out` has room for 4 values more than the row (see `Scratch`).
    #[inline(always)]
    pub fn horizontal_linear<const C: usize>(src: &[u8], taps: &Linear, out: &mut [i16], _ahead: &[u8]) {
        horizontal_linear_from::<C>(0, src, taps, out)
    }

    #[inline(always)]
    pub fn horizontal_linear2<const C: usize>(src: [&[u8]; 2], taps: &Linear, out: [&mut [i16]; 2], ahead: [&[u8]; 2]) {
        let [o0, o1] = out;
        horizontal_linear::<C>(src[0], taps, o0, ahead[0]);
        horizontal_linear::<C>(src[1], taps, o1, ahead[1]);
    }

    /// Destination pixels `first..` of `horizontal_linear`. The sums are kept
    /// shifted right by 4, in 16 bits: all that OpenCV's y pass reads of them.
    #[inline(always)]
    pub fn horizontal_linear_from<const C: usize>(first: usize, src: &[u8], taps: &Linear, out: &mut [i16]) {
        for d in first..taps.index.len() {
            let (ix, w) = (taps.index[d], taps.weight[d]);
            let a: &[u8; C] = src[ix[0] as usize * C..][..C].try_into().unwrap();
            let b: &[u8; C] = src[ix[1] as usize * C..][..C].try_into().unwrap();
            for c in 0..C {
                out[d * C + c] = ((a[c] as i32 * w[0] as i32 + b[c] as i32 * w[1] as i32) >> 4) as i16;
            }
        }
    }

    /// OpenCV's 8-bit vertical step (`VResizeLinearVec_32s8u`): each sum
    /// shifted right by 4 (done by the x pass), multiplied by its 11-bit
    /// weight keeping the high 16 bits, then `(t + 2) >> 2`. Not the same as
    /// rounding the exact 22-bit product: this is what makes the results
    /// equal to OpenCV's. In 16 bits as OpenCV does (a sum of at most
    /// 255 * 2048 fits once shifted): LLVM makes the products `pmulhw`.
    #[inline(always)]
    pub fn vertical_linear(r0: &[i16], r1: &[i16], w: [i16; 2], out: &mut [u8]) {
        let (b0, b1) = (w[0] as i32, w[1] as i32);
        for ((o, &s0), &s1) in out.iter_mut().zip(r0).zip(r1) {
            let t = ((s0 as i32 * b0) >> 16) as i16 + ((s1 as i32 * b1) >> 16) as i16;
            *o = ((t + 2) >> 2).clamp(0, 255) as u8;
        }
    }

    #[inline(always)]
    pub fn gather<const C: usize>(src: &[u8], index: &[u32], out: &mut [u8]) {
        for (&i, o) in index.iter().zip(out.chunks_exact_mut(C)) {
            o.copy_from_slice(&src[i as usize * C..][..C]);
        }
    }

    /// Fixed-size copies (the loop it replaced called `memcpy` twice a
    /// group). A strong shrink (4K -> 224x224) waits here on the loads of
    /// rows far apart, not on instructions: an AVX2 `vpgatherdd` loop, and
    /// prefetching the next row, measured the same (docs/layout.md).
    #[inline(always)]
    pub fn groups(src: &[u8], index: &[u32], out: &mut [u8]) {
        gather::<2>(src, index, out)
    }

    #[inline(always)]
    pub fn sum_rows(row: &[u8], acc: &mut [u32]) {
        for (a, &s) in acc.iter_mut().zip(row) {
            *a += s as u32;
        }
    }

    /// OpenCV's integer shrink: `(sum + 2) >> 2` for 2x2 (its SIMD path),
    /// else `sum * (1 / area)` in f32, rounded to nearest even.
    #[inline(always)]
    pub fn blocks<const C: usize>(acc: &[u32], kx: usize, area: u32, out: &mut [u8]) {
        let inv = 1.0 / area as f32;
        for (block, o) in acc.chunks_exact(kx * C).zip(out.chunks_exact_mut(C)) {
            let mut sum = [0u32; C];
            for px in block.chunks_exact(C) {
                for c in 0..C {
                    sum[c] += px[c];
                }
            }
            for c in 0..C {
                o[c] = if area == 4 {
                    ((sum[c] + 2) >> 2) as u8
                } else {
                    (sum[c] as f32 * inv).round_ties_even().min(255.0) as u8
                };
            }
        }
    }

    /// Mul then add, not fused: as OpenCV's `sum += beta * buf`.
    #[inline(always)]
    pub fn weigh_rows(row: &[u8], w: f32, acc: &mut [f32], first: bool) {
        if first {
            for (a, &s) in acc.iter_mut().zip(row) {
                *a = w * s as f32;
            }
        } else {
            for (a, &s) in acc.iter_mut().zip(row) {
                *a += w * s as f32;
            }
        }
    }

    /// `acc` has one value of slack after the row, so that 3-value pixels are
    /// read 4 values wide (the fourth unused).
    #[inline(always)]
    pub fn area_horizontal<const C: usize>(acc: &[f32], taps: &Area, out: &mut [u8]) {
        const L: usize = 4;
        for (d, o) in out.chunks_exact_mut(C).enumerate() {
            let mut sum = [0f32; L];
            for t in taps.start[d] as usize..taps.start[d + 1] as usize {
                let w = taps.weight[t];
                let start = taps.index[t] as usize * C;
                let px: &[f32; L] = acc[start..start + L].try_into().unwrap();
                for c in 0..L {
                    sum[c] += w * px[c];
                }
            }
            for c in 0..C {
                o[c] = sum[c].round_ties_even().clamp(0.0, 255.0) as u8;
            }
        }
    }
}

/// A module of wrappers around `body`, compiled with the given target features.
macro_rules! stamp {
    ($name:ident, $horizontal:ident $(, $features:literal)?) => {
        mod $name {
            use super::body;
            #[cfg(target_arch = "x86_64")]
            #[allow(unused_imports)]
            use super::x86;
            use super::{Area, Linear};

            $(#[target_feature(enable = $features)])?
            pub(super) unsafe fn horizontal_linear<const C: usize>(src: &[u8], taps: &Linear, out: &mut [i16], ahead: &[u8]) {
                $horizontal::horizontal_linear::<C>(src, taps, out, ahead)
            }
            $(#[target_feature(enable = $features)])?
            pub(super) unsafe fn horizontal_linear2<const C: usize>(
                src: [&[u8]; 2],
                taps: &Linear,
                out: [&mut [i16]; 2],
                ahead: [&[u8]; 2],
            ) {
                $horizontal::horizontal_linear2::<C>(src, taps, out, ahead)
            }
            $(#[target_feature(enable = $features)])?
            pub(super) unsafe fn vertical_linear(r0: &[i16], r1: &[i16], w: [i16; 2], out: &mut [u8]) {
                body::vertical_linear(r0, r1, w, out)
            }
            $(#[target_feature(enable = $features)])?
            pub(super) unsafe fn gather<const C: usize>(src: &[u8], index: &[u32], out: &mut [u8]) {
                body::gather::<C>(src, index, out)
            }
            $(#[target_feature(enable = $features)])?
            pub(super) unsafe fn groups(src: &[u8], index: &[u32], out: &mut [u8]) {
                body::groups(src, index, out)
            }
            $(#[target_feature(enable = $features)])?
            pub(super) unsafe fn sum_rows(row: &[u8], acc: &mut [u32]) {
                body::sum_rows(row, acc)
            }
            $(#[target_feature(enable = $features)])?
            pub(super) unsafe fn blocks<const C: usize>(acc: &[u32], kx: usize, area: u32, out: &mut [u8]) {
                body::blocks::<C>(acc, kx, area, out)
            }
            $(#[target_feature(enable = $features)])?
            pub(super) unsafe fn weigh_rows(row: &[u8], w: f32, acc: &mut [f32], first: bool) {
                body::weigh_rows(row, w, acc, first)
            }
            $(#[target_feature(enable = $features)])?
            pub(super) unsafe fn area_horizontal<const C: usize>(acc: &[f32], taps: &Area, out: &mut [u8]) {
                body::area_horizontal::<C>(acc, taps, out)
            }
        }
    };
}

stamp!(portable, body);
#[cfg(target_arch = "x86_64")]
stamp!(avx2, x86, "avx2,fma");
#[cfg(target_arch = "x86_64")]
stamp!(avx512, x86, "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma");
#[cfg(target_arch = "aarch64")]
stamp!(neon, body, "neon");

/// Where LLVM's code for the portable loop was measurably slow (the
/// bilinear x pass was two thirds of a 1080p -> 224x224 resize): SSSE3
/// shuffles and `pmaddwd`, inlined into the AVX2 and AVX-512 wrappers.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{body, Linear};

    /// As `body::horizontal_linear`: for each destination pixel, the pair of
    /// source pixels from one 8-byte load, their values interleaved as 16-bit
    /// (a, b) pairs, times the (w0, w1) pair in one multiply-add; two pixels
    /// per step in the two halves of a 256-bit register, then one at a time.
    /// Each step also prefetches a cache line of `ahead`, the row the next
    /// call reads: a shrink's rows lie several rows apart, so the hardware
    /// prefetchers start each one cold (1080p -> 224x224: 10% faster).
    #[inline(always)]
    pub(super) fn horizontal_linear<const C: usize>(src: &[u8], taps: &Linear, out: &mut [i16], ahead: &[u8]) {
        rows::<C, 1>([src], taps, [out], [ahead])
    }

    /// Two rows in one loop: each step's taps serve both.
    #[inline(always)]
    pub(super) fn horizontal_linear2<const C: usize>(
        src: [&[u8]; 2],
        taps: &Linear,
        out: [&mut [i16]; 2],
        ahead: [&[u8]; 2],
    ) {
        rows::<C, 2>(src, taps, out, ahead)
    }

    #[inline(always)]
    fn rows<const C: usize, const R: usize>(src: [&[u8]; R], taps: &Linear, out: [&mut [i16]; R], ahead: [&[u8]; R]) {
        if C == 1 {
            for r in 0..R {
                body::horizontal_linear::<C>(src[r], taps, out[r], ahead[r]);
            }
            return;
        }
        let mut mask = [0x80u8; 16];
        for c in 0..4 {
            mask[4 * c] = c as u8;
            mask[4 * c + 2] = (C + c) as u8;
        }
        let n = taps.index.len();
        let shortest = src.iter().map(|s| s.len()).min().unwrap_or(0);
        let fits = |d: usize| taps.index[d][0] as usize * C + 8 <= shortest;
        let mut d = 0;
        let mut fetched = 0;
        assert!(out.iter().all(|o| o.len() >= n * C + 4) && taps.weight.len() == n);
        // SAFETY: the callers are compiled with AVX2 (SSSE3 and SSE4.1 included).
        // Each load reads 8 bytes at index * C, inside every row of `src`
        // (`fits`; indices never decrease, so `fits(d + 1)` covers d); weights
        // are read at d and d + 1 < n; each store writes 4 values at d * C,
        // inside `out` (room for 4 values more than n * C). Prefetches name
        // addresses inside `ahead` (and could not fault if they did not).
        unsafe {
            let mask = _mm_loadu_si128(mask.as_ptr().cast());
            let mask2 = _mm256_broadcastsi128_si256(mask);
            let spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
            let weights = taps.weight.as_ptr();
            while d + 2 <= n && fits(d + 1) {
                for a in &ahead {
                    if fetched < a.len() {
                        _mm_prefetch::<_MM_HINT_T0>(a.as_ptr().add(fetched).cast());
                    }
                }
                fetched += 64;
                let (i0, i1) = (taps.index[d][0] as usize * C, taps.index[d + 1][0] as usize * C);
                // The (w0, w1) pairs of pixels d and d + 1: one per 128-bit half.
                let pair = weights.add(d).cast::<i64>().read_unaligned();
                let w = _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(_mm_set1_epi64x(pair)), spread);
                for r in 0..R {
                    let p0 = _mm_loadl_epi64(src[r].as_ptr().add(i0).cast());
                    let p1 = _mm_loadl_epi64(src[r].as_ptr().add(i1).cast());
                    let bytes = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(p0), p1);
                    let sums = _mm256_srai_epi32::<4>(_mm256_madd_epi16(_mm256_shuffle_epi8(bytes, mask2), w));
                    // Per 128-bit half, the 4 sums of one pixel as 16-bit values in its low 64 bits.
                    let packed = _mm256_packs_epi32(sums, sums);
                    let o = out[r].as_mut_ptr();
                    _mm_storel_epi64(o.add(d * C).cast(), _mm256_castsi256_si128(packed));
                    _mm_storel_epi64(o.add((d + 1) * C).cast(), _mm256_extracti128_si256::<1>(packed));
                }
                d += 2;
            }
            while d < n && fits(d) {
                let w = taps.weight[d];
                let weights = _mm_set1_epi32((w[0] as u16 as i32) | ((w[1] as i32) << 16));
                for r in 0..R {
                    let bytes = _mm_loadl_epi64(src[r].as_ptr().add(taps.index[d][0] as usize * C).cast());
                    let sums = _mm_srai_epi32::<4>(_mm_madd_epi16(_mm_shuffle_epi8(bytes, mask), weights));
                    _mm_storel_epi64(out[r].as_mut_ptr().add(d * C).cast(), _mm_packs_epi32(sums, sums));
                }
                d += 1;
            }
        }
        for r in 0..R {
            body::horizontal_linear_from::<C>(d, src[r], taps, &mut *out[r]);
        }
    }
}

macro_rules! kernels_of {
    ($m:ident, $c:literal) => {
        RowKernels {
            horizontal_linear: $m::horizontal_linear::<$c>,
            horizontal_linear2: $m::horizontal_linear2::<$c>,
            vertical_linear: $m::vertical_linear,
            gather: $m::gather::<$c>,
            groups: $m::groups,
            sum_rows: $m::sum_rows,
            blocks: $m::blocks::<$c>,
            weigh_rows: $m::weigh_rows,
            area_horizontal: $m::area_horizontal::<$c>,
        }
    };
}

macro_rules! by_channels {
    ($m:ident, $channels:expr) => {
        match $channels {
            1 => kernels_of!($m, 1),
            3 => kernels_of!($m, 3),
            _ => kernels_of!($m, 4),
        }
    };
}

/// The row loops for `channels`-value pixels (1, 3 or 4) at `level`, and the
/// name of the instruction set they were compiled for.
pub(crate) fn row_kernels(level: SimdLevel, channels: usize) -> (RowKernels, &'static str) {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 => (by_channels!(avx2, channels), "avx2"),
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 | SimdLevel::Avx512Vbmi => (by_channels!(avx512, channels), "avx512"),
        #[cfg(target_arch = "aarch64")]
        SimdLevel::Neon => (by_channels!(neon, channels), "neon"),
        _ => (by_channels!(portable, channels), "scalar"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every level gathers the groups the table names, up to the row's
    /// last group.
    #[test]
    fn every_level_gathers_the_groups_named() {
        let row: Vec<u8> = (0..200u32).map(|i| (i * 37 + 11) as u8).collect();
        for level in SimdLevel::available() {
            let groups = row_kernels(level, 4).0.groups;
            for index in [(0..100).collect::<Vec<u32>>(), (0..100).step_by(3).collect(), vec![99; 19], vec![]] {
                let want: Vec<u8> =
                    index.iter().flat_map(|&g| [row[2 * g as usize], row[2 * g as usize + 1]]).collect();
                let mut out = vec![0u8; want.len()];
                // SAFETY: the level is available on this CPU.
                unsafe { groups(&row, &index, &mut out) };
                assert_eq!(out, want, "{level:?} {index:?}");
            }
        }
    }
}
