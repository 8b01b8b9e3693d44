//! Format names (VART's), what each one looks like in memory, and the helper
//! that picks the destination format from a model input's description.

use std::fmt;
use std::str::FromStr;

use super::error::{bail, LayoutError, Result};

/// A frame format: the sources a camera or decoder gives, and the layouts an
/// NPU (HW layouts) or the CPU path of a runtime (planar layouts) reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Interleaved u8, OpenCV's default order; also a destination (3-channel
    /// byte inputs of quantised models).
    Bgr,
    Rgb,
    Bgra,
    Rgba,
    /// One u8 channel.
    Gray,
    /// 4:2:0 YUV: a full-size Y plane, then interleaved U, V at half size.
    Nv12,
    /// NV12 with V, U interleaved (Android cameras, some decoders).
    Nv21,
    /// Packed 4:2:2 YUV (cameras): Y0 U Y1 V per two pixels.
    Yuyv,
    /// Packed 4:2:2 YUV: U Y0 V Y1 per two pixels.
    Uyvy,
    /// Planar 4:2:0 YUV (V4L2's YU12): Y, then U, then V at half size each way.
    I420,
    /// 10-bit 4:2:0 YUV laid out as NV12 in little-endian u16 samples, the
    /// value in the top 10 bits (HEVC Main10 decoders, VA-API; FFmpeg's `p010le`).
    P010,
    /// 10-bit 4:2:0 YUV laid out as I420 in little-endian u16 samples, the
    /// value in the low 10 bits (FFmpeg's `yuv420p10le`; libyuv's name).
    I010,
    /// Packed u8, four channels, the fourth a pad byte.
    Rgbx,
    Bgrx,
    /// Packed bfloat16, four channels (R, G, B, pad).
    RgbxBf16,
    /// Packed IEEE half, four channels (R, G, B, pad).
    RgbxFp16,
    /// Packed signed int8, four channels (R, G, B, pad): a quantised
    /// model's input, `clamp(round((x - mean) / scale / q) + zero_point)`.
    RgbxI8,
    /// Packed signed int8, three channels.
    RgbI8,
    /// Planar f32, three planes R, G, B (NCHW).
    RgbpFloat,
    /// Planar IEEE half, three planes R, G, B.
    RgbpFp16,
    /// Packed f32, three channels (NHWC float inputs of the CPU path).
    RgbFloat,
    BgrFloat,
    /// Planar f32 and IEEE half, three planes B, G, R.
    BgrpFloat,
    BgrpFp16,
}

/// The element type of one channel value in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Element {
    U8,
    /// Signed int8, quantised with a scale and a zero point.
    I8,
    Bf16,
    F16,
    F32,
}

impl Element {
    pub fn size(self) -> usize {
        match self {
            Element::U8 | Element::I8 => 1,
            Element::Bf16 | Element::F16 => 2,
            Element::F32 => 4,
        }
    }
}

/// A colour channel, to say where each one sits in a pixel or plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    R,
    G,
    B,
}

