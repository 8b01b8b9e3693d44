//! Colour standards of YUV sources: the matrix (BT.601, BT.709, BT.2020)
//! and the range (limited "TV" 16-235/16-240, or full "PC" 0-255), as a
//! camera (V4L2's `ycbcr_enc`, `quantization`) or a decoder (FFmpeg's
//! `colorspace`, `color_range`) says a frame is, and the fixed-point
//! coefficients every YUV decoder of every SIMD level computes with.
//!
//! The arithmetic is OpenCV's (`cvtColor(COLOR_YUV2RGB_NV12)`), with the
//! coefficients as parameters: `Y' = max(Y - offset, 0) * cy`, then
//! `R = (Y' + 2^19 + cvr * (V - 128)) >> 20`, `G = (Y' + 2^19 + cug * (U - 128) +
//! cvg * (V - 128)) >> 20`, `B = (Y' + 2^19 + cub * (U - 128)) >> 20`, each
//! saturated to 0..=255. BT.601 limited range takes OpenCV's constants (the
//! standard's matrix as usually published, to 3 decimals: 1.164, 1.596,
//! -0.391, -0.813, 2.018), so it stays bit-exact with `cvtColor`. Every other
//! standard takes its matrix from the standard's luma weights `Kr`, `Kb` in
//! f64 (below), each coefficient rounded to the nearest 2^-20: the reference
//! `tests/layout/test_layout_colour.py` writes once.

use std::fmt;
use std::str::FromStr;

use super::error::{bail, LayoutError, Result};

/// The YUV -> RGB matrix of a standard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Matrix {
    /// ITU-R BT.601 (SD video, JPEG, most webcams): Kr 0.299, Kb 0.114.
    #[default]
    Bt601,
    /// ITU-R BT.709 (HD video): Kr 0.2126, Kb 0.0722.
    Bt709,
    /// ITU-R BT.2020 non-constant luminance (UHD video): Kr 0.2627, Kb 0.0593.
    Bt2020,
}

/// Which codes the samples use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Range {
    /// Y in 16-235, U and V in 16-240 ("TV", "MPEG"): most video.
    #[default]
    Limited,
    /// Y, U and V in 0-255 ("PC", "JPEG").
    Full,
}

/// A matrix and a range; the default (BT.601 limited) is OpenCV's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Colour {
    pub matrix: Matrix,
    pub range: Range,
}

impl Matrix {
    pub fn name(self) -> &'static str {
        match self {
            Matrix::Bt601 => "bt601",
            Matrix::Bt709 => "bt709",
            Matrix::Bt2020 => "bt2020",
        }
    }

    /// The standard's luma weights (Kr, Kb).
    fn weights(self) -> (f64, f64) {
        match self {
            Matrix::Bt601 => (0.299, 0.114),
            Matrix::Bt709 => (0.2126, 0.0722),
            Matrix::Bt2020 => (0.2627, 0.0593),
        }
    }
}

impl Range {
    pub fn name(self) -> &'static str {
        match self {
            Range::Limited => "limited",
            Range::Full => "full",
        }
    }
}

impl fmt::Display for Matrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Matrix {
    type Err = LayoutError;

    fn from_str(name: &str) -> Result<Matrix> {
        Ok(match name.to_ascii_lowercase().replace(['.', '_', '-', ' '], "").as_str() {
            "bt601" | "601" | "smpte170m" | "bt470bg" => Matrix::Bt601,
            "bt709" | "709" => Matrix::Bt709,
            "bt2020" | "2020" | "bt2020nc" => Matrix::Bt2020,
            _ => bail!(
                "unknown colour matrix {name:?}: use \"bt601\" (SD, JPEG, webcams), \"bt709\" (HD) or \"bt2020\" (UHD)"
            ),
        })
    }
}

impl FromStr for Range {
    type Err = LayoutError;

    fn from_str(name: &str) -> Result<Range> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "limited" | "tv" | "mpeg" => Range::Limited,
            "full" | "pc" | "jpeg" => Range::Full,
            _ => {
                bail!("unknown colour range {name:?}: use \"limited\" (Y 16-235, most video) or \"full\" (0-255, JPEG)")
            }
        })
    }
}

