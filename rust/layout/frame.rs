//! Borrowed frames: rows of bytes at a pitch, read-only for sources and
//! writable for destinations. The engine writes only the bytes of each row,
//! never the padding between rows, and never allocates a destination.

use std::marker::PhantomData;

use super::error::{bail, Result};
use super::format::{frame_geometry, Format, FrameGeometry};

/// `count` rows of `row_bytes` bytes, each `pitch` bytes after the previous.
#[derive(Clone, Copy, Debug)]
pub struct Rows<'a> {
    ptr: *const u8,
    count: usize,
    row_bytes: usize,
    pitch: usize,
    _borrow: PhantomData<&'a [u8]>,
}

// SAFETY: a `Rows` is a shared borrow of bytes (like `&[u8]`), which may be
// sent to and shared between threads.
unsafe impl Send for Rows<'_> {}
// SAFETY: as above: it only ever hands out `&[u8]`.
unsafe impl Sync for Rows<'_> {}

/// Bytes from the first row's start to the last row's end.
fn extent(count: usize, row_bytes: usize, pitch: usize) -> Option<usize> {
    match count {
        0 => Some(0),
        n => (n - 1).checked_mul(pitch)?.checked_add(row_bytes),
    }
}

impl<'a> Rows<'a> {
    /// Rows inside `data`; fails if the last row would end past `data`.
    pub fn new(data: &'a [u8], count: usize, row_bytes: usize, pitch: usize) -> Result<Self> {
        match extent(count, row_bytes, pitch) {
            Some(needed) if needed <= data.len() => {}
            _ => bail!(
                "the source holds {} bytes, too few for {count} rows of {row_bytes} bytes \
                 {pitch} bytes apart; check the frame size and the stride",
                data.len()
            ),
        }
        // SAFETY: every row lies inside `data` (checked above), borrowed for 'a.
        Ok(unsafe { Self::from_raw_parts(data.as_ptr(), count, row_bytes, pitch) })
    }

    /// # Safety
    /// For each `i < count`, the `row_bytes` bytes at `ptr + i * pitch` must be
    /// readable and not written by anyone for the lifetime `'a`.
    pub unsafe fn from_raw_parts(ptr: *const u8, count: usize, row_bytes: usize, pitch: usize) -> Self {
        Rows { ptr, count, row_bytes, pitch, _borrow: PhantomData }
    }

    pub fn count(&self) -> usize {
        self.count
    }

    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    pub fn row(&self, i: usize) -> &'a [u8] {
        assert!(i < self.count, "row {i} of {}", self.count);
        // SAFETY: row `i` is inside the borrowed region (constructor contract).
        unsafe { std::slice::from_raw_parts(self.ptr.add(i * self.pitch), self.row_bytes) }
    }

    /// Rows `start..start + count`.
    pub fn sub(&self, start: usize, count: usize) -> Rows<'a> {
        assert!(start + count <= self.count, "rows {start}..{} of {}", start + count, self.count);
        // SAFETY: a subset of the rows of `self`, borrowed for the same 'a.
        unsafe { Rows::from_raw_parts(self.ptr.wrapping_add(start * self.pitch), count, self.row_bytes, self.pitch) }
    }
}

/// Writable rows: like [`Rows`], and no two rows overlap.
#[derive(Debug)]
pub struct RowsMut<'a> {
    ptr: *mut u8,
    count: usize,
    row_bytes: usize,
    pitch: usize,
    _borrow: PhantomData<&'a mut [u8]>,
}

// SAFETY: a `RowsMut` is an exclusive borrow of disjoint byte ranges (like
// `&mut [u8]`); moving it to another thread moves the exclusive access.
unsafe impl Send for RowsMut<'_> {}
// SAFETY: a shared `&RowsMut` hands out nothing writable.
unsafe impl Sync for RowsMut<'_> {}

impl<'a> RowsMut<'a> {
    /// Rows inside `data`; the pitch must keep rows apart.
    pub fn new(data: &'a mut [u8], count: usize, row_bytes: usize, pitch: usize) -> Result<Self> {
        if count > 1 && pitch < row_bytes {
            bail!("a pitch of {pitch} bytes makes rows of {row_bytes} bytes overlap");
        }
        match extent(count, row_bytes, pitch) {
            Some(needed) if needed <= data.len() => {}
            _ => bail!(
                "the destination holds {} bytes, too few for {count} rows of {row_bytes} bytes \
                 {pitch} bytes apart; check the frame size and the stride",
                data.len()
            ),
        }
        // SAFETY: rows lie inside `data` and do not overlap (checked above);
        // `data` is borrowed exclusively for 'a.
        Ok(unsafe { Self::from_raw_parts(data.as_mut_ptr(), count, row_bytes, pitch) })
    }