impl Format {
    pub const ALL: [Format; 24] = [
        Format::Bgr,
        Format::Rgb,
        Format::Bgra,
        Format::Rgba,
        Format::Gray,
        Format::Nv12,
        Format::Nv21,
        Format::Yuyv,
        Format::Uyvy,
        Format::I420,
        Format::P010,
        Format::I010,
        Format::Rgbx,
        Format::Bgrx,
        Format::RgbxBf16,
        Format::RgbxFp16,
        Format::RgbxI8,
        Format::RgbI8,
        Format::RgbpFloat,
        Format::RgbpFp16,
        Format::RgbFloat,
        Format::BgrFloat,
        Format::BgrpFloat,
        Format::BgrpFp16,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Bgr => "BGR",
            Format::Rgb => "RGB",
            Format::Bgra => "BGRA",
            Format::Rgba => "RGBA",
            Format::Gray => "GRAY",
            Format::Nv12 => "NV12",
            Format::Nv21 => "NV21",
            Format::Yuyv => "YUYV",
            Format::Uyvy => "UYVY",
            Format::I420 => "I420",
            Format::P010 => "P010",
            Format::I010 => "I010",
            Format::Rgbx => "RGBx",
            Format::Bgrx => "BGRx",
            Format::RgbxBf16 => "RGBx_BF16",
            Format::RgbxFp16 => "RGBx_FP16",
            Format::RgbxI8 => "RGBx_I8",
            Format::RgbI8 => "RGB_I8",
            Format::RgbpFloat => "RGBP_FLOAT",
            Format::RgbpFp16 => "RGBP_FP16",
            Format::RgbFloat => "RGB_FLOAT",
            Format::BgrFloat => "BGR_FLOAT",
            Format::BgrpFloat => "BGRP_FLOAT",
            Format::BgrpFp16 => "BGRP_FP16",
        }
    }

    /// Formats `convert` reads. RGBx and BGRx read like RGBA and BGRA (the pad is ignored).
    pub fn is_source(self) -> bool {
        matches!(
            self,
            Format::Bgr
                | Format::Rgb
                | Format::Bgra
                | Format::Rgba
                | Format::Gray
                | Format::Nv12
                | Format::Nv21
                | Format::Yuyv
                | Format::Uyvy
                | Format::I420
                | Format::P010
                | Format::I010
                | Format::Rgbx
                | Format::Bgrx
        )
    }

    /// Formats `convert` writes.
    pub fn is_destination(self) -> bool {
        !matches!(self, Format::Bgra | Format::Rgba | Format::Gray) && !self.is_yuv()
    }

    /// The YUV sources, decoded with OpenCV's BT.601 arithmetic.
    pub fn is_yuv(self) -> bool {
        matches!(self, Format::Nv12 | Format::Nv21 | Format::Yuyv | Format::Uyvy | Format::I420) || self.is_10bit()
    }

    /// The YUV sources of 10-bit samples, each a little-endian u16.
    pub fn is_10bit(self) -> bool {
        matches!(self, Format::P010 | Format::I010)
    }

    /// Bytes of one sample of a source, or of one channel value of a destination.
    fn sample_bytes(self) -> usize {
        if self.is_10bit() {
            2
        } else {
            self.element().size()
        }
    }

    pub fn sources() -> impl Iterator<Item = Format> {
        Self::ALL.into_iter().filter(|f| f.is_source())
    }

    pub fn destinations() -> impl Iterator<Item = Format> {
        Self::ALL.into_iter().filter(|f| f.is_destination())
    }

    pub fn element(self) -> Element {
        match self {
            Format::RgbxBf16 => Element::Bf16,
            Format::RgbxI8 | Format::RgbI8 => Element::I8,
            Format::RgbxFp16 | Format::RgbpFp16 | Format::BgrpFp16 => Element::F16,
            Format::RgbpFloat | Format::RgbFloat | Format::BgrFloat | Format::BgrpFloat => Element::F32,
            _ => Element::U8,
        }
    }

    pub fn is_planar(self) -> bool {
        matches!(self, Format::RgbpFloat | Format::RgbpFp16 | Format::BgrpFloat | Format::BgrpFp16)
    }

    /// Values per pixel in one row of a packed format; 1 for planar, NV12 and
    /// I420 rows; 2 for packed 4:2:2 (a Y and half a U,V pair).
    pub fn channels(self) -> usize {
        match self {
            Format::Gray | Format::Nv12 | Format::Nv21 | Format::I420 | Format::P010 | Format::I010 => 1,
            Format::Yuyv | Format::Uyvy => 2,
            f if f.is_planar() => 1,
            Format::Bgr | Format::Rgb | Format::RgbFloat | Format::BgrFloat | Format::RgbI8 => 3,
            _ => 4,
        }
    }

    /// Whether a destination has a fourth, pad channel (the packed HW layouts).
    pub fn has_pad(self) -> bool {
        !self.is_planar() && self.channels() == 4
    }

    /// The colour channels in memory order: per pixel for packed formats, per
    /// plane for planar ones. GRAY and the YUV formats have none (they are decoded).
    pub fn channel_order(self) -> &'static [Channel] {
        use Channel::*;
        match self {
            Format::Bgr | Format::Bgra | Format::Bgrx | Format::BgrFloat | Format::BgrpFloat | Format::BgrpFp16 => {
                &[B, G, R]
            }
            f if f.is_yuv() => &[],
            Format::Gray => &[],
            _ => &[R, G, B],
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = LayoutError;

    /// Exact VART names; case is not significant ("rgbx_bf16" works too).
    /// FFmpeg's names of the 10-bit formats are accepted too.
    fn from_str(name: &str) -> Result<Format> {
        if let Some(format) = Format::ALL.into_iter().find(|f| f.name().eq_ignore_ascii_case(name)) {
            return Ok(format);
        }
        match name.to_ascii_lowercase().as_str() {
            "p010le" => return Ok(Format::P010),
            "yuv420p10le" | "i420_10" => return Ok(Format::I010),
            _ => {}
        }
        let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        bail!("unknown format name {name:?}: the formats are {}", names.join(", "))
    }
}

/// How one frame of a format lies in memory: `planes` blocks of `rows` rows,
/// each row `row_bytes` long and `pitch` bytes after the previous one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameGeometry {
    pub planes: usize,
    pub rows: usize,
    pub row_bytes: usize,
    pub pitch: usize,
}

impl FrameGeometry {
    /// Bytes of a frame buffer: every row counts its full pitch, as HW buffers do.
    pub fn nbytes(&self) -> usize {
        self.planes * self.rows * self.pitch
    }