/// How a YUV decoder rounds: `Exact` (the default) computes the standard's
/// fixed-point arithmetic above, bit-exact; `Fast` the 16-bit arithmetic of
/// [`Fast`], within 1 level of the standard's matrix in float on every
/// input, for 8-bit 4:2:0 sources (NV12, NV21, I420) into u8 pixels only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Rounding {
    #[default]
    Exact,
    Fast,
}

impl Rounding {
    pub fn name(self) -> &'static str {
        match self {
            Rounding::Exact => "exact",
            Rounding::Fast => "fast",
        }
    }
}

impl FromStr for Rounding {
    type Err = LayoutError;

    fn from_str(name: &str) -> Result<Rounding> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "exact" => Rounding::Exact,
            "fast" => Rounding::Fast,
            _ => bail!(
                "unknown rounding {name:?}: use \"exact\" (the default, bit-exact) or \"fast\" (NV12/NV21/I420 into u8 pixels, within 1 level of the standard's matrix)"
            ),
        })
    }
}

/// Bits after the point of the fixed-point coefficients.
pub(crate) const SHIFT: u32 = 20;
/// Half of the last bit kept: `>> SHIFT` then rounds to nearest.
pub(crate) const HALF: i32 = 1 << (SHIFT - 1);

/// The fixed-point arithmetic of one standard (see the module's comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Coefficients {
    /// Subtracted from Y, which is floored at 0 (16 limited, 0 full).
    pub y_offset: u8,
    pub cy: i32,
    pub cvr: i32,
    pub cvg: i32,
    pub cug: i32,
    pub cub: i32,
}

/// OpenCV's BT.601 limited-range constants (`ITUR_BT_601_*`).
pub(crate) const OPENCV_BT601: Coefficients =
    Coefficients { y_offset: 16, cy: 1_220_542, cvr: 1_673_527, cvg: -852_492, cug: -409_993, cub: 2_116_026 };

impl Colour {
    pub(crate) fn coefficients(self) -> Coefficients {
        if self == Colour::default() {
            return OPENCV_BT601;
        }
        // Limited range: Y spans 219 codes, U and V 224; full range: 255.
        match self.range {
            Range::Limited => self.derived(255.0 / 219.0, 255.0 / 224.0, 16),
            Range::Full => self.derived(1.0, 1.0, 0),
        }
    }

    /// The arithmetic of 10-bit samples (P010, I010): the same form, on
    /// 10-bit Y, U, V with chroma centred at 512, into 8-bit R, G, B, the
    /// matrix always the standard's (there is no OpenCV reference to
    /// follow). Limited range is the 8-bit codes times 4 (Y 64-940, U and V
    /// 64-960, ITU-T H.273), full range spans 0-1023; luma below the footroom
    /// is not floored (the 8-bit floor is OpenCV's).
    pub(crate) fn coefficients10(self) -> Coefficients {
        match self.range {
            Range::Limited => self.derived(255.0 / 876.0, 255.0 / 896.0, 64),
            Range::Full => self.derived(255.0 / 1023.0, 255.0 / 1023.0, 0),
        }
    }

    /// The matrix of the standard's luma weights, Y scaled by `luma` and U,
    /// V by `chroma`, each coefficient rounded to the nearest 2^-20.
    fn derived(self, luma: f64, chroma: f64, y_offset: u8) -> Coefficients {
        let (kr, kb) = self.matrix.weights();
        let kg = 1.0 - kr - kb;
        let fixed = |c: f64| (c * f64::from(1u32 << SHIFT)).round() as i32;
        Coefficients {
            y_offset,
            cy: fixed(luma),
            cvr: fixed(2.0 * (1.0 - kr) * chroma),
            cvg: fixed(-2.0 * kr * (1.0 - kr) / kg * chroma),
            cug: fixed(-2.0 * kb * (1.0 - kb) / kg * chroma),
            cub: fixed(2.0 * (1.0 - kb) * chroma),
        }
    }

    /// From names, e.g. ("bt709", "limited"); None: the default.
    pub fn parse(matrix: Option<&str>, range: Option<&str>) -> Result<Colour> {
        Ok(Colour {
            matrix: matrix.map(str::parse).transpose()?.unwrap_or_default(),
            range: range.map(str::parse).transpose()?.unwrap_or_default(),
        })
    }
}

impl fmt::Display for Colour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.matrix, self.range)
    }
}

