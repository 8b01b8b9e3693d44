//! Geometry fused into conversion: a source region scaled into a rectangle
//! of the destination (bilinear, area or nearest, as OpenCV's `resize`),
//! letterboxed or cropped, then colour-converted, normalised and written in
//! the destination layout, one destination row at a time.
//!
//! Each destination row is made in u8 first, then written by the plan's
//! encoder, the same exact encoders as a plain conversion:
//! 1. source rows as u8 pixels: packed sources as they are (reordering and
//!    normalising channels commute with resampling), YUV sources decoded to
//!    R, G, B, pad rows by the plan's row decoder (as `cvtColor` at full
//!    size, then `resize`);
//! 2. resampling: bilinear and nearest along x first, each source row once
//!    (a ring of two rows), then along y; area shrinking along y first (every
//!    source row is read anyway, and the y pass runs on contiguous rows),
//!    then along x;
//! 3. `Plan::encode_span` writes the row, and the fill on either side of it.

mod geometry;
mod rows;
pub(crate) mod taps;

use std::sync::Arc;

pub use geometry::{place, Fit, Interpolation, Rect, Resize, Transform};

use super::error::{bail, Result};
use super::format::Format;
use super::frame::{Destination, RowsMut, Source, SourcePixels};
use super::kernels::resample::{narrow_sums, ColumnSum, RowKernels, SumRows, YuvLinear, YuvTaps};
use super::kernels::row_kernels;
use super::parallel;
use super::plan::{Nv12Plan, Plan, Rearrange};
use super::recent::Recent;
use crate::simd::SimdLevel;
use rows::{Groups, RowReader};
use taps::Method;

/// Bytes of work (source read + destination written) below which a resize stays on one thread.
const MIN_WORK_PER_THREAD: usize = 512 * 1024;

/// Everything the bands share.
struct Job<'p> {
    plan: &'p Plan,
    method: &'p Method,
    kernels: RowKernels,
    /// Values per pixel of the rows resampled (1, 3 or 4).
    channels: usize,
    transform: &'p Transform,
    /// One destination rectangle's width of fill pixels.
    fill_row: Vec<u8>,
    /// Bytes of one pixel in each destination plane.
    pixel_bytes: usize,
    decode: Option<Nv12Plan>,
    /// The first pixel of each 2-pixel group decoded, when not every one is.
    groups: Option<&'p [u32]>,
    /// A strong bilinear shrink of an 8-bit 4:2:0 source, where the level
    /// has the x pass that decodes as it reads (`Resample::yuv_linear`):
    /// its taps, and the kernels for one row and for two sharing chroma.
    fused: Option<(&'p YuvTaps, [YuvLinear; 2])>,
}

/// A resize's tap tables (and, for YUV sources, the pixel groups to
/// decode), kept for the next call with the same sizes: a pipeline resizes
/// every frame alike, and building them is a visible share of a small
/// bilinear resize.
struct Tables {
    method: Method,
    groups: Option<Vec<u32>>,
    /// Where the fused x pass may take the shrink (`groups` are, or it
    /// shrinks as much as the level's `fuse_from` says): a bilinear method's x
    /// taps before `compact_columns`.
    yuv_taps: Option<YuvTaps>,
}

impl Tables {
    /// `yuv`: the source may gather chroma groups (`may_gather`); `fuse_from`:
    /// the shrink along x from which the fused x pass takes it, where that
    /// pass can read it (`fuse_from`).
    fn cached(
        interpolation: Interpolation,
        src: (usize, usize),
        dst: (usize, usize),
        yuv: bool,
        fuse_from: Option<[usize; 2]>,
    ) -> Arc<Tables> {
        type Key = (Interpolation, (usize, usize), (usize, usize), bool, Option<[usize; 2]>);
        static RECENT: Recent<Key, Tables, 8> = Recent::new();
        RECENT.get_or_make((interpolation, src, dst, yuv, fuse_from), || {
            let mut method = Method::new(interpolation, src, dst);
            let linear = match &method {
                Method::Linear { x, .. } if yuv => Some(x.clone()),
                _ => None,
            };
            // A YUV source shrunk along x: decode only the pixel pairs the x taps read.
            let groups = if yuv { compact_columns(&mut method, src.0) } else { None };
            // The fused pass decodes two pixels a destination pixel, the row
            // decoders every pixel of the row once, then the x pass reads the
            // row: from the level's `fuse_from` on, the fused pass is the
            // faster, whatever share of the groups its taps read.
            let strong = fuse_from.is_some_and(|[s, d]| src.0 * d >= dst.0 * s);
            let yuv_taps = linear.filter(|_| groups.is_some() || strong).map(YuvTaps::new);
            Tables { method, groups, yuv_taps }
        })
    }
}

/// Whether a resize of `format` may decode only the chroma groups its x taps
/// read: YUV sources, but not 10-bit ones (the gather reads bytes).
fn may_gather(format: Format) -> bool {
    format.is_yuv() && !format.is_10bit()
}