    /// # Safety
    /// For each `i < count`, the `row_bytes` bytes at `ptr + i * pitch` must be
    /// writable, not overlap another row, and not be accessed by anyone else
    /// for the lifetime `'a`.
    pub unsafe fn from_raw_parts(ptr: *mut u8, count: usize, row_bytes: usize, pitch: usize) -> Self {
        RowsMut { ptr, count, row_bytes, pitch, _borrow: PhantomData }
    }

    pub fn count(&self) -> usize {
        self.count
    }

    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    pub fn row_mut(&mut self, i: usize) -> &mut [u8] {
        assert!(i < self.count, "row {i} of {}", self.count);
        // SAFETY: row `i` is inside the region, disjoint from other rows, and
        // `&mut self` makes this the only live borrow of it.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(i * self.pitch), self.row_bytes) }
    }

    /// Rows `i` and `i + 1`, both writable at once (rows never overlap).
    pub fn row_pair_mut(&mut self, i: usize) -> [&mut [u8]; 2] {
        assert!(i + 1 < self.count, "rows {i} and {} of {}", i + 1, self.count);
        // SAFETY: both rows are inside the region and disjoint from each
        // other (and from every other row); `&mut self` makes these the only
        // live borrows of them.
        unsafe {
            [
                std::slice::from_raw_parts_mut(self.ptr.add(i * self.pitch), self.row_bytes),
                std::slice::from_raw_parts_mut(self.ptr.add((i + 1) * self.pitch), self.row_bytes),
            ]
        }
    }

    /// Splits into rows `..mid` and `mid..`: disjoint, so both may be written at once.
    pub fn split_at(self, mid: usize) -> (RowsMut<'a>, RowsMut<'a>) {
        assert!(mid <= self.count, "split at {mid} of {}", self.count);
        // SAFETY: the two halves are disjoint sets of rows of `self`, which is consumed.
        unsafe {
            (
                RowsMut::from_raw_parts(self.ptr, mid, self.row_bytes, self.pitch),
                RowsMut::from_raw_parts(
                    self.ptr.wrapping_add(mid * self.pitch),
                    self.count - mid,
                    self.row_bytes,
                    self.pitch,
                ),
            )
        }
    }
}

/// A frame to read.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    pub width: usize,
    pub height: usize,
    pub pixels: SourcePixels<'a>,
}