    /// Bytes between the start of one plane and the next.
    pub fn plane_pitch(&self) -> usize {
        self.rows * self.pitch
    }
}

/// The memory geometry of a `width` × `height` frame; `pitch` (row stride in
/// bytes) defaults to tightly packed rows. NV12 and I420 here are the
/// one-buffer forms (H * 3 / 2 rows of W bytes: I420's U and V rows are half
/// as long, two to a row).
pub fn frame_geometry(format: Format, width: usize, height: usize, pitch: Option<usize>) -> Result<FrameGeometry> {
    if width == 0 || height == 0 {
        bail!("a {format} frame of {width}x{height} pixels is empty: width and height must be at least 1");
    }
    if matches!(format, Format::Nv12 | Format::Nv21 | Format::I420 | Format::P010 | Format::I010)
        && (!width.is_multiple_of(2) || !height.is_multiple_of(2))
    {
        bail!(
            "an {format} frame of {width}x{height} pixels is impossible: {format} shares one U,V pair \
             between 2x2 pixels, so width and height must be even"
        );
    }
    if matches!(format, Format::Yuyv | Format::Uyvy) && !width.is_multiple_of(2) {
        bail!(
            "a {format} frame of {width}x{height} pixels is impossible: {format} shares one U,V pair \
             between 2 pixels of a row, so the width must be even"
        );
    }
    let too_big = || LayoutError::new(format!("a {format} frame of {width}x{height} pixels is too large to address"));
    let row_bytes = width.checked_mul(format.channels() * format.sample_bytes()).ok_or_else(too_big)?;
    let (planes, rows) = match format {
        Format::Nv12 | Format::Nv21 | Format::I420 | Format::P010 | Format::I010 => (1, height / 2 * 3),
        f if f.is_planar() => (3, height),
        _ => (1, height),
    };
    let pitch = pitch.unwrap_or(row_bytes);
    if format.is_10bit() && !pitch.is_multiple_of(2) {
        bail!(
            "a {format} stride of {pitch} bytes is odd: {format} rows are little-endian u16 samples, \
             so every row starts on an even byte"
        );
    }
    if pitch < row_bytes {
        bail!(
            "a stride of {pitch} bytes is shorter than one row of {width} {format} pixels \
             ({row_bytes} bytes): rows would overlap; pass a stride of at least {row_bytes}"
        );
    }
    let geometry = FrameGeometry { planes, rows, row_bytes, pitch };
    planes
        .checked_mul(rows)
        .and_then(|n| n.checked_mul(pitch))
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(too_big)?;
    Ok(geometry)
}

/// Bytes a frame of this format occupies (NV12 in its one-buffer form).
pub fn frame_nbytes(format: Format, width: usize, height: usize, pitch: Option<usize>) -> Result<usize> {
    Ok(frame_geometry(format, width, height, pitch)?.nbytes())
}

/// The element type of a model input, as OpenVINO, VART or numpy name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElementType {
    U8,
    I8,
    Bf16,
    F16,
    F32,
}

impl FromStr for ElementType {
    type Err = LayoutError;

    fn from_str(name: &str) -> Result<ElementType> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "u8" | "uint8" => ElementType::U8,
            "i8" | "int8" => ElementType::I8,
            "bf16" | "bfloat16" => ElementType::Bf16,
            "f16" | "fp16" | "float16" | "half" => ElementType::F16,
            "f32" | "fp32" | "float32" | "float" => ElementType::F32,
            _ => bail!(
                "unknown element type {name:?}: use one of u8, i8, bf16, f16, f32 \
                 (numpy names such as uint8 or float32 work too)"
            ),
        })
    }
}

/// Where the channel axis of a model input is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorLayout {
    /// Channels last: one packed pixel after another (the NPU's HW layouts).
    Nhwc,
    /// Channels first: one plane per channel (the CPU layouts).
    Nchw,
}

impl FromStr for TensorLayout {
    type Err = LayoutError;

    fn from_str(name: &str) -> Result<TensorLayout> {
        Ok(match name.to_ascii_uppercase().as_str() {
            "NHWC" | "HWC" => TensorLayout::Nhwc,
            "NCHW" | "CHW" => TensorLayout::Nchw,
            _ => bail!("unknown tensor layout {name:?}: use NHWC (channels last) or NCHW (channels first)"),
        })
    }
}

