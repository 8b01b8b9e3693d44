//! The Kalman filter of a track, state (x, y, a, h, vx, vy, va, vh): Ultralytics'
//! `KalmanFilterXYAH` (`ultralytics/trackers/utils/kalman_filter.py`), in f64.

type Vec8 = [f64; 8];
type Mat8 = [[f64; 8]; 8];

const STD_POSITION: f64 = 1.0 / 20.0;
const STD_VELOCITY: f64 = 1.0 / 160.0;

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Kalman {
    pub(super) mean: Vec8,
    pub(super) cov: Mat8,
}

// Small fixed-size matrix algebra reads best with indices.
#[allow(clippy::needless_range_loop)]
impl Kalman {
    pub(super) fn initiate(xyah: [f32; 4]) -> Self {
        let h = f64::from(xyah[3]);
        let std = [
            2.0 * STD_POSITION * h,
            2.0 * STD_POSITION * h,
            1e-2,
            2.0 * STD_POSITION * h,
            10.0 * STD_VELOCITY * h,
            10.0 * STD_VELOCITY * h,
            1e-5,
            10.0 * STD_VELOCITY * h,
        ];
        let mut mean = [0.0; 8];
        let mut cov = [[0.0; 8]; 8];
        for i in 0..4 {
            mean[i] = f64::from(xyah[i]);
        }
        for i in 0..8 {
            cov[i][i] = std[i] * std[i];
        }
        Self { mean, cov }
    }

    /// One step of constant velocity: x += v; P = F P F' + Q.
    pub(super) fn predict(&mut self) {
        let h = self.mean[3];
        let q = [
            STD_POSITION * h,
            STD_POSITION * h,
            1e-2,
            STD_POSITION * h,
            STD_VELOCITY * h,
            STD_VELOCITY * h,
            1e-5,
            STD_VELOCITY * h,
        ];
        for i in 0..4 {
            self.mean[i] += self.mean[i + 4];
        }
        // F = [[I, I], [0, I]]: rows first (F P), then columns ((F P) F').
        let p = &mut self.cov;
        for i in 0..4 {
            for j in 0..8 {
                p[i][j] += p[i + 4][j];
            }
        }
        for row in p.iter_mut() {
            for j in 0..4 {
                row[j] += row[j + 4];
            }
        }
        for (i, qi) in q.iter().enumerate() {
            p[i][i] += qi * qi;
        }
    }

    /// The measurement (x, y, a, h) folded in: the gain solved through the
    /// Cholesky factor of the innovation covariance, as Ultralytics does.
    pub(super) fn update(&mut self, xyah: [f32; 4]) {
        let h = self.mean[3];
        let r = [STD_POSITION * h, STD_POSITION * h, 1e-1, STD_POSITION * h];
        // S = H P H' + R, with H = [I 0]: the top-left block of P.
        let mut s = [[0.0f64; 4]; 4];
        for i in 0..4 {
            for j in 0..4 {
                s[i][j] = self.cov[i][j];
            }
            s[i][i] += r[i] * r[i];
        }
        let l = cholesky4(&s);
        // K' = S^-1 (P H')' = S^-1 P[0..4][..]: 4 x 8.
        let mut kt = [[0.0f64; 8]; 4];
        for c in 0..8 {
            let b = [self.cov[0][c], self.cov[1][c], self.cov[2][c], self.cov[3][c]];
            let x = cholesky_solve4(&l, b);
            for i in 0..4 {
                kt[i][c] = x[i];
            }
        }
        let innovation: [f64; 4] = std::array::from_fn(|i| f64::from(xyah[i]) - self.mean[i]);
        for c in 0..8 {
            self.mean[c] += (0..4).map(|i| innovation[i] * kt[i][c]).sum::<f64>();
        }
        // P -= K S K'.
        let mut sk = [[0.0f64; 8]; 4]; // S K'
        for i in 0..4 {
            for c in 0..8 {
                sk[i][c] = (0..4).map(|m| s[i][m] * kt[m][c]).sum();
            }
        }
        for a in 0..8 {
            for b in 0..8 {
                self.cov[a][b] -= (0..4).map(|i| kt[i][a] * sk[i][b]).sum::<f64>();
            }
        }
    }

    /// The estimate as corners (x1, y1, x2, y2).
    pub(super) fn xyxy(&self) -> [f32; 4] {
        let [x, y, a, h] = [self.mean[0], self.mean[1], self.mean[2], self.mean[3]];
        let w = a * h;
        let (left, top) = (x - w / 2.0, y - h / 2.0);
        [left as f32, top as f32, (left + w) as f32, (top + h) as f32]
    }

    /// The estimate as centre and size, through the corner as Ultralytics' `xywh` goes.
    pub(super) fn xywh(&self) -> [f64; 4] {
        let [x, y, a, h] = [self.mean[0], self.mean[1], self.mean[2], self.mean[3]];
        let w = a * h;
        let (left, top) = (x - w / 2.0, y - h / 2.0);
        [left + w / 2.0, top + h / 2.0, w, h]
    }
}

/// The lower Cholesky factor of a symmetric positive definite 4x4 matrix (a
/// covariance plus a positive diagonal: always definite; a non-positive pivot,
/// only possible with non-finite input, is clamped rather than panicking).
#[allow(clippy::needless_range_loop)]
fn cholesky4(a: &[[f64; 4]; 4]) -> [[f64; 4]; 4] {
    let mut l = [[0.0f64; 4]; 4];
    for i in 0..4 {
        for j in 0..=i {
            let sum: f64 = (0..j).map(|k| l[i][k] * l[j][k]).sum();
            if i == j {
                l[i][j] = (a[i][i] - sum).max(f64::MIN_POSITIVE).sqrt();
            } else {
                l[i][j] = (a[i][j] - sum) / l[j][j];
            }
        }
    }
    l
}

#[allow(clippy::needless_range_loop)]
fn cholesky_solve4(l: &[[f64; 4]; 4], b: [f64; 4]) -> [f64; 4] {
    let mut y = [0.0f64; 4];
    for i in 0..4 {
        y[i] = (b[i] - (0..i).map(|k| l[i][k] * y[k]).sum::<f64>()) / l[i][i];
    }
    let mut x = [0.0f64; 4];
    for i in (0..4).rev() {
        x[i] = (y[i] - (i + 1..4).map(|k| l[k][i] * x[k]).sum::<f64>()) / l[i][i];
    }
    x
}