/// How a resize of a YUV source reads it, as `run` does (what `describe` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum YuvPath {
    /// The x pass decodes as it reads, from the planes (`Resample::yuv_linear`).
    Fused,
    /// The chroma groups the x taps read are gathered, then decoded (a strong
    /// shrink; see `compact_columns`).
    Gathered,
    /// Whole rows are decoded.
    Rows,
}

/// How resizing `src` as `transform` says reads it at `level`.
pub(crate) fn yuv_path(
    src: Format,
    plan: &Plan,
    interpolation: Interpolation,
    transform: &Transform,
    level: SimdLevel,
) -> YuvPath {
    let kernels = row_kernels(level, plan.src_channels).0;
    let (source, content) = (transform.source.size(), transform.content.size());
    let tables = Tables::cached(interpolation, source, content, may_gather(src), fuse_from(src, plan, &kernels));
    if fused_pass(src, plan, &tables, &kernels).is_some() {
        YuvPath::Fused
    } else if tables.groups.is_some() {
        YuvPath::Gathered
    } else {
        YuvPath::Rows
    }
}

/// The fused x pass's taps and kernel, where resizing with `tables` takes it:
/// an 8-bit 4:2:0 source decoded to 4-byte pixels, a bilinear shrink strong
/// enough for `YuvTaps`, and a level that has the kernel. `run` and
/// `yuv_path` both ask here.
fn fused_pass<'t>(
    src: Format,
    plan: &Plan,
    tables: &'t Tables,
    kernels: &RowKernels,
) -> Option<(&'t YuvTaps, [YuvLinear; 2])> {
    match (&tables.yuv_taps, kernels.yuv_linear) {
        (Some(taps), Some(kernel)) if fuse_from(src, plan, kernels).is_some() => Some((taps, kernel)),
        _ => None,
    }
}

/// Where the fused x pass can read `src` as `plan` decodes it, with
/// `kernels` (an 8-bit 4:2:0 source decoded to 4-byte pixels, at a level
/// that has the kernel): the shrink it takes from, `kernels.fuse_from` (the
/// tables then say whether the shrink takes it).
fn fuse_from(src: Format, plan: &Plan, kernels: &RowKernels) -> Option<[usize; 2]> {
    let decodes_to_4_bytes = plan.nv12.as_ref().is_some_and(|d| d.out.bytes == 4);
    kernels.yuv_linear.filter(|_| fused_source(src) && decodes_to_4_bytes).map(|_| kernels.fuse_from)
}

/// The sources whose bilinear shrinks the fused x pass reads: 8-bit 4:2:0.
fn fused_source(format: Format) -> bool {
    matches!(format, Format::Nv12 | Format::Nv21 | Format::I420)
}

/// When the x taps of a bilinear or nearest resize read at most about half
/// of the region's 2-pixel chroma groups, the groups they read (group g is
/// pixels 2g and 2g + 1; in order), with the taps renumbered to pixels of those groups
/// laid end to end. A pixel's decoding depends only on its own Y and its
/// group's U, V, so decoding the groups alone gives the same pixels.
fn compact_columns(method: &mut Method, width: usize) -> Option<Vec<u32>> {
    let mut used = vec![false; width.div_ceil(2)];
    match &*method {
        Method::Linear { x, .. } => x.index.iter().flatten().for_each(|&i| used[i as usize / 2] = true),
        Method::Nearest { x, .. } => x.iter().for_each(|&i| used[i as usize / 2] = true),
        _ => return None,
    }
    let count = used.iter().filter(|&&u| u).count();
    if count * 2 > used.len() {
        return None;
    }
    let mut rank = vec![0u32; used.len()];
    let mut chosen = Vec::with_capacity(count);
    for (g, _) in used.iter().enumerate().filter(|(_, &u)| u) {
        rank[g] = chosen.len() as u32;
        chosen.push(g as u32);
    }
    let at = |i: u32| 2 * rank[i as usize / 2] + i % 2;
    match method {
        Method::Linear { x, .. } => x.index.iter_mut().for_each(|ix| *ix = ix.map(at)),
        Method::Nearest { x, .. } => x.iter_mut().for_each(|i| *i = at(*i)),
        _ => unreachable!(),
    }
    Some(chosen)
}

