//! Where one frame's pixels lie in its buffer: the shape, byte strides and
//! sample size of the numpy view `Frame.array()` gives, from the negotiated
//! format (width, height, fourcc, `bytesperline`), checked against the bytes
//! the frame has before anything reads them.
//!
//! Single-buffer layouts as V4L2 defines them: the semi-planar 4:2:0 formats
//! (NV12, NV21, P010) put their interleaved chroma plane right after the
//! luma plane, at the same `bytesperline`, so one 2-D view of
//! `H + ceil(H / 2)` rows at that pitch covers both planes (the layout
//! engine's one-buffer NV12 / P010 source). I420's chroma planes have half
//! the luma pitch: a padded I420 frame is shown as its flat bytes.

use super::device::{Format, Fourcc};
use super::error::{Error, ErrorKind, Result};

/// A frame's numpy view: shape, byte strides, and bytes per sample (1 for
/// u8 formats, 2 for P010's little-endian u16 samples).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageView {
    pub shape: Vec<usize>,
    pub strides: Vec<usize>,
    pub sample_bytes: usize,
    /// Bytes from the image's first sample to the end of its last one.
    pub span: usize,
}

/// How a fourcc's rows lie: bytes per pixel of a luma (or packed) row, the
/// rows of the whole image, and the view's trailing dimensions.
struct Rows {
    /// Bytes one row of `width` pixels needs.
    row_bytes: usize,
    /// Rows at `bytesperline` (luma rows plus chroma rows for 4:2:0).
    rows: usize,
    /// (shape, strides) after the row axis.
    inner: (Vec<usize>, Vec<usize>),
    sample_bytes: usize,
}

fn rows_of(fourcc: Fourcc, width: usize, height: usize) -> Option<Rows> {
    let chroma_rows = height.div_ceil(2);
    let rows = |row_bytes, rows, inner, sample_bytes| Some(Rows { row_bytes, rows, inner, sample_bytes });
    match &fourcc.0.to_le_bytes() {
        b"YUYV" | b"UYVY" | b"YVYU" | b"VYUY" => rows(2 * width, height, (vec![width, 2], vec![2, 1]), 1),
        b"NV12" | b"NV21" => rows(width, height + chroma_rows, (vec![width], vec![1]), 1),
        b"P010" => rows(2 * width, height + chroma_rows, (vec![width], vec![2]), 2),
        b"YU12" | b"YV12" => rows(width, height + chroma_rows, (vec![width], vec![1]), 1),
        b"RGB3" | b"BGR3" => rows(3 * width, height, (vec![width, 3], vec![3, 1]), 1),
        b"GREY" => rows(width, height, (vec![width], vec![1]), 1),
        _ => None,
    }
}

impl Format {
    /// The view of one frame that has `available` bytes from its start (the
    /// driver's `bytesused`, or what its buffer holds). Fails, saying which
    /// number is wrong, when `bytesperline` is shorter than a row, odd for
    /// 16-bit samples, or the frame too short for its rows at that pitch.
    /// Formats without a known layout (compressed, Bayer...) are their flat
    /// `available` bytes.
    pub fn view(&self, available: usize) -> Result<ImageView> {
        let (w, h, pitch) = (self.width as usize, self.height as usize, self.bytesperline as usize);
        let fourcc = self.fourcc;
        let Some(r) = rows_of(fourcc, w, h) else {
            return Ok(ImageView { shape: vec![available], strides: vec![1], sample_bytes: 1, span: available });
        };
        let bad = |what: String| Error::new(ErrorKind::Unsupported, format!("{w}x{h} {fourcc}: {what}"));
        if pitch < r.row_bytes {
            return Err(bad(format!(
                "the driver's bytesperline {pitch} is shorter than a row ({} bytes): its format cannot be read",
                r.row_bytes
            )));
        }
        if !pitch.is_multiple_of(r.sample_bytes) {
            return Err(bad(format!(
                "the driver's bytesperline {pitch} is odd, but rows of 16-bit samples start at even addresses"
            )));
        }
        // I420 and YV12 with padded rows: their chroma planes have half the
        // luma pitch, which no single 2-D view has.
        let planar = matches!(&fourcc.0.to_le_bytes(), b"YU12" | b"YV12");
        let (span, shape, strides) = if planar && pitch != w {
            // Saturating: a driver's absurd numbers make a span no frame has.
            let span =
                pitch.saturating_mul(h).saturating_add((pitch / 2).saturating_mul(h.div_ceil(2)).saturating_mul(2));
            (span, vec![span], vec![1])
        } else {
            let span = if r.rows == 0 { 0 } else { pitch.saturating_mul(r.rows - 1).saturating_add(r.row_bytes) };
            (span, [vec![r.rows], r.inner.0].concat(), [vec![pitch], r.inner.1].concat())
        };
        if available < span {
            return Err(bad(format!(
                "the frame holds {available} bytes, but its {} rows at bytesperline {pitch} need {span}: \
                 the driver delivered a short frame, or its sizeimage is too small for its pitch",
                r.rows
            )));
        }
        Ok(ImageView { shape, strides, sample_bytes: r.sample_bytes, span })
    }
}
