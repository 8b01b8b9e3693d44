//! Per-axis tap tables: for each destination index, which source indices it
//! reads and with which weights, computed once per call exactly as OpenCV's
//! `resize` computes them (f64 positions, f32 weights, 11-bit fixed point for
//! bilinear), so that the u8 results agree with `cv2.resize`.

use super::geometry::Interpolation;

/// OpenCV's `INTER_RESIZE_COEF_BITS`: bilinear weights are multiples of 1/2048.
pub(crate) const COEF_BITS: u32 = 11;
const COEF_SCALE: f32 = (1 << COEF_BITS) as f32;

/// Two source indices and their fixed-point weights per destination index.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Linear {
    pub index: Vec<[u32; 2]>,
    pub weight: Vec<[i16; 2]>,
}

impl Linear {
    /// The source index of each destination index, when every one reads a
    /// single source index with the whole weight.
    fn single(&self) -> Option<Vec<u32>> {
        const ONE: i16 = 1 << COEF_BITS;
        self.index
            .iter()
            .zip(&self.weight)
            .map(|(ix, w)| match *w {
                [ONE, 0] => Some(ix[0]),
                [0, ONE] => Some(ix[1]),
                _ => None,
            })
            .collect()
    }
}

/// A run of weighted source indices per destination index (area averaging).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Area {
    /// Taps of destination index d: `start[d]..start[d + 1]`.
    pub start: Vec<u32>,
    pub index: Vec<u32>,
    pub weight: Vec<f32>,
}

/// How the whole resize runs (both axes decide together, as in OpenCV).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Method {
    /// One source pixel per destination pixel (also the identity, when sizes match).
    Nearest { x: Vec<u32>, y: Vec<u32> },
    /// Separable two-tap filter in fixed point, horizontal pass first.
    Linear { x: Linear, y: Linear },
    /// Integer shrink by `kx` x `ky`: the mean of each block.
    AreaBlocks { kx: usize, ky: usize },
    /// Fractional shrink: coverage-weighted means, in f32.
    Area { x: Area, y: Area },
}

/// `saturate_cast<int>(double)`: round half to even.
fn round_i(v: f64) -> i64 {
    v.round_ties_even() as i64
}

impl Method {
    /// The method for a `src` → `dst` resize of this interpolation.
    pub(crate) fn new(interpolation: Interpolation, src: (usize, usize), dst: (usize, usize)) -> Method {
        if src == dst {
            return Method::Nearest { x: (0..dst.0 as u32).collect(), y: (0..dst.1 as u32).collect() };
        }
        let inv_scale = [dst.0 as f64 / src.0 as f64, dst.1 as f64 / src.1 as f64];
        let scale = [1.0 / inv_scale[0], 1.0 / inv_scale[1]];
        let iscale = [round_i(scale[0]), round_i(scale[1])];
        let integral =
            (scale[0] - iscale[0] as f64).abs() < f64::EPSILON && (scale[1] - iscale[1] as f64).abs() < f64::EPSILON;
        let blocks = Method::AreaBlocks { kx: iscale[0] as usize, ky: iscale[1] as usize };
        match interpolation {
            Interpolation::Nearest => {
                Method::Nearest { x: nearest(src.0, dst.0, scale[0]), y: nearest(src.1, dst.1, scale[1]) }
            }
            // OpenCV: a bilinear halving is the 2x2 mean.
            Interpolation::Bilinear if integral && iscale == [2, 2] => blocks,
            Interpolation::Area if scale[0] >= 1.0 && scale[1] >= 1.0 => {
                if integral {
                    blocks
                } else {
                    Method::Area { x: area(src.0, dst.0, scale[0]), y: area(src.1, dst.1, scale[1]) }
                }
            }
            // OpenCV emulates area enlarging by bilinear with area-based weights.
            _ => {
                let area_mode = interpolation == Interpolation::Area;
                let x = linear(src.0, dst.0, scale[0], inv_scale[0], area_mode, true);
                let y = linear(src.1, dst.1, scale[1], inv_scale[1], area_mode, false);
                // An odd integer shrink (1080p -> 640x360 is 3x) puts every tap on
                // a source pixel: OpenCV's arithmetic then returns that pixel
                // exactly (v * 2048 >> 4, * 2048 >> 16, (4v + 2) >> 2 = v), so
                // picking it is the same result without the arithmetic.
                match (x.single(), y.single()) {
                    (Some(x), Some(y)) => Method::Nearest { x, y },
                    _ => Method::Linear { x, y },
                }
            }
        }
    }