#[derive(Clone, Copy, Debug)]
pub enum SourcePixels<'a> {
    /// BGR, RGB, BGRA, RGBA, BGRx, RGBx or GRAY: one row per image row.
    Packed { format: Format, rows: Rows<'a> },
    /// NV12 (NV21 with `vu`) planes: `y` has `height` rows of `width`
    /// bytes, `uv` has `height / 2` rows of `width` bytes (U, V interleaved;
    /// V, U for NV21).
    Nv12 { y: Rows<'a>, uv: Rows<'a>, vu: bool },
    /// Packed 4:2:2 rows of `2 * width` bytes: Y in the even bytes and U, V
    /// in the odd ones (YUYV, `y_even`), or the other way round (UYVY).
    Yuv422 { rows: Rows<'a>, y_even: bool },
    /// I420 planes: `y` has `height` rows of `width` bytes, `u` and `v`
    /// `height / 2` rows of `width / 2` bytes.
    I420 { y: Rows<'a>, u: Rows<'a>, v: Rows<'a> },
    /// P010 planes: as NV12's, of little-endian u16 samples (rows of
    /// `2 * width` bytes), each value in the top 10 bits.
    P010 { y: Rows<'a>, uv: Rows<'a> },
    /// I010 planes: as I420's, of little-endian u16 samples (rows of
    /// `2 * width` and `width` bytes), each value in the low 10 bits.
    I010 { y: Rows<'a>, u: Rows<'a>, v: Rows<'a> },
}

impl<'a> Source<'a> {
    /// A frame in one buffer (NV12: Y rows, then UV rows, all at one pitch).
    pub fn new(format: Format, data: &'a [u8], width: usize, height: usize, pitch: Option<usize>) -> Result<Self> {
        if !format.is_source() {
            bail!("{format} is not a source format: convert reads {}", names(Format::sources()));
        }
        let g = frame_geometry(format, width, height, pitch)?;
        if format == Format::I420 && g.pitch != g.row_bytes {
            return Self::i420_pitched(data, width, height, g.pitch);
        }
        if format == Format::I010 {
            return Self::i010_pitched(data, width, height, g.pitch);
        }
        let rows = Rows::new(data, g.rows, g.row_bytes, g.pitch)?;
        Self::from_rows(format, width, height, rows, None)
    }

    /// One-buffer I420 with padded rows, as V4L2 lays out YU12: Y rows
    /// `pitch` bytes apart, then U and V rows `pitch / 2` apart.
    fn i420_pitched(data: &'a [u8], width: usize, height: usize, pitch: usize) -> Result<Self> {
        if !pitch.is_multiple_of(2) {
            bail!(
                "an I420 stride of {pitch} bytes is odd: its U and V rows are half a stride apart, so it must be even"
            );
        }
        let (h, c) = (height, pitch / 2);
        let y = Rows::new(data, h, width, pitch)?;
        let u = Rows::new(data.get(h * pitch..).unwrap_or(&[]), h / 2, width / 2, c)?;
        let v = Rows::new(data.get(h * pitch + h / 2 * c..).unwrap_or(&[]), h / 2, width / 2, c)?;
        Self::i420(width, height, y, u, v)
    }

    /// One-buffer I010: Y rows `pitch` bytes apart, then U and V rows `pitch / 2` apart.
    fn i010_pitched(data: &'a [u8], width: usize, height: usize, pitch: usize) -> Result<Self> {
        if !pitch.is_multiple_of(4) {
            bail!(
                "an I010 stride of {pitch} bytes is not a multiple of 4: its U and V rows of u16 samples are \
                 half a stride apart, so half the stride must be even"
            );
        }
        let (h, c) = (height, pitch / 2);
        let y = Rows::new(data, h, 2 * width, pitch)?;
        let u = Rows::new(data.get(h * pitch..).unwrap_or(&[]), h / 2, width, c)?;
        let v = Rows::new(data.get(h * pitch + h / 2 * c..).unwrap_or(&[]), h / 2, width, c)?;
        Self::i010(width, height, y, u, v)
    }

    /// I010 from three planes of little-endian u16 samples, each with its own
    /// pitch (FFmpeg's `yuv420p10le` frames).
    pub fn i010(width: usize, height: usize, y: Rows<'a>, u: Rows<'a>, v: Rows<'a>) -> Result<Self> {
        frame_geometry(Format::I010, width, height, None)?;
        expect_samples(&y, height, 2 * width, "I010 Y plane")?;
        expect_samples(&u, height / 2, width, "I010 U plane")?;
        expect_samples(&v, height / 2, width, "I010 V plane")?;
        Ok(Source { width, height, pixels: SourcePixels::I010 { y, u, v } })
    }

    /// P010 from its two planes of little-endian u16 samples, each with its
    /// own pitch (a decoder's or VA-API's surface).
    pub fn p010(width: usize, height: usize, y: Rows<'a>, uv: Rows<'a>) -> Result<Self> {
        frame_geometry(Format::P010, width, height, None)?;
        expect_samples(&y, height, 2 * width, "P010 Y plane")?;
        expect_samples(&uv, height / 2, 2 * width, "P010 chroma plane")?;
        Ok(Source { width, height, pixels: SourcePixels::P010 { y, uv } })
    }

    /// I420 from three planes, each with its own pitch (what decoders hand out).
    pub fn i420(width: usize, height: usize, y: Rows<'a>, u: Rows<'a>, v: Rows<'a>) -> Result<Self> {
        frame_geometry(Format::I420, width, height, None)?;
        expect_rows(&y, height, width, "I420 Y plane")?;
        expect_rows(&u, height / 2, width / 2, "I420 U plane")?;
        expect_rows(&v, height / 2, width / 2, "I420 V plane")?;
        Ok(Source { width, height, pixels: SourcePixels::I420 { y, u, v } })
    }

    /// NV12 from two separate planes, each with its own pitch (NV21: `Source::from_rows`).
    pub fn nv12(
        y: &'a [u8],
        y_pitch: Option<usize>,
        uv: &'a [u8],
        uv_pitch: Option<usize>,
        width: usize,
        height: usize,
    ) -> Result<Self> {
        frame_geometry(Format::Nv12, width, height, None)?;
        // Each plane is a grey-like block of `width` bytes per row.
        let gy = frame_geometry(Format::Gray, width, height, y_pitch)?;
        let guv = frame_geometry(Format::Gray, width, height / 2, uv_pitch)?;
        let y = Rows::new(y, gy.rows, gy.row_bytes, gy.pitch)?;
        let uv = Rows::new(uv, guv.rows, guv.row_bytes, guv.pitch)?;
        Self::from_rows(Format::Nv12, width, height, y, Some(uv))
    }

    /// From rows already checked by the caller: for NV12 either `rows` holds
    /// Y then UV (`chroma` None) or `rows` is Y and `chroma` UV.
    pub fn from_rows(
        format: Format,
        width: usize,
        height: usize,
        rows: Rows<'a>,
        chroma: Option<Rows<'a>>,
    ) -> Result<Self> {
        let g = frame_geometry(format, width, height, None)?;
        let pixels = match (format, chroma) {
            (Format::Nv12 | Format::Nv21, None) => {
                expect_rows(&rows, g.rows, g.row_bytes, &format!("{format} source"))?;
                SourcePixels::Nv12 {
                    y: rows.sub(0, height),
                    uv: rows.sub(height, height / 2),
                    vu: format == Format::Nv21,
                }
            }
            (Format::Nv12 | Format::Nv21, Some(uv)) => {
                expect_rows(&rows, height, width, &format!("{format} Y plane"))?;
                expect_rows(&uv, height / 2, width, &format!("{format} chroma plane"))?;
                SourcePixels::Nv12 { y: rows, uv, vu: format == Format::Nv21 }
            }
            (Format::P010, None) => {
                return Self::p010(width, height, rows.sub(0, height), rows.sub(height, height / 2));
            }
            (Format::P010, Some(uv)) => return Self::p010(width, height, rows, uv),
            (_, Some(_)) => bail!("only NV12, NV21 and P010 come in two planes; {format} is one buffer"),
            (Format::I010, None) => {
                expect_rows(&rows, g.rows, g.row_bytes, "I010 source")?;
                if rows.pitch != rows.row_bytes {
                    bail!(
                        "a one-buffer I010 source with rows {} bytes apart is not supported here: pass its \
                         (Y, U, V) planes, each with its own stride",
                        rows.pitch
                    );
                }
                let (h, w) = (height, 2 * width);
                // SAFETY: the one-buffer frame is h * 3 / 2 contiguous rows of
                // w bytes (checked just above): Y is its first h * w bytes, U
                // the next h / 2 * w / 2, V the last h / 2 * w / 2.
                let (u, v) = unsafe {
                    let base = rows.ptr.add(h * w);
                    (
                        Rows::from_raw_parts(base, h / 2, w / 2, w / 2),
                        Rows::from_raw_parts(base.add(h / 2 * (w / 2)), h / 2, w / 2, w / 2),
                    )
                };
                return Self::i010(width, height, rows.sub(0, height), u, v);
            }
            (Format::Yuyv | Format::Uyvy, None) => {
                expect_rows(&rows, g.rows, g.row_bytes, "source")?;
                SourcePixels::Yuv422 { rows, y_even: format == Format::Yuyv }
            }
            (Format::I420, None) => {
                expect_rows(&rows, g.rows, g.row_bytes, "I420 source")?;
                if rows.pitch != rows.row_bytes {
                    bail!(
                        "a one-buffer I420 source with rows {} bytes apart is not supported here: pass its \
                         (Y, U, V) planes, each with its own stride",
                        rows.pitch
                    );
                }
                let (w, h) = (width, height);
                // SAFETY: the one-buffer I420 frame is h * 3 / 2 rows of w
                // bytes, contiguous (checked just above): Y is its first h * w
                // bytes, U the next h / 2 * w / 2, V the last h / 2 * w / 2,
                // all inside the rows borrowed for 'a.
                unsafe {
                    let base = rows.ptr;
                    SourcePixels::I420 {
                        y: Rows::from_raw_parts(base, h, w, w),
                        u: Rows::from_raw_parts(base.add(h * w), h / 2, w / 2, w / 2),
                        v: Rows::from_raw_parts(base.add(h * w + h / 2 * (w / 2)), h / 2, w / 2, w / 2),
                    }
                }
            }
            (_, None) => {
                expect_rows(&rows, g.rows, g.row_bytes, "source")?;
                SourcePixels::Packed { format, rows }
            }
        };
        Ok(Source { width, height, pixels })
    }

    pub fn format(&self) -> Format {
        match self.pixels {
            SourcePixels::Packed { format, .. } => format,
            SourcePixels::Nv12 { vu: false, .. } => Format::Nv12,
            SourcePixels::Nv12 { vu: true, .. } => Format::Nv21,
            SourcePixels::Yuv422 { y_even: true, .. } => Format::Yuyv,
            SourcePixels::Yuv422 { y_even: false, .. } => Format::Uyvy,
            SourcePixels::I420 { .. } => Format::I420,
            SourcePixels::P010 { .. } => Format::P010,
            SourcePixels::I010 { .. } => Format::I010,
        }
    }
}

/// A frame to write: one plane for packed formats, three for planar ones.
#[derive(Debug)]
pub struct Destination<'a> {
    pub format: Format,
    pub width: usize,
    pub height: usize,
    pub planes: Vec<RowsMut<'a>>,
}

impl<'a> Destination<'a> {
    /// A destination buffer of exactly the frame's size (every row counting its
    /// full pitch): a size mismatch usually means a wrong format or shape.
    pub fn new(format: Format, data: &'a mut [u8], width: usize, height: usize, pitch: Option<usize>) -> Result<Self> {
        check_destination_format(format)?;
        let g = frame_geometry(format, width, height, pitch)?;
        check_destination_size(format, width, height, &g, data.len())?;
        let mut planes = Vec::with_capacity(g.planes);
        let mut rest = data;
        for _ in 0..g.planes {
            let (plane, tail) = rest.split_at_mut(g.plane_pitch());
            planes.push(RowsMut::new(plane, g.rows, g.row_bytes, g.pitch)?);
            rest = tail;
        }
        Ok(Destination { format, width, height, planes })
    }

    /// From planes already checked by the caller.
    pub fn from_planes(format: Format, width: usize, height: usize, planes: Vec<RowsMut<'a>>) -> Result<Self> {
        check_destination_format(format)?;
        let g = frame_geometry(format, width, height, None)?;
        if planes.len() != g.planes {
            bail!("{format} has {} planes, not {}", g.planes, planes.len());
        }
        for plane in &planes {
            if plane.count() != g.rows || plane.row_bytes() != g.row_bytes {
                bail!(
                    "a {format} plane of {width}x{height} pixels has {} rows of {} bytes, not {} of {}",
                    g.rows,
                    g.row_bytes,
                    plane.count(),
                    plane.row_bytes()
                );
            }
        }
        Ok(Destination { format, width, height, planes })
    }
}

fn check_destination_format(format: Format) -> Result<()> {
    if !format.is_destination() {
        bail!("{format} is not a destination format: convert writes {}", names(Format::destinations()));
    }
    Ok(())
}

/// The VART-style byte-size check of a destination buffer, before writing.
pub fn check_destination_size(
    format: Format,
    width: usize,
    height: usize,
    g: &FrameGeometry,
    nbytes: usize,
) -> Result<()> {
    if nbytes != g.nbytes() {
        let stride = if g.pitch != g.row_bytes { format!(" with rows {} bytes apart", g.pitch) } else { String::new() };
        bail!(
            "the destination holds {nbytes} bytes but a {format} frame of {width}x{height} pixels{stride} \
             takes {} bytes; check the format, the frame size and the stride (or pass a slice of exactly that size)",
            g.nbytes()
        );
    }
    Ok(())
}

fn expect_rows(rows: &Rows<'_>, count: usize, row_bytes: usize, what: &str) -> Result<()> {
    if rows.count() != count || rows.row_bytes() != row_bytes {
        bail!(
            "the {what} has {} rows of {} bytes where {count} rows of {row_bytes} bytes are needed",
            rows.count(),
            rows.row_bytes()
        );
    }
    Ok(())
}

/// As `expect_rows`, for rows of little-endian u16 samples: each row must
/// start on an even address (a sample split across an odd offset is a
/// buffer read from the wrong place).
fn expect_samples(rows: &Rows<'_>, count: usize, row_bytes: usize, what: &str) -> Result<()> {
    expect_rows(rows, count, row_bytes, what)?;
    if !(rows.ptr as usize).is_multiple_of(2) || (count > 1 && !rows.pitch.is_multiple_of(2)) {
        bail!(
            "the {what} starts at an odd byte address or has an odd stride ({} bytes): its samples are \
             little-endian u16, each on an even byte; pass the plane as a uint16 array or from an even offset",
            rows.pitch
        );
    }
    Ok(())
}

pub(crate) fn names(formats: impl Iterator<Item = Format>) -> String {
    formats.map(|f| f.name()).collect::<Vec<_>>().join(", ")
}