/// The destination format preprocessing must write for a model input, in the
/// spirit of VART's NPU Format Selection Guide: packed 4-channel HW layouts
/// picked by element type for channels-last inputs of 4 channels (zero-copy),
/// 3-channel packed or planar layouts for the CPU path. `bgr` asks for B, G,
/// R channel order, which the u8 and f32 layouts offer (not bf16 and f16 packed).
pub fn select_format(element: ElementType, layout: TensorLayout, channels: usize, bgr: bool) -> Result<Format> {
    use ElementType::*;
    use TensorLayout::*;
    let pick = |rgb: Format, bgr_format: Option<Format>| -> Result<Format> {
        match (bgr, bgr_format) {
            (false, _) => Ok(rgb),
            (true, Some(f)) => Ok(f),
            (true, None) => bail!(
                "{rgb} exists in RGB order only; BGR order is offered by BGRx, BGR, BGR_FLOAT and the BGRP layouts"
            ),
        }
    };
    match (layout, channels, element) {
        (Nhwc, 4, U8 | I8) => pick(Format::Rgbx, Some(Format::Bgrx)),
        (Nhwc, 4, Bf16) => pick(Format::RgbxBf16, None),
        (Nhwc, 4, F16) => pick(Format::RgbxFp16, None),
        (Nhwc, 3, U8 | I8) => pick(Format::Rgb, Some(Format::Bgr)),
        (Nhwc, 3, F32) => pick(Format::RgbFloat, Some(Format::BgrFloat)),
        (Nchw, 3, F32) => pick(Format::RgbpFloat, Some(Format::BgrpFloat)),
        (Nchw, 3, F16) => pick(Format::RgbpFp16, Some(Format::BgrpFp16)),
        _ => bail!(
            "no destination format fits a {layout:?} input of {channels} channels of {element:?}: \
             the layouts are NHWC with 4 channels (u8/i8 -> RGBx or BGRx, bf16 -> RGBx_BF16, \
             f16 -> RGBx_FP16), NHWC with 3 channels (u8/i8 -> RGB or BGR, f32 -> RGB_FLOAT or BGR_FLOAT) \
             and NCHW with 3 channels (f32 -> RGBP_FLOAT or BGRP_FLOAT, f16 -> RGBP_FP16 or BGRP_FP16)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_ignore_case() {
        for format in Format::ALL {
            assert_eq!(format.name().parse::<Format>().unwrap(), format);
            assert_eq!(format.name().to_lowercase().parse::<Format>().unwrap(), format);
        }
        let err = "YUV9".parse::<Format>().unwrap_err();
        assert!(err.message.contains("YUV9") && err.message.contains("RGBx_BF16"), "{err}");
    }

    #[test]
    fn geometry_counts_full_pitch_and_rejects_bad_frames() {
        let g = frame_geometry(Format::RgbxBf16, 5, 3, Some(64)).unwrap();
        assert_eq!((g.planes, g.rows, g.row_bytes, g.pitch, g.nbytes()), (1, 3, 40, 64, 192));
        let p = frame_geometry(Format::RgbpFloat, 5, 3, None).unwrap();
        assert_eq!((p.planes, p.rows, p.row_bytes, p.nbytes()), (3, 3, 20, 180));
        let n = frame_geometry(Format::Nv12, 4, 2, None).unwrap();
        assert_eq!((n.rows, n.row_bytes, n.nbytes()), (3, 4, 12));
        assert!(frame_geometry(Format::Nv12, 3, 2, None).unwrap_err().message.contains("even"));
        assert!(frame_geometry(Format::Rgbx, 0, 2, None).unwrap_err().message.contains("empty"));
        assert!(frame_geometry(Format::Rgbx, 4, 2, Some(15)).unwrap_err().message.contains("overlap"));
        assert!(frame_geometry(Format::Rgbx, usize::MAX / 2, 2, None).is_err());
    }

    #[test]
    fn selection_follows_the_guide() {
        use ElementType::*;
        use TensorLayout::*;
        assert_eq!(select_format(Bf16, Nhwc, 4, false).unwrap(), Format::RgbxBf16);
        assert_eq!(select_format(F16, Nhwc, 4, false).unwrap(), Format::RgbxFp16);
        assert_eq!(select_format(I8, Nhwc, 4, false).unwrap(), Format::Rgbx);
        assert_eq!(select_format(U8, Nhwc, 4, true).unwrap(), Format::Bgrx);
        assert_eq!(select_format(F32, Nchw, 3, false).unwrap(), Format::RgbpFloat);
        assert_eq!(select_format(F16, Nchw, 3, false).unwrap(), Format::RgbpFp16);
        assert_eq!(select_format(U8, Nhwc, 3, true).unwrap(), Format::Bgr);
        assert_eq!(select_format(F32, Nhwc, 3, false).unwrap(), Format::RgbFloat);
        assert_eq!(select_format(F32, Nchw, 3, true).unwrap(), Format::BgrpFloat);
        assert!(select_format(F32, Nhwc, 4, false).is_err());
        assert!(select_format(Bf16, Nhwc, 4, true).is_err());
        assert!(select_format(Bf16, Nchw, 3, false).is_err());
    }
}