/// One pixel, the scalar reference of every decoder.
#[inline(always)]
pub(crate) fn yuv_to_rgb(k: &Coefficients, y: u8, u: u8, v: u8) -> [u8; 3] {
    let (u, v) = (i32::from(u) - 128, i32::from(v) - 128);
    let y = (i32::from(y) - i32::from(k.y_offset)).max(0) * k.cy + HALF;
    let px = |t: i32| ((y + t) >> SHIFT).clamp(0, 255) as u8;
    [px(k.cvr * v), px(k.cvg * v + k.cug * u), px(k.cub * u)]
}

/// The fast rounding's arithmetic (`Rounding::Fast`), in 16-bit lanes: with
/// `mulhrs(a, b) = (a b + 2^14) >> 15` (`pmulhrsw`), each sample `S` enters
/// as the word `(S - 128) << 8` (its byte xored with 0x80, in the high byte;
/// Y floored at the offset first). Luma comes out in levels, rounded:
/// `Y' = mulhrs(y, cy_levels)`, `cy_levels` the luma coefficient to 2^-7
/// (exact in full range, where it is 1; within 0.0003 of 255/219 in limited
/// range, 0.04 levels at most over the centred luma's 128). Each chroma term
/// `t` (`mulhrs(v, cvr)`, `mulhrs(u, cug) + mulhrs(v, cvg)`, `mulhrs(u, cub)`,
/// coefficients to 2^-13, so in 1/64 levels) takes back the `128 cy` the
/// centred luma lost (`cy` itself in these units) and is rounded to levels
/// once, `(t + cy + 32) >> 6`; a channel is `Y' + term` saturated to a byte.
/// Two roundings to levels, each within half a level, plus the coefficients'
/// own error: within 1.5 levels of the float value, so within 1 level of it
/// rounded (the proofs below hold it on every input). The roundings sit where
/// a kernel does them once a chroma pair and once a luma sample, never once a
/// channel and pixel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fast {
    pub y_offset: u8,
    /// The luma coefficient to 2^-7: `mulhrs` of a luma word by it gives levels.
    pub cy_levels: i16,
    pub cy: i16,
    pub cvr: i16,
    pub cvg: i16,
    pub cug: i16,
    pub cub: i16,
}

impl Fast {
    /// From the exact coefficients (2^-20 units), rounded to the nearest.
    pub(crate) fn of(k: &Coefficients) -> Fast {
        // Every standard's coefficients are below 4 in magnitude, so words
        // hold them, and no sum leaves i16.
        let c = |c: i32| ((c + (1 << 6)) >> 7) as i16;
        let levels = ((k.cy + (1 << 12)) >> 13) as i16;
        Fast {
            y_offset: k.y_offset,
            cy_levels: levels,
            cy: c(k.cy),
            cvr: c(k.cvr),
            cvg: c(k.cvg),
            cug: c(k.cug),
            cub: c(k.cub),
        }
    }

    /// A chroma term in 1/64 levels, with `128 cy` given back, rounded to levels.
    #[inline(always)]
    pub(crate) fn term(&self, t: i16) -> i16 {
        t.wrapping_add(self.cy + 32) >> 6
    }
}

/// x86's `pmulhrsw` on one pair of words: `(a b + 2^14) >> 15`.
#[inline(always)]
pub(crate) fn mulhrs(a: i16, b: i16) -> i16 {
    ((i32::from(a) * i32::from(b) + (1 << 14)) >> 15) as i16
}

/// One pixel in the fast rounding (`Fast`), the scalar reference of every
/// fast decoder.
#[inline(always)]
pub(crate) fn yuv_to_rgb_fast(f: &Fast, y: u8, u: u8, v: u8) -> [u8; 3] {
    let word = |s: u8| i16::from((s ^ 0x80) as i8) << 8;
    let (y, u, v) = (mulhrs(word(y.saturating_sub(f.y_offset)), f.cy_levels), word(u), word(v));
    let px = |t: i16| y.saturating_add(f.term(t)).clamp(0, 255) as u8;
    [px(mulhrs(v, f.cvr)), px(mulhrs(u, f.cug).wrapping_add(mulhrs(v, f.cvg))), px(mulhrs(u, f.cub))]
}

