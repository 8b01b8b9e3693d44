//! Where a resize reads and writes: the source region (ROI), the destination
//! rectangle, how a fit places one in the other, and the transform that maps
//! destination coordinates back to source pixels.

use std::fmt;
use std::str::FromStr;

use super::super::error::{bail, LayoutError, Result};
use super::super::format::Format;

/// A rectangle of pixels: `x`, `y` of its top-left corner, `width`, `height`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rect {
    pub x: usize,
    pub y: usize,
    pub width: usize,
    pub height: usize,
}

impl Rect {
    pub fn new(x: usize, y: usize, width: usize, height: usize) -> Rect {
        Rect { x, y, width, height }
    }

    pub fn size(&self) -> (usize, usize) {
        (self.width, self.height)
    }
}

impl fmt::Display for Rect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "(x={}, y={}, w={}, h={})", self.x, self.y, self.width, self.height)
    }
}

/// How a source pixel is computed from the source region (OpenCV's methods).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Interpolation {
    /// `INTER_LINEAR`: half-pixel centres, 11-bit fixed-point weights.
    #[default]
    Bilinear,
    /// `INTER_AREA`: pixel-area averaging when shrinking (bilinear-like when enlarging).
    Area,
    /// `INTER_NEAREST`: `floor(dst * scale)`.
    Nearest,
}

impl FromStr for Interpolation {
    type Err = LayoutError;

    fn from_str(name: &str) -> Result<Interpolation> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "bilinear" | "linear" => Interpolation::Bilinear,
            "area" => Interpolation::Area,
            "nearest" => Interpolation::Nearest,
            _ => bail!(
                "unknown interpolation {name:?}: use \"bilinear\", \"area\" (for strong downscales) or \"nearest\""
            ),
        })
    }
}

/// How the source region is placed in the destination rectangle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Fit {
    /// Scale each axis to fill the rectangle (the aspect may change).
    #[default]
    Stretch,
    /// Keep the aspect, centre, fill the rest with the fill colour (YOLO-style detectors).
    Letterbox,
    /// Keep the aspect, crop the centre of the region to the rectangle's
    /// aspect, then scale to fill (ImageNet-style classifiers).
    Crop,
}

impl FromStr for Fit {
    type Err = LayoutError;

    fn from_str(name: &str) -> Result<Fit> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "stretch" => Fit::Stretch,
            "letterbox" => Fit::Letterbox,
            "crop" => Fit::Crop,
            _ => bail!("unknown fit {name:?}: use \"stretch\", \"letterbox\" (keep aspect, pad) or \"crop\" (keep aspect, centre crop)"),
        })
    }
}

/// The geometry of a conversion that may resize. All `None`/default: the
/// whole source into the whole destination.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Resize {
    /// The source region to read (default: the whole frame).
    pub roi: Option<Rect>,
    /// The rectangle of the destination to write (default: all of it);
    /// pixels outside it are left as they are.
    pub dst_rect: Option<Rect>,
    pub interpolation: Interpolation,
    pub fit: Fit,
    /// Letterbox colour as source pixel values (0-255), in the destination's
    /// channel order; it goes through the same normalisation as pixels.
    pub fill: [u8; 3],
}

/// Where a resize read and wrote, and how to map destination coordinates
/// back: `dst = src * scale + offset` per axis (x, y), in continuous pixel
/// coordinates of the whole frames (pixel i covers [i, i + 1)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transform {
    pub scale: [f64; 2],
    pub offset: [f64; 2],
    /// The destination pixels that hold the image (inside `dst_rect`; the
    /// rest of `dst_rect` is fill).
    pub content: Rect,
    /// The destination rectangle written (content and fill).
    pub dst_rect: Rect,
    /// The source pixels read (the ROI, cropped by `Fit::Crop`).
    pub source: Rect,
}

impl Transform {
    /// The source point of a destination point.
    pub fn to_source(&self, x: f64, y: f64) -> (f64, f64) {
        ((x - self.offset[0]) / self.scale[0], (y - self.offset[1]) / self.scale[1])
    }
}

/// How many pixels one chroma sample covers across and down, for formats
/// whose regions must start and end on those boundaries.
fn subsampling(format: Format) -> (usize, usize) {
    match format {
        Format::Nv12 | Format::Nv21 | Format::I420 | Format::P010 | Format::I010 => (2, 2),
        Format::Yuyv | Format::Uyvy => (2, 1),
        _ => (1, 1),
    }
}

