//! Source rows of a resize's region as u8 pixels, one method per kind of
//! source: packed rows read in place, packed 4:2:2 rows decoded as they are,
//! 8-bit 4:2:0 decoded by the 2-pixel groups a strong shrink reads, and the
//! other YUV sources rearranged as NV12's planes, then decoded.

use super::super::frame::{Rows, SourcePixels};
use super::super::kernels::resample::Chroma;
use super::super::plan::{Nv12Plan, Rearrange, Yuv422Row};
use super::Rect;

/// Source rows of the region as u8 pixels: borrowed from the frame, or
/// decoded into a row of scratch (the last one kept: neighbouring
/// destination rows often read the same source row).
pub(super) struct RowReader<'a> {
    pub(super) pixels: SourcePixels<'a>,
    pub(super) region: Rect,
    pub(super) channels: usize,
    pub(super) decode: Option<Nv12Plan>,
    /// Decode only these 2-pixel groups (see `compact_columns`), gathered first.
    pub(super) groups: Option<Groups<'a>>,
    pub(super) gather_groups: unsafe fn(&[u8], &[u32], &mut [u8]),
    /// The 4-byte groups of packed 4:2:2 rows (the x pass's `gather` of 4-byte pixels).
    pub(super) gather_quads: unsafe fn(&[u8], &[u32], &mut [u8]),
    /// Gathered groups: Y and U,V bytes (4 bytes a group of packed 4:2:2 in the first).
    pub(super) gathered: [Vec<u8>; 2],
    /// `row_pair`: the second row's gathered Y groups (where groups are
    /// decoded), and its decoded pixels.
    pub(super) second: [Vec<u8>; 2],
    /// YUYV/UYVY and I420: the region's Y and U,V bytes rearranged as NV12's.
    pub(super) rearrange: Option<Rearrange>,
    pub(super) split: [Vec<u8>; 2],
    pub(super) scratch: Vec<u8>,
    pub(super) cached: Option<usize>,
}

impl<'a> RowReader<'a> {
    /// Whether the rows are read in place (packed sources), so that `peek` gives them, several at a time.
    pub(super) fn in_place(&self) -> bool {
        matches!(self.pixels, SourcePixels::Packed { .. })
    }

