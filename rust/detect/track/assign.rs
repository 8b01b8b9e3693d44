//! Costs and the assignment of tracks to detections: Ultralytics'
//! `trackers/utils/matching.py` (`iou_distance`, `fuse_score`, `linear_assignment`
//! as `lap.lapjv(..., extend_cost=True, cost_limit=...)`).

use super::bbox::Bbox;

/// Row-major cost matrix `rows x cols`.
pub(super) struct Costs {
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) values: Vec<f64>,
}

impl Costs {
    pub(super) fn iou_distance(tracks: &[Bbox], dets: &[Bbox]) -> Self {
        let values = tracks.iter().flat_map(|t| dets.iter().map(move |d| f64::from(1.0 - t.overlap(d)))).collect();
        Self { rows: tracks.len(), cols: dets.len(), values }
    }

    /// Ultralytics' `fuse_score`: 1 - (1 - cost) * score, in f32 as its arrays are.
    pub(super) fn fuse_score(mut self, scores: &[f32]) -> Self {
        if self.cols > 0 {
            for row in self.values.chunks_mut(self.cols) {
                for (v, &s) in row.iter_mut().zip(scores) {
                    *v = f64::from(1.0 - (1.0 - *v as f32) * s);
                }
            }
        }
        self
    }
}

/// The outcome of an assignment: matched (row, col) pairs in row order, and the rows
/// and columns left alone.
pub(super) struct Assignment {
    pub(super) matches: Vec<(usize, usize)>,
    pub(super) unmatched_rows: Vec<usize>,
    pub(super) unmatched_cols: Vec<usize>,
}

/// `lap.lapjv(cost, extend_cost=True, cost_limit=limit)`: the cheapest assignment
/// in which leaving a row or a column unmatched costs `limit / 2`, so a pair is
/// matched only when that is cheaper than leaving both alone. Solved exactly on the
/// extended (rows + cols) square matrix.
pub(super) fn assign(costs: &Costs, limit: f64) -> Assignment {
    let (rows, cols) = (costs.rows, costs.cols);
    if rows == 0 || cols == 0 {
        return Assignment {
            matches: vec![],
            unmatched_rows: (0..rows).collect(),
            unmatched_cols: (0..cols).collect(),
        };
    }
    let n = rows + cols;
    let extended = |i: usize, j: usize| -> f64 {
        match (i < rows, j < cols) {
            (true, true) => costs.values[i * cols + j],
            (false, false) => 0.0,
            _ => limit / 2.0,
        }
    };
    let row_of_col = min_cost_assignment(n, extended);
    let mut col_of_row = vec![usize::MAX; rows];
    let mut unmatched_cols = vec![];
    for (j, &i) in row_of_col.iter().enumerate().take(cols) {
        if i < rows {
            col_of_row[i] = j;
        } else {
            unmatched_cols.push(j);
        }
    }
    let mut matches = vec![];
    let mut unmatched_rows = vec![];
    for (i, &j) in col_of_row.iter().enumerate() {
        if j == usize::MAX {
            unmatched_rows.push(i);
        } else {
            matches.push((i, j));
        }
    }
    Assignment { matches, unmatched_rows, unmatched_cols }
}

/// An exact minimum-cost perfect assignment of an `n x n` matrix by shortest
/// augmenting paths with potentials (the Jonker-Volgenant family, O(n^3)); returns
/// the row assigned to each column. A few lines instead of a dependency:
/// `pathfinding`'s Kuhn-Munkres needs integer (`Ord`) weights, the `lapjv` crate
/// brings ndarray. Non-finite costs are treated as very large.
fn min_cost_assignment(n: usize, cost: impl Fn(usize, usize) -> f64) -> Vec<usize> {
    const NONE: usize = usize::MAX;
    let finite = |v: f64| if v.is_finite() { v } else { 1e18 };
    // 1-based arrays with a virtual column 0, as in the classic formulation.
    let mut u = vec![0.0f64; n + 1];
    let mut v = vec![0.0f64; n + 1];
    let mut row_of = vec![NONE; n + 1]; // row matched to column j (1-based rows)
    let mut way = vec![0usize; n + 1];
    for i in 1..=n {
        row_of[0] = i;
        let mut j0 = 0usize;
        let mut min_to = vec![f64::INFINITY; n + 1];
        let mut used = vec![false; n + 1];
        loop {
            used[j0] = true;
            let i0 = row_of[j0];
            let mut delta = f64::INFINITY;
            let mut j1 = 0usize;
            for j in 1..=n {
                if !used[j] {
                    let reduced = finite(cost(i0 - 1, j - 1)) - u[i0] - v[j];
                    if reduced < min_to[j] {
                        min_to[j] = reduced;
                        way[j] = j0;
                    }
                    if min_to[j] < delta {
                        delta = min_to[j];
                        j1 = j;
                    }
                }
            }
            for j in 0..=n {
                if used[j] {
                    u[row_of[j]] += delta;
                    v[j] -= delta;
                } else {
                    min_to[j] -= delta;
                }
            }
            j0 = j1;
            if row_of[j0] == NONE {
                break;
            }
        }
        loop {
            let j1 = way[j0];
            row_of[j0] = row_of[j1];
            j0 = j1;
            if j0 == 0 {
                break;
            }
        }
    }
    row_of[1..].iter().map(|&i| i - 1).collect()
}