/// Resizes `src` into `dst` as `transform` says (from `place`); the plan and
/// the transform are checked, so nothing here can fail half-way.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    src: &Source<'_>,
    dst: Destination<'_>,
    plan: &Plan,
    transform: &Transform,
    fill: [u8; 3],
    interpolation: Interpolation,
    level: SimdLevel,
    threads: usize,
) -> Result<()> {
    let source = transform.source;
    let content = transform.content;
    let channels = plan.src_channels;
    reserve_working_memory(transform, channels, threads)?;
    let decode = match src.pixels {
        SourcePixels::Packed { .. } => None,
        _ => Some(plan.nv12.expect("a YUV plan")),
    };
    let (kernels, _) = row_kernels(level, channels);
    let fuse = fuse_from(src.format(), plan, &kernels);
    let tables = Tables::cached(interpolation, source.size(), content.size(), may_gather(src.format()), fuse);
    let (method, mut groups) = (&tables.method, tables.groups.as_deref());
    let fused = fused_pass(src.format(), plan, &tables, &kernels);
    if fused.is_some() {
        groups = None; // nothing is gathered
    }

    // The fill pixel as a source pixel: destination channel k sits at plan.map[k].
    let mut fill_pixel = [0u8; 4];
    for (k, &at) in plan.map.iter().enumerate() {
        if channels == 1 && fill[k] != fill[0] {
            bail!(
                "a {} source has one channel, so the fill colour must be grey (three equal values), not {:?}",
                src.format(),
                fill
            );
        }
        fill_pixel[at] = fill[k];
    }
    let fill_row: Vec<u8> =
        (0..transform.dst_rect.width).flat_map(|_| fill_pixel[..channels].iter().copied()).collect();
    let element = dst.format.element().size();
    let pixel_bytes = if dst.format.is_planar() { element } else { dst.format.channels() * element };
    let job = Job { plan, method, kernels, channels, transform, fill_row, pixel_bytes, decode, groups, fused };

    // Only the rectangle's rows are written; split them into bands.
    let rect = transform.dst_rect;
    let planes: Vec<RowsMut<'_>> =
        dst.planes.into_iter().map(|p| p.split_at(rect.y).1.split_at(rect.height).0).collect();
    let read = method.rows_per_output_row(source.height, content.height).min(source.height)
        * content.height.min(source.height)
        * source.width
        * channels;
    let work = read + rect.width * rect.height * pixel_bytes * planes.len();
    let wanted = threads.min(work / MIN_WORK_PER_THREAD).clamp(1, rect.height);
    let rows_per_band = rect.height.div_ceil(wanted);
    let mut bands = Vec::with_capacity(wanted);
    let mut rest = planes;
    let mut start = 0;
    while start < rect.height {
        let n = rows_per_band.min(rect.height - start);
        let (head, tail): (Vec<_>, Vec<_>) = rest.into_iter().map(|p| p.split_at(n)).unzip();
        bands.push((start, head));
        rest = tail;
        start += n;
    }
    parallel::for_each(bands, wanted, |(start, mut planes)| job.band(src, start, &mut planes));
    Ok(())
}

/// Above this much working memory, a resize first checks that it can have it.
const LARGE_WORKING_MEMORY: usize = 64 << 20;

/// Fails with an out-of-memory error, instead of aborting the process half
/// way, when the tables and the bands' scratch rows of a resize (which grow
/// with the source's width: a 1 x 2^27 source needs about 2 GB) cannot be
/// allocated. An upper bound of what `run` allocates, reserved and freed at
/// once; only for large sizes, so that the common case makes no syscall.
fn reserve_working_memory(transform: &Transform, channels: usize, threads: usize) -> Result<()> {
    let (source, content) = (transform.source, transform.content);
    let tables = 16usize.saturating_mul(source.width + source.height + content.width + content.height);
    let per_band = source
        .width
        .saturating_mul(4 * channels + 16)
        .saturating_add(content.width.saturating_mul(channels * 8))
        .saturating_add(transform.dst_rect.width.saturating_mul(channels));
    let bands = threads.min(transform.dst_rect.height).max(1);
    let total = per_band.saturating_mul(bands).saturating_add(tables);
    if total > LARGE_WORKING_MEMORY {
        let mut probe: Vec<u8> = Vec::new();
        if probe.try_reserve_exact(total).is_err() {
            return Err(crate::layout::LayoutError::out_of_memory(format!(
                "resizing a {}x{} region to {}x{} needs about {} MiB of working memory, which could not be allocated; \
                 convert a smaller region (roi=) or with fewer threads",
                source.width,
                source.height,
                content.width,
                content.height,
                total >> 20
            )));
        }
    }
    Ok(())
}

