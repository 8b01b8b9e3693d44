//! The resize row loops, written once as plain Rust over fixed-size channel
//! groups and stamped per instruction set (`stamp_kernels!`'s `resample` family), so
//! that LLVM vectorises the same description for AVX2, AVX-512 and NEON.
//! An instruction set may replace the bilinear x pass with its own
//! ([`Resample`]: x86/avx2.rs does, with SSSE3 shuffles and `pmaddwd`).

use super::super::colour::yuv_to_rgb;
pub(crate) use super::super::plan::Chroma;
use super::super::plan::YuvOut;
pub(crate) use super::super::resize::taps::{Area, Linear};

/// Two rows of bilinear sums, their two weights, the u8 row out.
type VerticalLinear = unsafe fn(&[i16], &[i16], [i16; 2], &mut [u8]);

/// Two rows in, their sums out, the two rows the next call reads.
type Horizontal2 = unsafe fn([&[u8]; 2], &Linear, [&mut [i16]; 2], [&[u8]; 2]);

/// The x taps of a strong shrink of an 8-bit 4:2:0 source, read straight
/// from its planes (`Resample::yuv_linear`): OpenCV's taps, and each
/// destination pixel's first source pixel again, side by side (one vector
/// load for a step of them).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct YuvTaps {
    pub linear: Linear,
    pub start: Vec<u32>,
}

impl YuvTaps {
    pub(crate) fn new(linear: Linear) -> YuvTaps {
        let start = linear.index.iter().map(|ix| ix[0]).collect();
        YuvTaps { linear, start }
    }
}

/// `Resample::yuv_linear` of one Y row (`ROWS` 1) or two sharing their
/// chroma row (2; the second ignored with 1), into as many rows of sums;
/// the last argument: the plane rows the next call reads, to prefetch.
pub(crate) type YuvLinear = unsafe fn([&[u8]; 2], Chroma<'_>, &YuvTaps, [&mut [i16]; 2], &YuvOut, &[&[u8]]);

/// Rows in (one or two; the second empty: one), added into a block's column sums (the first rows: written).
pub(crate) type SumRows<S> = unsafe fn([&[u8]; 2], &mut [S], bool);

/// A row of column sums, `kx` pixels a block and `area` pixels in it, to the blocks' means.
type BlockMeans<S> = unsafe fn(&[S], usize, u32, &mut [u8]);

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
    /// Integer shrink: a block's first rows as the column sums, or further rows added into them, one or two a
    /// call (the second empty: one); 16-bit sums (`narrow_sums`) and 32-bit ones.
    pub sum_rows: (SumRows<u16>, SumRows<u32>),
    /// Integer shrink along x: the mean of `kx` column sums, of an area of `area` pixels (16- and 32-bit sums).
    pub blocks: (BlockMeans<u16>, BlockMeans<u32>),
    /// The 2x2 shrink's first row: its pixel pairs summed.
    pub pair_sums: unsafe fn(&[u8], &mut [u16]),
    /// The 2x2 shrink's second row: its pixel pairs added to the first's, the mean rounded.
    pub pair_means: unsafe fn(&[u8], &[u16], &mut [u8]),
    /// Fractional shrink: `acc = w * row` (first row) or `acc += w * row`.
    pub weigh_rows: unsafe fn(&[u8], f32, &mut [f32], bool),
    /// Fractional shrink along x, rounded to u8.
    pub area_horizontal: unsafe fn(&[f32], &Area, &mut [u8]),
    /// The bilinear x pass of a strong shrink of an 8-bit 4:2:0 source
    /// (decoding fused in), one row and two rows sharing chroma, where the
    /// level has its own (`Resample::yuv_linear`).
    pub yuv_linear: Option<[YuvLinear; 2]>,
    /// The shrink along x, source to destination pixels, from which
    /// `yuv_linear` is taken over decoding whole rows for the x pass: the
    /// faster of the two changes where the level's x pass does.
    pub fuse_from: [usize; 2],
}

/// The bilinear x pass and the integer shrinks' loops of an instruction
/// set, if it writes its own: the portable loops are the defaults. The
/// other row loops are the same everywhere (below).
pub(crate) trait Resample {
    #[inline(always)]
    fn horizontal_linear<const C: usize>(src: &[u8], taps: &Linear, out: &mut [i16], ahead: &[u8]) {
        horizontal_linear::<C>(src, taps, out, ahead)
    }
    #[inline(always)]
    fn blocks<const C: usize, S: ColumnSum>(acc: &[S], kx: usize, area: u32, out: &mut [u8]) {
        blocks::<C, S>(acc, kx, area, out)
    }
    #[inline(always)]
    fn pair_sums<const C: usize>(row: &[u8], sums: &mut [u16]) {
        pair_sums::<C>(row, sums)
    }
    #[inline(always)]
    fn pair_means<const C: usize>(row: &[u8], sums: &[u16], out: &mut [u8]) {
        pair_means::<C>(row, sums, out)
    }
    #[inline(always)]
    fn horizontal_linear2<const C: usize>(src: [&[u8]; 2], taps: &Linear, out: [&mut [i16]; 2], ahead: [&[u8]; 2]) {
        horizontal_linear2::<C>(src, taps, out, ahead)
    }
    /// The bilinear x pass of `ROWS` Y rows of an 8-bit 4:2:0 source that
    /// share `chroma`, straight from the planes: each destination pixel's
    /// two source pixels decoded to R, G, B, pad bytes exactly as the row
    /// decoders decode them (`out.bytes` 4), then weighed as
    /// `horizontal_linear::<4>` weighs them. A strong shrink (4K -> 224)
    /// decodes only the two pixels a destination pixel reads, with nothing
    /// gathered into scratch first. (Stamped for AVX2 alone, `stamp_kernels!`'s
    /// `fused`: unused where there is no x86.)
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    #[inline(always)]
    fn yuv_linear<const ROWS: usize>(
        y: [&[u8]; 2],
        chroma: Chroma<'_>,
        taps: &YuvTaps,
        out: [&mut [i16]; 2],
        yuv: &YuvOut,
        _ahead: &[&[u8]],
    ) {
        yuv_linear_from::<ROWS>(0, y, chroma, &taps.linear, out, yuv)
    }
}