/// One pixel of 10-bit samples (values 0..=1023), the scalar reference of
/// every 10-bit decoder: `coefficients10`'s arithmetic.
#[inline(always)]
pub(crate) fn yuv10_to_rgb(k: &Coefficients, y: u16, u: u16, v: u16) -> [u8; 3] {
    let (u, v) = (i32::from(u) - 512, i32::from(v) - 512);
    let y = (i32::from(y) - i32::from(k.y_offset)) * k.cy + HALF;
    let px = |t: i32| ((y + t) >> SHIFT).clamp(0, 255) as u8;
    [px(k.cvr * v), px(k.cvg * v + k.cug * u), px(k.cub * u)]
}

/// The six standards (three matrices, two ranges), for tests.
#[cfg(test)]
pub(crate) const STANDARDS: [Colour; 6] = [
    Colour { matrix: Matrix::Bt601, range: Range::Limited },
    Colour { matrix: Matrix::Bt601, range: Range::Full },
    Colour { matrix: Matrix::Bt709, range: Range::Limited },
    Colour { matrix: Matrix::Bt709, range: Range::Full },
    Colour { matrix: Matrix::Bt2020, range: Range::Limited },
    Colour { matrix: Matrix::Bt2020, range: Range::Full },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_unknown_ones_are_refused() {
        assert_eq!(
            Colour::parse(Some("BT.709"), Some("full")).unwrap(),
            Colour { matrix: Matrix::Bt709, range: Range::Full }
        );
        assert_eq!(Colour::parse(None, None).unwrap(), Colour::default());
        let e = Colour::parse(Some("bt999"), None).unwrap_err();
        assert!(e.message.contains("unknown colour matrix \"bt999\""), "{e}");
        let e = Colour::parse(None, Some("wide")).unwrap_err();
        assert!(e.message.contains("unknown colour range \"wide\""), "{e}");
    }

    /// The derived BT.601 limited matrix is the standard's; OpenCV's is it
    /// rounded to 3 decimals, so the two are within 0.0005 of each other.
    #[test]
    fn opencv_bt601_is_the_standard_to_three_decimals() {
        let (kr, kb) = Matrix::Bt601.weights();
        let kg = 1.0 - kr - kb;
        let exact = [255.0 / 219.0, 2.0 * (1.0 - kr) * 255.0 / 224.0, -2.0 * kr * (1.0 - kr) / kg * 255.0 / 224.0];
        let k = OPENCV_BT601;
        for (c, e) in [k.cy, k.cvr, k.cvg].iter().zip(exact) {
            assert!((f64::from(*c) / f64::from(1u32 << SHIFT) - e).abs() < 5e-4, "{c} vs {e}");
        }
    }

    /// The standard's matrix in f64 (luma floored at the offset, as every
    /// decoder does), rounded and saturated: what the fast rounding is bound to.
    fn float_rgb(colour: Colour, y: u8, u: u8, v: u8) -> [f64; 3] {
        let (kr, kb) = colour.matrix.weights();
        let kg = 1.0 - kr - kb;
        let (luma, chroma, offset) =
            if colour.range == Range::Limited { (255.0 / 219.0, 255.0 / 224.0, 16) } else { (1.0, 1.0, 0) };
        let y = f64::from(y.saturating_sub(offset)) * luma;
        let (u, v) = ((f64::from(u) - 128.0) * chroma, (f64::from(v) - 128.0) * chroma);
        let px = |x: f64| x.round().clamp(0.0, 255.0);
        [
            px(y + 2.0 * (1.0 - kr) * v),
            px(y - 2.0 * kr * (1.0 - kr) / kg * v - 2.0 * kb * (1.0 - kb) / kg * u),
            px(y + 2.0 * (1.0 - kb) * u),
        ]
    }

    /// The largest difference, per channel, between the fast rounding and
    /// the float matrix, and between it and the exact arithmetic, over the
    /// (Y, U, V) inputs `inputs` yields.
    fn fast_bound(colour: Colour, inputs: impl Iterator<Item = u32>) -> (f64, i32) {
        let k = colour.coefficients();
        let f = Fast::of(&k);
        let (mut float, mut exact) = (0.0f64, 0);
        for i in inputs {
            let (y, u, v) = ((i >> 16) as u8, (i >> 8) as u8, i as u8);
            let fast = yuv_to_rgb_fast(&f, y, u, v);
            for ((a, b), c) in fast.iter().zip(float_rgb(colour, y, u, v)).zip(yuv_to_rgb(&k, y, u, v)) {
                float = float.max((f64::from(*a) - b).abs());
                exact = exact.max((i32::from(*a) - i32::from(c)).abs());
            }
        }
        (float, exact)
    }

    /// The documented bound of the fast rounding, on a sample of inputs in
    /// every standard (the exhaustive proof: `fast_rounding_bound_every_input`).
    #[test]
    fn fast_rounding_is_within_one_level_sampled() {
        for colour in STANDARDS {
            // Every 2^24 / 9973-th input, a prime step, and the corners.
            let sample = (0..1u32 << 24).step_by(9973).chain([0, 0xFF_FFFF, 0x00_FF00, 0xFF_00FF]);
            let (float, exact) = fast_bound(colour, sample);
            assert!(float <= 1.0 && exact <= 1, "{colour}: {float} from the float matrix, {exact} from the exact path");
        }
    }

    /// The bounds over all 2^24 inputs in every standard (release: a second;
    /// `cargo test --release --lib every_input -- --ignored`).
    #[test]
    #[ignore]
    fn fast_rounding_bound_every_input() {
        for colour in STANDARDS {
            let (float, exact) = fast_bound(colour, 0..1u32 << 24);
            assert!(float <= 1.0 && exact <= 1, "{colour}: {float} from the float matrix, {exact} from the exact path");
        }
    }

    /// Its words hold every standard's coefficients (see `Fast::of`).
    #[test]
    fn fast_coefficients_fit_their_words() {
        for colour in STANDARDS {
            let k = colour.coefficients();
            let f = Fast::of(&k);
            for (c, w) in [(k.cy, f.cy), (k.cvr, f.cvr), (k.cvg, f.cvg), (k.cug, f.cug), (k.cub, f.cub)] {
                assert!(c.abs() < 4 << 20 && i32::from(w) == (c + 64) >> 7, "{colour}");
            }
            assert_eq!(i32::from(f.cy_levels), (k.cy + 4096) >> 13, "{colour}");
        }
    }

    /// 10-bit: black, white and grey stay themselves; no sum overflows i32.
    #[test]
    fn ten_bit_neutral_colours_stay_neutral() {
        for matrix in [Matrix::Bt601, Matrix::Bt709, Matrix::Bt2020] {
            for range in [Range::Limited, Range::Full] {
                let k = Colour { matrix, range }.coefficients10();
                // Grey 128: Y 64 + 128 * 876 / 255 = 503.7 limited, 128 * 1023 / 255 = 513.5 full.
                let (black, white, grey) = if range == Range::Full { (0, 1023, 514) } else { (64, 940, 504) };
                assert_eq!(yuv10_to_rgb(&k, black, 512, 512), [0; 3], "{matrix} {range}");
                assert_eq!(yuv10_to_rgb(&k, white, 512, 512), [255; 3], "{matrix} {range}");
                assert_eq!(yuv10_to_rgb(&k, grey, 512, 512), [128; 3], "{matrix} {range}");
                let extreme = 1023 * i64::from(k.cy) + 512 * i64::from(k.cub.max(k.cvr)) + i64::from(HALF);
                assert!(extreme < i64::from(i32::MAX));
            }
        }
    }

    /// Full-range white, black and grey stay themselves in every matrix; no
    /// sum overflows i32.
    #[test]
    fn neutral_colours_stay_neutral() {
        for matrix in [Matrix::Bt601, Matrix::Bt709, Matrix::Bt2020] {
            for range in [Range::Limited, Range::Full] {
                let k = Colour { matrix, range }.coefficients();
                let (black, white) = if range == Range::Full { (0, 255) } else { (16, 235) };
                assert_eq!(yuv_to_rgb(&k, black, 128, 128), [0; 3], "{matrix} {range}");
                assert_eq!(yuv_to_rgb(&k, white, 128, 128), [255; 3], "{matrix} {range}");
                let extreme = 255 * i64::from(k.cy) + 128 * i64::from(k.cub.max(k.cvr)) + i64::from(HALF);
                assert!(extreme < i64::from(i32::MAX));
            }
        }
    }
}