impl Job<'_> {
    /// Writes rows `start..start + planes' rows` of the destination rectangle.
    fn band(&self, src: &Source<'_>, start: usize, planes: &mut [RowsMut<'_>]) {
        let (rect, content, c) = (self.transform.dst_rect, self.transform.content, self.channels);
        let region = self.transform.source;
        let decoded_pixels = self.groups.map_or(region.width, |g| 2 * g.len());
        let decoded = if self.decode.is_some() { decoded_pixels * 4 } else { 0 };
        let gathered = if self.groups.is_some() { decoded_pixels } else { 0 };
        let mut reader = RowReader {
            pixels: src.pixels,
            region,
            channels: c,
            decode: self.decode,
            groups: self.groups.map(Groups::new),
            gather_groups: self.kernels.groups,
            gather_quads: self.kernels.gather,
            gathered: [vec![0; 2 * gathered], vec![0; gathered]],
            second: match src.pixels {
                SourcePixels::Nv12 { .. } | SourcePixels::I420 { .. }
                    if self.groups.is_some() && matches!(self.method, Method::Linear { .. }) =>
                {
                    [vec![0; gathered], vec![0; decoded]]
                }
                // Integer shrinks read their rows in pairs: whole rows that share a chroma row, decoded together.
                SourcePixels::Nv12 { .. } | SourcePixels::I420 { .. }
                    if self.groups.is_none() && matches!(self.method, Method::AreaBlocks { .. }) =>
                {
                    [Vec::new(), vec![0; decoded]]
                }
                _ => [Vec::new(), Vec::new()],
            },
            rearrange: self.plan.rearrange,
            // Rows for the rearrangement, where `row` runs one: YUYV/UYVY split
            // where the level decodes no packed rows, I420 and I010 interleaved
            // where no chroma groups are gathered (from the planes, in `row`).
            split: match self.plan.rearrange {
                Some(Rearrange::Split(_)) if self.decode.is_some_and(|d| d.packed.is_none()) => {
                    [vec![0; region.width], vec![0; region.width]]
                }
                Some(Rearrange::Interleave(_)) if self.groups.is_none() => {
                    let sample = if src.format().is_10bit() { 2 } else { 1 };
                    [Vec::new(), vec![0; sample * region.width]]
                }
                _ => [Vec::new(), Vec::new()],
            },
            scratch: vec![0; decoded],
            cached: None,
        };
        let mut line = vec![0u8; content.width * c];
        let mut scratch = Scratch::new(self.method, decoded_pixels * c, content.width * c);
        let left = content.x - rect.x;
        let right = rect.x + rect.width - (content.x + content.width);
        for r in 0..planes[0].count() {
            let y = rect.y + start + r;
            if y < content.y || y >= content.y + content.height {
                self.plan.encode_span(&self.fill_row, planes, r, rect.x, self.pixel_bytes);
                continue;
            }
            self.resample_row(y - content.y, &mut reader, &mut scratch, &mut line);
            if left > 0 {
                self.plan.encode_span(&self.fill_row[..left * c], planes, r, rect.x, self.pixel_bytes);
            }
            self.plan.encode_span(&line, planes, r, content.x, self.pixel_bytes);
            if right > 0 {
                self.plan.encode_span(
                    &self.fill_row[..right * c],
                    planes,
                    r,
                    content.x + content.width,
                    self.pixel_bytes,
                );
            }
        }
    }

    /// Destination row `dy` of the content, as u8 pixels, into `line`.
    fn resample_row(&self, dy: usize, reader: &mut RowReader<'_>, scratch: &mut Scratch, line: &mut [u8]) {
        let k = &self.kernels;
        // SAFETY (every call below): the kernels were compiled for a level this
        // CPU supports (SimdLevel::resolve checked it); they bound every access
        // by the slices given, and the tables index inside the region (taps.rs).
        match self.method {
            Method::Nearest { x, y } => unsafe { (k.gather)(reader.row(y[dy] as usize), x, line) },
            Method::Linear { x, y } => {
                let rows = y.index[dy];
                let next = y.index.get(dy + 1).copied();
                let fresh = rows.map(|s| scratch.ring_rows[s as usize & 1] != Some(s));
                if let Some((taps, [one, two])) = self.fused {
                    // A strong shrink of an 8-bit 4:2:0 source: decoded as the x pass reads the planes.
                    let yuv = &reader.decode.expect("a row decoder for a YUV source").out;
                    let shared_chroma = (self.transform.source.y + rows[0] as usize).is_multiple_of(2);
                    // The next output row's plane rows, prefetched by this row's first call.
                    let next_rows = next.filter(|n| *n != rows).map_or([&[][..]; 6], |n| reader.plane_rows(n));
                    let mut ahead = &next_rows[..];
                    if fresh == [true, true] && rows[1] == rows[0] + 1 && shared_chroma {
                        let ((y0, chroma), (y1, _)) =
                            (reader.planes(rows[0] as usize), reader.planes(rows[1] as usize));
                        let [r0, r1] = &mut scratch.ring;
                        let out = if rows[0] & 1 == 0 { [r0, r1] } else { [r1, r0] };
                        unsafe { two([y0, y1], chroma, taps, out.map(|o| &mut o[..]), yuv, ahead) };
                        ahead = &[];
                        scratch.ring_rows[rows[0] as usize & 1] = Some(rows[0]);
                        scratch.ring_rows[rows[1] as usize & 1] = Some(rows[1]);
                    }
                    for &s in &rows {
                        let slot = s as usize & 1;
                        if scratch.ring_rows[slot] != Some(s) {
                            let (luma, chroma) = reader.planes(s as usize);
                            let out = [&mut scratch.ring[slot][..], &mut []];
                            unsafe { one([luma, &[]], chroma, taps, out, yuv, ahead) };
                            ahead = &[];
                            scratch.ring_rows[slot] = Some(s);
                        }
                    }
                } else {
                    if fresh == [true, true] && (rows[0] ^ rows[1]) & 1 == 1 && reader.decode.is_none() {
                        // Two new rows of a packed source: one x pass over both.
                        let ahead = next.map_or([&[][..]; 2], |n| n.map(|s| reader.peek(s as usize)));
                        let src = rows.map(|s| reader.peek(s as usize));
                        let [r0, r1] = &mut scratch.ring;
                        let out = if rows[0] & 1 == 0 { [r0, r1] } else { [r1, r0] };
                        unsafe { (k.horizontal_linear2)(src, x, out.map(|o| &mut o[..]), ahead) };
                        scratch.ring_rows =
                            if rows[0] & 1 == 0 { rows.map(Some) } else { [Some(rows[1]), Some(rows[0])] };
                    }
                    if fresh == [true, true] && rows[1] == rows[0] + 1 && reader.pairs(rows[0] as usize) {
                        // Two new rows of a 4:2:0 source that share their chroma: decoded together, one x pass over both.
                        let ahead = next.map_or([&[][..]; 2], |n| n.map(|s| reader.ahead(s as usize)));
                        let src = reader.row_pair(rows[0] as usize);
                        let [r0, r1] = &mut scratch.ring;
                        let out = if rows[0] & 1 == 0 { [r0, r1] } else { [r1, r0] };
                        unsafe { (k.horizontal_linear2)(src, x, out.map(|o| &mut o[..]), ahead) };
                        scratch.ring_rows =
                            if rows[0] & 1 == 0 { rows.map(Some) } else { [Some(rows[1]), Some(rows[0])] };
                    }
                    for (t, &s) in rows.iter().enumerate() {
                        let slot = s as usize & 1;
                        if scratch.ring_rows[slot] != Some(s) {
                            // The row the next output row reads in this place, to prefetch.
                            let ahead = next.map_or(&[][..], |n| reader.ahead(n[t] as usize));
                            unsafe { (k.horizontal_linear)(reader.row(s as usize), x, &mut scratch.ring[slot], ahead) };
                            scratch.ring_rows[slot] = Some(s);
                        }
                    }
                }
                let values = line.len();
                let (r0, r1) =
                    (&scratch.ring[rows[0] as usize & 1][..values], &scratch.ring[rows[1] as usize & 1][..values]);
                unsafe { (k.vertical_linear)(r0, r1, y.weight[dy], line) };
            }
            Method::AreaBlocks { kx: 2, ky: 2 } => {
                let first = 2 * dy;
                if reader.pairs(first) {
                    let [r0, r1] = reader.row_pair(first);
                    unsafe { (k.pair_sums)(r0, &mut scratch.pairs) };
                    unsafe { (k.pair_means)(r1, &scratch.pairs, line) };
                } else {
                    unsafe { (k.pair_sums)(reader.row(first), &mut scratch.pairs) };
                    unsafe { (k.pair_means)(reader.row(first + 1), &scratch.pairs, line) };
                }
            }
            Method::AreaBlocks { kx, ky } => {
                let rows = dy * ky..(dy + 1) * ky;
                let area = (kx * ky) as u32;
                match &mut scratch.sums {
                    ColumnSums::Narrow(sums) => unsafe {
                        block_sums(reader, rows, k.sum_rows.0, sums);
                        (k.blocks.0)(sums, *kx, area, line)
                    },
                    ColumnSums::Wide(sums) => unsafe {
                        block_sums(reader, rows, k.sum_rows.1, sums);
                        (k.blocks.1)(sums, *kx, area, line)
                    },
                }
            }
            Method::Area { x, y } => {
                for t in y.start[dy] as usize..y.start[dy + 1] as usize {
                    let first = t == y.start[dy] as usize;
                    unsafe { (k.weigh_rows)(reader.row(y.index[t] as usize), y.weight[t], &mut scratch.acc, first) };
                }
                unsafe { (k.area_horizontal)(&scratch.acc, x, line) };
            }
        }
    }
}