    /// Source rows read per destination row, at most (for sizing work).
    pub(crate) fn rows_per_output_row(&self, src_rows: usize, dst_rows: usize) -> usize {
        match self {
            Method::Nearest { .. } => 1,
            Method::Linear { .. } => 2,
            Method::AreaBlocks { ky, .. } => *ky,
            Method::Area { .. } => src_rows.div_ceil(dst_rows) + 1,
        }
    }
}

/// `INTER_NEAREST`: `min(floor(d * scale), n - 1)`.
fn nearest(src: usize, dst: usize, scale: f64) -> Vec<u32> {
    (0..dst).map(|d| ((d as f64 * scale).floor() as usize).min(src - 1) as u32).collect()
}

/// `INTER_LINEAR` positions (or `INTER_AREA`'s enlarging variant), as
/// OpenCV's `resize` computes them. Along x, positions outside the source
/// are clamped with the weight moved onto the edge pixel; along y, each tap's
/// row is clamped and the weights kept (OpenCV's row fetch does that).
fn linear(src: usize, dst: usize, scale: f64, inv_scale: f64, area_mode: bool, clamp_weights: bool) -> Linear {
    let last = src as i64 - 1;
    let mut index = Vec::with_capacity(dst);
    let mut weight = Vec::with_capacity(dst);
    for d in 0..dst {
        let (mut s, mut f);
        if area_mode {
            s = (d as f64 * scale).floor() as i64;
            let fx = ((d + 1) as f64 - (s + 1) as f64 * inv_scale) as f32;
            f = if fx <= 0.0 { 0.0 } else { fx - fx.floor() };
        } else {
            let fx = ((d as f64 + 0.5) * scale - 0.5) as f32;
            s = fx.floor() as i64;
            f = fx - s as f32;
        }
        if clamp_weights {
            if s < 0 {
                (s, f) = (0, 0.0);
            }
            if s >= last {
                (s, f) = (last, 0.0);
            }
        }
        let w0 = ((1.0 - f) * COEF_SCALE).round_ties_even() as i16;
        let w1 = (f * COEF_SCALE).round_ties_even() as i16;
        let mut ix = [s.clamp(0, last) as u32, (s + 1).clamp(0, last) as u32];
        // A tap of weight 0 adds exactly 0 in OpenCV's arithmetic too (`(v * 0) >> 16`):
        // point it at the other tap, so that its pixel or row is never read
        // (a 3x shrink then reads one row in three, not two). Along x only the
        // second: the x86 x pass loads the pixel after the first as a pair.
        if w1 == 0 {
            ix[1] = ix[0];
        } else if w0 == 0 && !clamp_weights {
            ix[0] = ix[1];
        }
        index.push(ix);
        weight.push([w0, w1]);
    }
    Linear { index, weight }
}