    /// Row `r` of the region (0: its top row), only the region's columns.
    /// Source row `r` of a packed frame, read in place, or nothing for YUV
    /// sources (whose rows are decoded): what the x pass may prefetch.
    pub(super) fn peek(&self, r: usize) -> &'a [u8] {
        let Rect { x, y, width, .. } = self.region;
        match self.pixels {
            SourcePixels::Packed { rows, .. } => &rows.row(y + r)[x * self.channels..(x + width) * self.channels],
            _ => &[],
        }
    }

    /// The Y rows `rows` of an 8-bit 4:2:0 source and their chroma rows (the
    /// region's columns; each row once), as byte rows: what the fused x pass
    /// prefetches for the next output row.
    pub(super) fn plane_rows(&self, rows: [u32; 2]) -> [&'a [u8]; 6] {
        let mut out = [&[][..]; 6];
        for (k, &r) in rows.iter().enumerate() {
            if k == 1 && r == rows[0] {
                break;
            }
            let (luma, chroma) = self.planes(r as usize);
            out[k] = luma;
            if k == 1 && (self.region.y + r as usize) / 2 == (self.region.y + rows[0] as usize) / 2 {
                break; // the same chroma row
            }
            match chroma {
                Chroma::Interleaved(uv) => out[2 + 2 * k] = uv,
                Chroma::Planar(u, v) => (out[2 + 2 * k], out[3 + 2 * k]) = (u, v),
            }
        }
        out
    }

    /// What the x pass prefetches of source row `r`: a packed row, or an
    /// 8-bit 4:2:0 row's Y bytes (most of what decoding it reads).
    pub(super) fn ahead(&self, r: usize) -> &'a [u8] {
        match self.pixels {
            SourcePixels::Nv12 { .. } | SourcePixels::I420 { .. } => self.planes(r).0,
            _ => self.peek(r),
        }
    }

    /// Row `r`'s Y bytes and its chroma row (the region's columns), of an
    /// 8-bit 4:2:0 source, read in place.
    pub(super) fn planes(&self, r: usize) -> (&'a [u8], Chroma<'a>) {
        let Rect { x, y, width, .. } = self.region;
        let row = y + r;
        // The region starts and ends on even columns (see geometry::subsampling).
        match self.pixels {
            SourcePixels::Nv12 { y: luma, uv, .. } => {
                (&luma.row(row)[x..x + width], Chroma::Interleaved(&uv.row(row / 2)[x..x + width]))
            }
            SourcePixels::I420 { y: luma, u, v } => (
                &luma.row(row)[x..x + width],
                Chroma::Planar(&u.row(row / 2)[x / 2..(x + width) / 2], &v.row(row / 2)[x / 2..(x + width) / 2]),
            ),
            _ => unreachable!("planes of an 8-bit 4:2:0 source"),
        }
    }

    /// Whether rows `r` and `r + 1` can be read by `row_pair`: they share a
    /// chroma row, and the reader has room for the second.
    pub(super) fn pairs(&self, r: usize) -> bool {
        let shared_chroma = (self.region.y + r).is_multiple_of(2);
        shared_chroma && !self.second[1].is_empty()
    }

    /// Rows `r` and `r + 1` of an 8-bit 4:2:0 source (where `pairs`),
    /// decoded together: the chroma terms once for both. By groups where
    /// only some are decoded (the chroma row's gathered once), else whole
    /// rows from the planes.
    pub(super) fn row_pair(&mut self, r: usize) -> [&[u8]; 2] {
        let decode = self.decode.expect("a row decoder for a YUV source");
        let ((luma, chroma), (next, _)) = (self.planes(r), self.planes(r + 1));
        let Some(groups) = self.groups else {
            // SAFETY: the decoder was picked for a level this CPU supports.
            unsafe { (decode.pair)([luma, next], chroma, [&mut self.scratch, &mut self.second[1]], &decode.out) };
            self.cached = Some(r);
            return [&self.scratch, &self.second[1]];
        };
        let [gy, guv] = &mut self.gathered;
        let [gy2, second] = &mut self.second;
        groups.pairs(luma, gy);
        groups.pairs(next, gy2);
        groups.chroma(chroma, guv);
        // SAFETY: the decoder was picked for a level this CPU supports.
        unsafe { (decode.pair)([gy, gy2], Chroma::Interleaved(guv), [&mut self.scratch, second], &decode.out) };
        self.cached = Some(r);
        [&self.scratch, &self.second[1]]
    }

    /// Row `r` of the region as u8 pixels: a packed source's in place, a
    /// YUV source's decoded (the last row decoded kept).
    pub(super) fn row(&mut self, r: usize) -> &[u8] {
        if let SourcePixels::Packed { .. } = self.pixels {
            return self.peek(r);
        }
        if self.cached != Some(r) {
            let decode = self.decode.expect("a row decoder for a YUV source");
            match (self.pixels, decode.packed, self.groups) {
                (SourcePixels::Yuv422 { rows, .. }, Some(packed), _) => self.decode_422(rows, packed, &decode, r),
                (SourcePixels::Nv12 { .. } | SourcePixels::I420 { .. }, _, Some(groups)) => {
                    self.decode_420_groups(groups, &decode, r)
                }
                _ => self.decode_rearranged(&decode, r),
            }
            self.cached = Some(r);
        }
        &self.scratch
    }

    /// Packed 4:2:2 rows decoded as they are (no split); a group is 4 bytes there.
    fn decode_422(&mut self, rows: Rows<'a>, packed: Yuv422Row, decode: &Nv12Plan, r: usize) {
        let Rect { x, y, width, .. } = self.region;
        let mut row = &rows.row(y + r)[2 * x..2 * (x + width)];
        if let Some(groups) = self.groups {
            // SAFETY: the kernels were picked for a level this CPU supports.
            unsafe { (self.gather_quads)(row, groups.list, &mut self.gathered[0]) };
            row = &self.gathered[0];
        }
        // SAFETY: as above.
        unsafe { packed(row, &mut self.scratch, &decode.out) };
    }

    /// 8-bit 4:2:0 decoded by groups: the groups straight from the planes
    /// (I420's not interleaved first).
    fn decode_420_groups(&mut self, groups: Groups<'a>, decode: &Nv12Plan, r: usize) {
        let (luma, chroma) = self.planes(r);
        let [gy, guv] = &mut self.gathered;
        groups.pairs(luma, gy);
        groups.chroma(chroma, guv);
        // SAFETY: the decoder was picked for a level this CPU supports.
        unsafe { (decode.decode)(gy, guv, &mut self.scratch, &decode.out) };
    }

    /// The other YUV sources: NV12's Y and U,V rows (the camera formats'
    /// and the planar ones' rearranged first), the groups gathered where
    /// only some are decoded, decoded into R, G, B, pad.
    fn decode_rearranged(&mut self, decode: &Nv12Plan, r: usize) {
        let Rect { x, y, width, .. } = self.region;
        let row = y + r;
        let [split_y, split_uv] = &mut self.split;
        let (mut luma, mut chroma): (&[u8], &[u8]) = match (self.pixels, self.rearrange) {
            (SourcePixels::Nv12 { y: luma, uv, .. }, _) => {
                (&luma.row(row)[x..x + width], &uv.row(row / 2)[x..x + width])
            }
            (SourcePixels::Yuv422 { rows, y_even }, Some(Rearrange::Split(split))) => {
                let (even, odd) =
                    if y_even { (&mut *split_y, &mut *split_uv) } else { (&mut *split_uv, &mut *split_y) };
                // SAFETY: the splitter was picked for a level this CPU supports.
                unsafe { split(&rows.row(row)[2 * x..2 * (x + width)], even, odd) };
                (&split_y[..], &split_uv[..])
            }
            (SourcePixels::I420 { y: luma, u, v }, Some(Rearrange::Interleave(interleave))) => {
                // The region starts and ends on even columns (see geometry::subsampling).
                let (u, v) = (&u.row(row / 2)[x / 2..(x + width) / 2], &v.row(row / 2)[x / 2..(x + width) / 2]);
                // SAFETY: the interleaver was picked for a level this CPU supports.
                unsafe { interleave(u, v, split_uv) };
                (&luma.row(row)[x..x + width], &split_uv[..])
            }
            // 10-bit: two bytes a sample.
            (SourcePixels::P010 { y: luma, uv }, _) => {
                (&luma.row(row)[2 * x..2 * (x + width)], &uv.row(row / 2)[2 * x..2 * (x + width)])
            }
            (SourcePixels::I010 { y: luma, u, v }, Some(Rearrange::Interleave(interleave))) => {
                let (u, v) = (&u.row(row / 2)[x..x + width], &v.row(row / 2)[x..x + width]);
                // SAFETY: the interleaver was picked for a level this CPU supports.
                unsafe { interleave(u, v, split_uv) };
                (&luma.row(row)[2 * x..2 * (x + width)], &split_uv[..2 * width])
            }
            _ => unreachable!("a YUV source with its rearrangement"),
        };
        if let Some(groups) = self.groups {
            let [gy, guv] = &mut self.gathered;
            // SAFETY: the kernels were picked for a level this CPU supports.
            unsafe {
                (self.gather_groups)(luma, groups.list, gy);
                (self.gather_groups)(chroma, groups.list, guv);
            }
            (luma, chroma) = (gy, guv);
        }
        // SAFETY: the decoder was picked for a level this CPU supports.
        unsafe { (decode.decode)(luma, chroma, &mut self.scratch, &decode.out) };
    }
}