/// The column sums of source rows `rows` (a block's), by `sum_rows`: two
/// rows at a pass where they come together (read in place, or a 4:2:0 pair
/// that shares a chroma row, decoded together), other rows one at a time.
///
/// # Safety
/// `sum_rows` is a kernel of a level this CPU supports.
unsafe fn block_sums<S: ColumnSum>(
    reader: &mut RowReader<'_>,
    rows: std::ops::Range<usize>,
    sum_rows: SumRows<S>,
    sums: &mut [S],
) {
    let (first, end, in_place) = (rows.start, rows.end, reader.in_place());
    let mut s = first;
    // SAFETY (each call): the caller's; the kernel bounds its accesses by the slices.
    while s < end {
        if s + 2 <= end && in_place {
            unsafe { sum_rows([reader.peek(s), reader.peek(s + 1)], sums, s == first) };
            s += 2;
        } else if s + 2 <= end && reader.pairs(s) {
            unsafe { sum_rows(reader.row_pair(s), sums, s == first) };
            s += 2;
        } else {
            unsafe { sum_rows([reader.row(s), &[]], sums, s == first) };
            s += 1;
        }
    }
}

/// An integer shrink's column sums: 16-bit where a block's rows fit them
/// (`narrow_sums`), else 32-bit; chosen once a band, by the block's height.
enum ColumnSums {
    Narrow(Vec<u16>),
    Wide(Vec<u32>),
}

/// Per-band intermediate rows.
struct Scratch {
    /// Bilinear: two source rows resampled along x, by source row parity.
    ring: [Vec<i16>; 2],
    ring_rows: [Option<u32>; 2],
    /// Integer shrink: column sums of a band of source rows.
    sums: ColumnSums,
    /// The 2x2 shrink: a row's pixel pairs summed (`pair_sums`).
    pairs: Vec<u16>,
    /// Fractional shrink: weighted column sums.
    acc: Vec<f32>,
}