/// `INTER_AREA` shrinking: OpenCV's `computeResizeAreaTab`.
fn area(src: usize, dst: usize, scale: f64) -> Area {
    let mut table = Area { start: Vec::with_capacity(dst + 1), index: Vec::new(), weight: Vec::new() };
    for d in 0..dst {
        table.start.push(table.index.len() as u32);
        let fs1 = d as f64 * scale;
        let fs2 = fs1 + scale;
        let cell = scale.min(src as f64 - fs1);
        let s2 = (fs2.floor() as i64).min(src as i64 - 1);
        let s1 = (fs1.ceil() as i64).min(s2);
        if s1 as f64 - fs1 > 1e-3 {
            table.index.push((s1 - 1) as u32);
            table.weight.push(((s1 as f64 - fs1) / cell) as f32);
        }
        for s in s1..s2 {
            table.index.push(s as u32);
            table.weight.push((1.0 / cell) as f32);
        }
        if fs2 - s2 as f64 > 1e-3 {
            table.index.push(s2 as u32);
            table.weight.push(((fs2 - s2 as f64).min(1.0).min(cell) / cell) as f32);
        }
    }
    table.start.push(table.index.len() as u32);
    table
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Every index is inside the source, bilinear weights sum to one
        /// (2048), area weights to one (within f32 rounding), and positions
        /// never go backwards (the row ring relies on it).
        #[test]
        fn tables_stay_inside_and_sum_to_one(src in 1usize..3000, dst in 1usize..700, area_mode in any::<bool>()) {
            let scale = src as f64 / dst as f64;
            for clamp in [true, false] {
                let t = linear(src, dst, scale, dst as f64 / src as f64, area_mode, clamp);
                for (i, (ix, w)) in t.index.iter().zip(&t.weight).enumerate() {
                    prop_assert!(ix[0] < src as u32 && ix[1] < src as u32);
                    prop_assert_eq!(w[0] as i32 + w[1] as i32, 2048);
                    if i > 0 {
                        prop_assert!(ix[0] >= t.index[i - 1][0]);
                    }
                }
            }
            if src >= dst {
                let a = area(src, dst, scale);
                for d in 0..dst {
                    let taps = a.start[d] as usize..a.start[d + 1] as usize;
                    prop_assert!(!taps.is_empty());
                    let sum: f64 = a.weight[taps.clone()].iter().map(|&w| w as f64).sum();
                    prop_assert!((sum - 1.0).abs() < 1e-3, "{sum}");
                    prop_assert!(a.index[taps].iter().all(|&i| i < src as u32));
                }
            }
            for &i in &nearest(src, dst, scale) {
                prop_assert!(i < src as u32);
            }
        }
    }

    #[test]
    fn methods_follow_opencv() {
        use Interpolation::*;
        assert!(matches!(Method::new(Bilinear, (8, 8), (4, 4)), Method::AreaBlocks { kx: 2, ky: 2 }));
        assert!(matches!(Method::new(Area, (9, 6), (3, 2)), Method::AreaBlocks { kx: 3, ky: 3 }));
        assert!(matches!(Method::new(Area, (10, 6), (3, 2)), Method::Area { .. }));
        assert!(matches!(Method::new(Area, (10, 6), (20, 2)), Method::Linear { .. }));
        assert!(matches!(Method::new(Bilinear, (10, 6), (10, 6)), Method::Nearest { .. }));
        // Half-pixel centres: enlarging 2x reads 3/4 of one pixel and 1/4 of the next.
        let Method::Linear { x, .. } = Method::new(Bilinear, (4, 4), (8, 8)) else { panic!() };
        assert_eq!((x.index[1], x.weight[1]), ([0, 1], [1536, 512]));
        assert_eq!((x.index[0], x.weight[0]), ([0, 0], [2048, 0])); // a weight of 0 reads nothing
                                                                    // An odd integer shrink samples the centre pixel of each block: bilinear picks it.
        let Method::Nearest { x, y } = Method::new(Bilinear, (1920, 1080), (640, 360)) else { panic!() };
        assert!(x.iter().enumerate().all(|(d, &i)| i == 3 * d as u32 + 1));
        assert!(y.iter().enumerate().all(|(d, &i)| i == 3 * d as u32 + 1));
        // Only when both axes do: 3x along x, 2.5x along y stays bilinear.
        assert!(matches!(Method::new(Bilinear, (30, 25), (10, 10)), Method::Linear { .. }));
    }
}