/// Checks the geometry and works out the placement: the source region read,
/// the destination rectangle and the content inside it.
pub fn place(format: Format, src: (usize, usize), dst: (usize, usize), resize: &Resize) -> Result<Transform> {
    let (sw, sh) = src;
    let (dw, dh) = dst;
    let roi = resize.roi.unwrap_or(Rect::new(0, 0, sw, sh));
    if roi.width == 0 || roi.height == 0 {
        bail!("the ROI {roi} is empty: give a width and a height of at least 1");
    }
    if roi.x.checked_add(roi.width).is_none_or(|r| r > sw) || roi.y.checked_add(roi.height).is_none_or(|b| b > sh) {
        bail!("the ROI {roi} does not fit in the {sw}x{sh} source frame: it must lie inside the frame");
    }
    let (ax, ay) = subsampling(format);
    let aligned = |v: usize, a: usize| v.is_multiple_of(a);
    if !(aligned(roi.x, ax) && aligned(roi.y, ay) && aligned(roi.width, ax) && aligned(roi.height, ay)) {
        bail!(
            "the ROI {roi} does not start and end on even pixels: {format} shares one chroma sample between \
             {ax}x{ay} pixels, so x, y, width and height must be even"
        );
    }
    let rect = resize.dst_rect.unwrap_or(Rect::new(0, 0, dw, dh));
    if rect.width == 0 || rect.height == 0 {
        bail!("the destination rectangle {rect} is empty: give a width and a height of at least 1");
    }
    if rect.x.checked_add(rect.width).is_none_or(|r| r > dw) || rect.y.checked_add(rect.height).is_none_or(|b| b > dh) {
        bail!("the destination rectangle {rect} does not fit in the {dw}x{dh} destination: it must lie inside it");
    }

    let (mut source, mut content) = (roi, rect);
    match resize.fit {
        Fit::Stretch => {}
        Fit::Letterbox => {
            // As YOLO's letterbox: r = min(ratios), the content round(size * r),
            // the padding split with the odd pixel at the bottom/right.
            let r = (rect.width as f64 / roi.width as f64).min(rect.height as f64 / roi.height as f64);
            let w = ((roi.width as f64 * r).round_ties_even() as usize).clamp(1, rect.width);
            let h = ((roi.height as f64 * r).round_ties_even() as usize).clamp(1, rect.height);
            content = Rect::new(rect.x + (rect.width - w) / 2, rect.y + (rect.height - h) / 2, w, h);
        }
        Fit::Crop => {
            // The largest centred part of the ROI with the rectangle's aspect,
            // on chroma boundaries for subsampled formats.
            let (rw, rh) = (rect.width as u128, rect.height as u128);
            let (w, h) = if roi.width as u128 * rh > roi.height as u128 * rw {
                (((roi.height as u128 * rw + rh / 2) / rh) as usize, roi.height)
            } else {
                (roi.width, ((roi.width as u128 * rh + rw / 2) / rw) as usize)
            };
            let w = (w / ax * ax).clamp(ax, roi.width);
            let h = (h / ay * ay).clamp(ay, roi.height);
            let x = roi.x + ((roi.width - w) / 2) / ax * ax;
            let y = roi.y + ((roi.height - h) / 2) / ay * ay;
            source = Rect::new(x, y, w, h);
        }
    }
    let scale = [content.width as f64 / source.width as f64, content.height as f64 / source.height as f64];
    let offset = [content.x as f64 - source.x as f64 * scale[0], content.y as f64 - source.y as f64 * scale[1]];
    Ok(Transform { scale, offset, content, dst_rect: rect, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letterbox_matches_yolo_rounding() {
        let r = Resize { fit: Fit::Letterbox, ..Resize::default() };
        let t = place(Format::Bgr, (1920, 1080), (640, 640), &r).unwrap();
        assert_eq!(t.content, Rect::new(0, 140, 640, 360));
        assert_eq!(t.to_source(0.0, 140.0), (0.0, 0.0));
        assert_eq!(t.to_source(640.0, 500.0), (1920.0, 1080.0));
        // 101 pixels of padding: 50 above, 51 below.
        let t = place(Format::Bgr, (100, 61), (100, 162), &r).unwrap();
        assert_eq!(t.content, Rect::new(0, 50, 100, 61));
    }

    #[test]
    fn crop_takes_the_centre_on_chroma_boundaries() {
        let r = Resize { fit: Fit::Crop, ..Resize::default() };
        let t = place(Format::Bgr, (1920, 1080), (224, 224), &r).unwrap();
        assert_eq!(t.source, Rect::new(420, 0, 1080, 1080));
        let t = place(Format::Nv12, (1920, 1080), (300, 200), &r).unwrap();
        assert_eq!(t.source, Rect::new(150, 0, 1620, 1080));
        let t = place(Format::Nv12, (10, 8), (3, 1), &r).unwrap();
        assert_eq!((t.source.x % 2, t.source.y % 2, t.source.width % 2, t.source.height % 2), (0, 0, 0, 0));
    }

    #[test]
    fn bad_geometry_is_refused() {
        let place_roi =
            |roi: Rect| place(Format::Nv12, (8, 8), (4, 4), &Resize { roi: Some(roi), ..Resize::default() });
        assert!(place_roi(Rect::new(0, 0, 0, 2)).unwrap_err().message.contains("empty"));
        assert!(place_roi(Rect::new(6, 0, 4, 2)).unwrap_err().message.contains("inside the frame"));
        assert!(place_roi(Rect::new(usize::MAX, 0, 4, 2)).unwrap_err().message.contains("inside the frame"));
        assert!(place_roi(Rect::new(1, 0, 4, 2)).unwrap_err().message.contains("even"));
        let rect = Resize { dst_rect: Some(Rect::new(2, 2, 3, 1)), ..Resize::default() };
        assert!(place(Format::Bgr, (8, 8), (4, 4), &rect).unwrap_err().message.contains("inside it"));
        assert!("cubic".parse::<Interpolation>().unwrap_err().message.contains("bilinear"));
        assert!("fill".parse::<Fit>().unwrap_err().message.contains("letterbox"));
    }
}