/// Destination pixels `first..` of `Resample::yuv_linear`, one pixel at a
/// time by the scalar decoder (the reference, and the SIMD loops' tails).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline(always)]
pub(crate) fn yuv_linear_from<const ROWS: usize>(
    first: usize,
    y: [&[u8]; 2],
    chroma: Chroma<'_>,
    taps: &Linear,
    out: [&mut [i16]; 2],
    yuv: &YuvOut,
) {
    let pos = yuv.pos;
    let pad_pos = 6 - pos[0] - pos[1] - pos[2];
    let pad = i32::from(yuv.pad);
    let uv = |x: usize| chroma.pair(x / 2);
    for d in first..taps.index.len() {
        let ([x0, x1], [w0, w1]) = (taps.index[d].map(|i| i as usize), taps.weight[d].map(i32::from));
        let (c0, c1) = (uv(x0), uv(x1));
        for r in 0..ROWS {
            let (a, b) = (yuv_to_rgb(&yuv.k, y[r][x0], c0.0, c0.1), yuv_to_rgb(&yuv.k, y[r][x1], c1.0, c1.1));
            let o = &mut out[r][4 * d..4 * d + 4];
            for c in 0..3 {
                o[pos[c]] = ((i32::from(a[c]) * w0 + i32::from(b[c]) * w1) >> 4) as i16;
            }
            o[pad_pos] = ((pad * w0 + pad * w1) >> 4) as i16;
        }
    }
}

// The row loops. `#[inline(always)]` puts each body into the stamped
// wrappers, where it is compiled for that wrapper's instruction set.

/// `out` has room for 4 values more than the row (see `Scratch`).
#[inline(always)]
pub(crate) fn horizontal_linear<const C: usize>(src: &[u8], taps: &Linear, out: &mut [i16], _ahead: &[u8]) {
    horizontal_linear_from::<C>(0, src, taps, out)
}

#[inline(always)]
pub(crate) fn horizontal_linear2<const C: usize>(
    src: [&[u8]; 2],
    taps: &Linear,
    out: [&mut [i16]; 2],
    ahead: [&[u8]; 2],
) {
    let [o0, o1] = out;
    horizontal_linear::<C>(src[0], taps, o0, ahead[0]);
    horizontal_linear::<C>(src[1], taps, o1, ahead[1]);
}