/// The 2-pixel groups a strong shrink decodes (see `compact_columns`), and
/// the largest of them, which bounds every read of their gathers.
///
/// A strong shrink's gathers are many independent 2-byte copies whose time
/// goes on instructions more than on waiting for memory (a frame that fits
/// in L2 gathers hardly faster), so a bounds check per copy showed: these
/// loops check once a row, against `last`, one row at a time. Prefetching
/// the rows ahead, reading them through first, and interleaving the Y and
/// chroma rows' copies were each slower.
#[derive(Clone, Copy)]
pub(super) struct Groups<'a> {
    list: &'a [u32],
    last: usize,
}

impl<'a> Groups<'a> {
    pub(super) fn new(list: &'a [u32]) -> Groups<'a> {
        Groups { list, last: list.iter().copied().max().unwrap_or(0) as usize }
    }

    /// The 2-byte pairs `2g, 2g + 1` of `row` for each group g, side by side into `out`.
    fn pairs(&self, row: &[u8], out: &mut [u8]) {
        let (list, last) = (self.list, self.last);
        assert!(list.is_empty() || (2 * last + 2 <= row.len() && out.len() >= 2 * list.len()));
        let out = out.as_mut_ptr();
        for (k, &g) in list.iter().enumerate() {
            // SAFETY: g <= last, so bytes 2g, 2g + 1 lie in `row`, and
            // k < list.len(), so bytes 2k, 2k + 1 in `out` (checked above).
            unsafe { out.add(2 * k).cast::<[u8; 2]>().write(row.as_ptr().add(2 * g as usize).cast::<[u8; 2]>().read()) }
        }
    }

    /// The groups' chroma pairs: NV12's, or I420's U and V bytes side by side (as NV12's).
    fn chroma(&self, chroma: Chroma<'_>, uv: &mut [u8]) {
        let (list, last) = (self.list, self.last);
        match chroma {
            Chroma::Interleaved(c) => self.pairs(c, uv),
            Chroma::Planar(u, v) => {
                assert!(list.is_empty() || (last < u.len() && last < v.len() && uv.len() >= 2 * list.len()));
                for (k, &g) in list.iter().enumerate() {
                    let g = g as usize;
                    // SAFETY: g <= last < the planes' lengths, and 2k + 1 < uv.len() (checked above).
                    unsafe {
                        uv.as_mut_ptr().add(2 * k).cast::<[u8; 2]>().write([*u.as_ptr().add(g), *v.as_ptr().add(g)])
                    }
                }
            }
        }
    }
}