impl Scratch {
    fn new(method: &Method, region_values: usize, line_values: usize) -> Scratch {
        // Slack for the kernels that work 4 values wide (kernels/resample.rs).
        let (ring, sums, pairs, acc) = match method {
            Method::Linear { .. } => (line_values + 4, 0, 0, 0),
            Method::AreaBlocks { kx: 2, ky: 2 } => (0, 0, line_values, 0),
            Method::AreaBlocks { .. } => (0, region_values, 0, 0),
            Method::Area { .. } => (0, 0, 0, region_values + 4),
            Method::Nearest { .. } => (0, 0, 0, 0),
        };
        let narrow = matches!(method, Method::AreaBlocks { ky, .. } if narrow_sums(*ky));
        Scratch {
            ring: [vec![0; ring], vec![0; ring]],
            ring_rows: [None; 2],
            sums: if narrow { ColumnSums::Narrow(vec![0; sums]) } else { ColumnSums::Wide(vec![0; sums]) },
            pairs: vec![0; pairs],
            acc: vec![0.0; acc],
        }
    }
}

/// The method and row loops a resize runs, for diagnostics: e.g. "avx2/area".
pub(crate) fn describe(
    interpolation: Interpolation,
    transform: &Transform,
    level: SimdLevel,
    channels: usize,
) -> String {
    let method = match Method::new(interpolation, transform.source.size(), transform.content.size()) {
        Method::Nearest { .. } if transform.source.size() == transform.content.size() => "copy",
        Method::Nearest { .. } => "nearest",
        Method::Linear { .. } => "bilinear",
        Method::AreaBlocks { .. } => "area-blocks",
        Method::Area { .. } => "area",
    };
    format!("{}/{method}", row_kernels(level, channels).1)
}