/// Destination pixels `first..` of `horizontal_linear`. The sums are kept
/// shifted right by 4, in 16 bits: all that OpenCV's y pass reads of them.
#[inline(always)]
pub(crate) fn horizontal_linear_from<const C: usize>(first: usize, src: &[u8], taps: &Linear, out: &mut [i16]) {
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
pub(crate) fn vertical_linear(r0: &[i16], r1: &[i16], w: [i16; 2], out: &mut [u8]) {
    let (b0, b1) = (w[0] as i32, w[1] as i32);
    for ((o, &s0), &s1) in out.iter_mut().zip(r0).zip(r1) {
        let t = ((s0 as i32 * b0) >> 16) as i16 + ((s1 as i32 * b1) >> 16) as i16;
        *o = ((t + 2) >> 2).clamp(0, 255) as u8;
    }
}

/// Nearest along x (and the chroma groups of a strong shrink): pixel `index[k]` of `src` to pixel `k` of `out`.
/// Eight pixels a step share one bounds check, so that a step is eight
/// loads and stores (a check and branch a pixel cost more than the copies); a
/// step with an index past `src` takes the checked loop, which panics as
/// slicing does.
#[inline(always)]
pub(crate) fn gather<const C: usize>(src: &[u8], index: &[u32], out: &mut [u8]) {
    const STEP: usize = 8;
    // The pixels of `src`: an index below it names a pixel inside.
    let pixels = u32::try_from(src.len() / C).unwrap_or(u32::MAX);
    let mut steps = index.chunks_exact(STEP).zip(out.chunks_exact_mut(STEP * C));
    let mut done = 0;
    for (ix, o) in &mut steps {
        // Each index compared on its own (a running maximum is a chain of dependent moves).
        if ix.iter().fold(false, |past, &i| past | (i >= pixels)) {
            break;
        }
        for (k, &i) in ix.iter().enumerate() {
            // SAFETY: every index of the step is below `pixels` (checked
            // above), so its C bytes lie inside `src`; `o` holds STEP pixels.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().add(i as usize * C), o.as_mut_ptr().add(k * C), C) };
        }
        done += STEP;
    }
    for (&i, o) in index[done..].iter().zip(out[done * C..].chunks_exact_mut(C)) {
        o.copy_from_slice(&src[i as usize * C..][..C]);
    }
}

/// Fixed-size copies (the loop it replaced called `memcpy` twice a
/// group). A strong shrink (4K -> 224x224) waits here on the loads of
/// rows far apart, not on instructions: an AVX2 `vpgatherdd` loop, and
/// prefetching the next row, measured the same (docs/layout.md).
#[inline(always)]
pub(crate) fn groups(src: &[u8], index: &[u32], out: &mut [u8]) {
    gather::<2>(src, index, out)
}

/// A block's column sums: 16-bit where a block's rows cannot pass 65535
/// (at most 257 rows of 255: every integer shrink of a video frame), which
/// halves the bytes each row's pass reads and writes; else 32-bit. Only these
/// two types (`WIDE` tells them apart where a kernel loads them itself).
pub(crate) trait ColumnSum:
    Copy + From<u8> + Into<u32> + std::ops::Add<Output = Self> + std::ops::AddAssign
{
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // read by x86's `pixel_blocks` alone
    const WIDE: bool;
}

impl ColumnSum for u16 {
    const WIDE: bool = false;
}

impl ColumnSum for u32 {
    const WIDE: bool = true;
}

/// The rows of a block of `rows` source rows fit 16-bit column sums.
pub(crate) fn narrow_sums(rows: usize) -> bool {
    rows * 255 <= usize::from(u16::MAX)
}

/// A block's rows added into its column sums, one row or two at a pass (a
/// second row empty: one), the block's first rows written, not added into
/// zeroed sums: each a pass over the sums less, the sums being two or four
/// times the bytes of a row.
#[inline(always)]
pub(crate) fn sum_rows<S: ColumnSum>(rows: [&[u8]; 2], acc: &mut [S], first: bool) {
    let [row, next] = rows;
    match (next.is_empty(), first) {
        (true, true) => acc.iter_mut().zip(row).for_each(|(a, &s)| *a = S::from(s)),
        (true, false) => acc.iter_mut().zip(row).for_each(|(a, &s)| *a += S::from(s)),
        (false, true) => {
            acc.iter_mut().zip(row.iter().zip(next)).for_each(|(a, (&s, &t))| *a = S::from(s) + S::from(t))
        }
        (false, false) => {
            acc.iter_mut().zip(row.iter().zip(next)).for_each(|(a, (&s, &t))| *a += S::from(s) + S::from(t))
        }
    }
}

/// A 2x2 shrink's first row (`Method::AreaBlocks` of 2 by 2): each pair of
/// pixels summed channel by channel, in 16 bits. With `pair_means` it
/// reads each source row once and writes no column sums of the whole row.
#[inline(always)]
pub(crate) fn pair_sums<const C: usize>(row: &[u8], sums: &mut [u16]) {
    for (p, s) in row.chunks_exact(2 * C).zip(sums.chunks_exact_mut(C)) {
        for c in 0..C {
            s[c] = u16::from(p[c]) + u16::from(p[C + c]);
        }
    }
}

/// A 2x2 shrink's second row: its pairs added to `pair_sums`' and the mean
/// rounded as OpenCV's 2x2 path rounds it, `(sum + 2) >> 2` (as `blocks`).
#[inline(always)]
pub(crate) fn pair_means<const C: usize>(row: &[u8], sums: &[u16], out: &mut [u8]) {
    for ((p, s), o) in row.chunks_exact(2 * C).zip(sums.chunks_exact(C)).zip(out.chunks_exact_mut(C)) {
        let s: &[u16; C] = s.try_into().unwrap();
        for c in 0..C {
            o[c] = ((s[c] + u16::from(p[c]) + u16::from(p[C + c]) + 2) >> 2) as u8;
        }
    }
}

/// OpenCV's integer shrink: `(sum + 2) >> 2` for 2x2 (its SIMD path),
/// else `sum * (1 / area)` in f32, rounded to nearest even.
#[inline(always)]
pub(crate) fn blocks<const C: usize, S: ColumnSum>(acc: &[S], kx: usize, area: u32, out: &mut [u8]) {
    let inv = 1.0 / area as f32;
    for (block, o) in acc.chunks_exact(kx * C).zip(out.chunks_exact_mut(C)) {
        let mut sum = [0u32; C];
        for px in block.chunks_exact(C) {
            for c in 0..C {
                sum[c] += px[c].into();
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
pub(crate) fn weigh_rows(row: &[u8], w: f32, acc: &mut [f32], first: bool) {
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
pub(crate) fn area_horizontal<const C: usize>(acc: &[f32], taps: &Area, out: &mut [u8]) {
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