/// Whether `transform` reads the whole source into the whole destination at the same size.
pub(crate) fn is_plain(transform: &Transform, src: (usize, usize), dst: (usize, usize)) -> bool {
    let whole = |r: Rect, size: (usize, usize)| r == Rect::new(0, 0, size.0, size.1);
    src == dst && whole(transform.source, src) && whole(transform.content, dst) && whole(transform.dst_rect, dst)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::colour::{yuv_to_rgb, Colour};
    use super::super::convert::{convert, Options};
    use super::super::format::Format;
    use super::*;

    /// Content pixel (dx, dy), source channel c, straight from the tables: the
    /// documented arithmetic one value at a time (no rows, ring, bands or
    /// gathered NV12 groups). `px(x, y, c)`: a region pixel's value.
    fn naive(method: &Method, px: &dyn Fn(usize, usize, usize) -> u8, dx: usize, dy: usize, c: usize) -> u8 {
        match method {
            Method::Nearest { x, y } => px(x[dx] as usize, y[dy] as usize, c),
            Method::Linear { x, y } => {
                let [x0, x1] = x.index[dx].map(|i| i as usize);
                let [w0, w1] = x.weight[dx].map(|w| w as i32);
                let h = |sy: u32| px(x0, sy as usize, c) as i32 * w0 + px(x1, sy as usize, c) as i32 * w1;
                let [r0, r1] = y.index[dy];
                let [b0, b1] = y.weight[dy].map(|w| w as i32);
                let t = (((h(r0) >> 4) * b0) >> 16) + (((h(r1) >> 4) * b1) >> 16); // OpenCV's y pass
                ((t + 2) >> 2).clamp(0, 255) as u8
            }
            Method::AreaBlocks { kx, ky } => {
                let sum: u32 = (0..*ky)
                    .flat_map(|j| (0..*kx).map(move |i| (i, j)))
                    .map(|(i, j)| px(dx * kx + i, dy * ky + j, c) as u32)
                    .sum();
                let area = (kx * ky) as u32;
                if area == 4 {
                    ((sum + 2) >> 2) as u8
                } else {
                    (sum as f32 * (1.0 / area as f32)).round_ties_even().min(255.0) as u8
                }
            }
            Method::Area { x, y } => {
                let column = |sx: usize| {
                    let mut acc = 0f32;
                    for t in y.start[dy] as usize..y.start[dy + 1] as usize {
                        let v = y.weight[t] * px(sx, y.index[t] as usize, c) as f32;
                        acc = if t == y.start[dy] as usize { v } else { acc + v };
                    }
                    acc
                };
                let mut sum = 0f32;
                for t in x.start[dx] as usize..x.start[dx + 1] as usize {
                    sum += x.weight[t] * column(x.index[t] as usize);
                }
                sum.round_ties_even().clamp(0.0, 255.0) as u8
            }
        }
    }

    fn nv12_pixel(y: u8, u: u8, v: u8) -> [u8; 3] {
        yuv_to_rgb(&Colour::default().coefficients(), y, u, v)
    }

    fn rect_in(fraction: [f64; 4], width: usize, height: usize, align: usize) -> Rect {
        let x = (fraction[0] * (width - 1) as f64) as usize / align * align;
        let y = (fraction[1] * (height - 1) as f64) as usize / align * align;
        let w = ((fraction[2] * (width - x) as f64) as usize / align * align).max(align);
        let h = ((fraction[3] * (height - y) as f64) as usize / align * align).max(align);
        Rect::new(x, y, w, h)
    }

    /// One case of `resize_matches_the_naive_reference`: an RGB destination
    /// holds the naive per-pixel values, the fill, and untouched bytes
    /// outside the rectangle, at every SIMD level.
    #[allow(clippy::too_many_arguments)]
    fn check_resize(
        format: Format,
        size: (usize, usize),
        dst_size: (usize, usize),
        roi: Option<[f64; 4]>,
        dst_rect: Option<[f64; 4]>,
        interpolation: Interpolation,
        fit: Fit,
        fill: [u8; 3],
        extra: usize,
        seed: u64,
    ) -> std::result::Result<(), TestCaseError> {
        let yuv = matches!(format, Format::Nv12 | Format::Nv21 | Format::I420);
        let align = if yuv { 2 } else { 1 };
        let (w, h) = ((size.0 / align * align).max(align), (size.1 / align * align).max(align));
        let fill = if format == Format::Gray { [fill[0]; 3] } else { fill };
        let channels = if yuv { 1 } else { format.channels() };
        // I420's U and V rows are half a pitch apart, so its pitch is even.
        let pitch = if format == Format::I420 { w + extra / 2 * 2 } else { w * channels + extra };
        let rows = if yuv { h * 3 / 2 } else { h };
        let mut state = seed | 1;
        let data: Vec<u8> = (0..pitch * rows)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let resize = Resize {
            roi: roi.map(|f| rect_in(f, w, h, align)),
            dst_rect: dst_rect.map(|f| rect_in(f, dst_size.0, dst_size.1, 1)),
            interpolation,
            fit,
            fill,
        };
        let t = place(format, (w, h), dst_size, &resize).unwrap();
        let method = Method::new(interpolation, t.source.size(), t.content.size());
        let order: [usize; 3] = match format {
            Format::Bgr | Format::Bgra => [2, 1, 0],
            Format::Gray => [0, 0, 0],
            _ => [0, 1, 2],
        };
        let px = |x: usize, y: usize, c: usize| -> u8 {
            let (x, y) = (t.source.x + x, t.source.y + y);
            match format {
                Format::Nv12 | Format::Nv21 => {
                    let uv = (h + y / 2) * pitch + x / 2 * 2;
                    let (u, v) =
                        if format == Format::Nv12 { (data[uv], data[uv + 1]) } else { (data[uv + 1], data[uv]) };
                    nv12_pixel(data[y * pitch + x], u, v)[c]
                }
                Format::I420 => {
                    let u = h * pitch + y / 2 * (pitch / 2) + x / 2;
                    nv12_pixel(data[y * pitch + x], data[u], data[u + h / 2 * (pitch / 2)])[c]
                }
                _ => data[y * pitch + x * channels + order[c]],
            }
        };
        let dst_pitch = dst_size.0 * 3 + extra;
        for level in SimdLevel::available() {
            let mut out = vec![0xA5u8; dst_pitch * dst_size.1];
            let source = Source::new(format, &data, w, h, Some(pitch)).unwrap();
            let dst = Destination::new(Format::Rgb, &mut out, dst_size.0, dst_size.1, Some(dst_pitch)).unwrap();
            let options =
                Options { simd: Some(level), threads: Some(1 + (seed % 3) as usize), resize, ..Options::default() };
            prop_assert_eq!(convert(&source, dst, &options).unwrap(), t);
            let (r, c) = (t.dst_rect, t.content);
            for y in 0..dst_size.1 {
                for x in 0..dst_size.0 {
                    let got = &out[y * dst_pitch + x * 3..][..3];
                    let inside = |q: Rect| (q.x..q.x + q.width).contains(&x) && (q.y..q.y + q.height).contains(&y);
                    let want: [u8; 3] = if inside(c) {
                        [0, 1, 2].map(|k| naive(&method, &px, x - c.x, y - c.y, k))
                    } else if inside(r) {
                        fill
                    } else {
                        [0xA5; 3]
                    };
                    prop_assert_eq!(
                        got,
                        &want[..],
                        "{} {:?} {:?} at ({}, {}), {:?}",
                        level,
                        interpolation,
                        fit,
                        x,
                        y,
                        t
                    );
                }
            }
        }
        Ok(())
    }

    /// Near-white blocks of 257, 258 and 300 rows, whose column sums reach
    /// and pass 65535 (16-bit sums would wrap past it, `narrow_sums`): the
    /// naive means at every level.
    #[test]
    fn bright_tall_blocks_keep_their_means() {
        for ky in [257usize, 258, 300] {
            let (w, h, dst) = (12usize, 2 * ky, (4usize, 2usize));
            let data: Vec<u8> = (0..w * h * 4).map(|i| 255 - (i % 7 == 0) as u8 * (i % 3) as u8).collect();
            let t = place(Format::Bgra, (w, h), dst, &Resize::default()).unwrap();
            let method = Method::new(Interpolation::Area, t.source.size(), t.content.size());
            assert!(matches!(method, Method::AreaBlocks { kx: 3, .. }), "{method:?}");
            let px = |x: usize, y: usize, c: usize| data[(y * w + x) * 4 + [2, 1, 0][c]];
            let want: Vec<u8> = (0..dst.1)
                .flat_map(|y| (0..dst.0).flat_map(move |x| [0, 1, 2].map(|c| (x, y, c))))
                .map(|(x, y, c)| naive(&method, &px, x, y, c))
                .collect();
            for level in SimdLevel::available() {
                let mut out = vec![0u8; dst.0 * dst.1 * 3];
                let source = Source::new(Format::Bgra, &data, w, h, None).unwrap();
                let destination = Destination::new(Format::Rgb, &mut out, dst.0, dst.1, None).unwrap();
                let resize = Resize { interpolation: Interpolation::Area, ..Resize::default() };
                let options = Options { simd: Some(level), threads: Some(1), resize, ..Options::default() };
                convert(&source, destination, &options).unwrap();
                assert_eq!(out, want, "{level} {ky} rows");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Every source format, fit and interpolation, a ROI and a destination
        /// rectangle anywhere, padded rows on both sides, every SIMD level:
        /// an RGB destination holds the naive per-pixel values, the fill, and
        /// untouched bytes outside the rectangle.
        #[test]
        fn resize_matches_the_naive_reference(
            format in prop::sample::select(vec![Format::Bgr, Format::Rgb, Format::Bgra, Format::Rgba, Format::Gray, Format::Nv12, Format::Nv21, Format::I420]),
            size in (1usize..48, 1usize..40),
            dst_size in (1usize..40, 1usize..40),
            roi in prop::option::of(prop::array::uniform4(0.0f64..1.0)),
            dst_rect in prop::option::of(prop::array::uniform4(0.0f64..1.0)),
            interpolation in prop::sample::select(vec![Interpolation::Bilinear, Interpolation::Area, Interpolation::Nearest]),
            fit in prop::sample::select(vec![Fit::Stretch, Fit::Letterbox, Fit::Crop]),
            fill in prop::array::uniform3(any::<u8>()),
            extra in 0usize..9,
            seed in any::<u64>(),
        ) {
            check_resize(format, size, dst_size, roi, dst_rect, interpolation, fit, fill, extra, seed)?;
        }

        /// Integer shrinks (area's block means; bilinear's halving is the
        /// 2x2 mean too), which have row loops of their own: every width's
        /// tail, every source format.
        #[test]
        fn integer_shrinks_match_the_naive_reference(
            format in prop::sample::select(vec![Format::Bgr, Format::Bgra, Format::Gray, Format::Nv12, Format::I420]),
            dst_size in (1usize..80, 1usize..12),
            factor in (1usize..6, 1usize..6),
            interpolation in prop::sample::select(vec![Interpolation::Bilinear, Interpolation::Area]),
            extra in 0usize..9,
            seed in any::<u64>(),
        ) {
            let size = (factor.0 * dst_size.0, factor.1 * dst_size.1);
            check_resize(format, size, dst_size, None, None, interpolation, Fit::Stretch, [0; 3], extra, seed)?;
        }

        /// Integer shrinks of blocks 256-261 rows tall, on both sides of the
        /// 16-bit sums' bound (`narrow_sums`): either width's sums and means.
        #[test]
        fn tall_integer_shrinks_match_the_naive_reference(
            format in prop::sample::select(vec![Format::Bgr, Format::Bgra, Format::Gray, Format::Nv12]),
            dst_size in (1usize..24, 1usize..3),
            factor in (1usize..5, 256usize..262),
            extra in 0usize..9,
            seed in any::<u64>(),
        ) {
            let size = (factor.0 * dst_size.0, factor.1 * dst_size.1);
            check_resize(format, size, dst_size, None, None, Interpolation::Area, Fit::Stretch, [0; 3], extra, seed)?;
        }

        /// Bilinear rows wide enough for the x pass's long steps (eight
        /// pixels a step from a 128-byte window with VBMI, four from 16- and
        /// 32-byte windows at AVX2) and their ends: enlargements by up to 5
        /// and shrinks by up to 7 along x, past where the windows end.
        #[test]
        fn wide_bilinear_rows_match_the_naive_reference(
            format in prop::sample::select(vec![Format::Bgra, Format::Rgba, Format::Bgr, Format::Nv12, Format::I420]),
            width in 8usize..400,
            dst_width in 8usize..240,
            heights in (1usize..6, 1usize..6),
            extra in 0usize..9,
            seed in any::<u64>(),
        ) {
            let size = (width.max(dst_width / 5 + 1).min(7 * dst_width), heights.0);
            let (dst_size, bilinear) = ((dst_width, heights.1), Interpolation::Bilinear);
            check_resize(format, size, dst_size, None, None, bilinear, Fit::Stretch, [0; 3], extra, seed)?;
        }
    }
}
