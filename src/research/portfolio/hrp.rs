//! Hierarchical risk parity (López de Prado, 2016), step for step as
//! PyPortfolioOpt's `HRPOpt` with single linkage runs it, so the weights
//! agree to rounding:
//!
//! 1. distance d_ij = √(clip((1 − ρ_ij)/2, 0, 1));
//! 2. single linkage as scipy builds it: Prim's minimum spanning tree
//!    (recording each new node with the node added before it), its edges
//!    sorted stably by distance, clusters labelled with a union-find
//!    (smaller label first);
//! 3. the quasi-diagonal order: the leaves of the tree, left before right;
//! 4. recursive bisection of that order into halves, each half weighted by
//!    the inverse of its inverse-variance portfolio's variance.

use super::covariance::Matrix;

/// HRP weights for covariance `cov` (any scale: only ratios matter).
pub(crate) fn hrp_weights(cov: &Matrix) -> Vec<f64> {
    let n = cov.n;
    if n == 1 {
        return vec![1.0];
    }
    let order = quasi_diagonal(&linkage(&distances(cov), n), n);
    bisect(cov, &order)
}

/// The condensed distance of each pair i < j, in scipy's order.
fn distances(cov: &Matrix) -> Vec<f64> {
    let n = cov.n;
    let vols = cov.vols();
    let mut d = Vec::with_capacity(n * (n - 1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            let rho = cov.at(i, j) / (vols[i] * vols[j]);
            d.push(((1.0 - rho) / 2.0).clamp(0.0, 1.0).sqrt());
        }
    }
    d
}

fn condensed(n: usize, i: usize, j: usize) -> usize {
    let (i, j) = if i < j { (i, j) } else { (j, i) };
    n * i - i * (i + 1) / 2 + (j - i - 1)
}

/// One merge: the two clusters (smaller label first) and their distance.
#[derive(Clone, Copy, Debug)]
struct Merge {
    a: usize,
    b: usize,
    dist: f64,
}

/// Single linkage, as scipy's `mst_single_linkage` and `label`.
fn linkage(dist: &[f64], n: usize) -> Vec<Merge> {
    let mut merged = vec![false; n];
    let mut best = vec![f64::INFINITY; n];
    let mut z = Vec::with_capacity(n - 1);
    let (mut x, mut y) = (0usize, 0usize);
    for _ in 0..n - 1 {
        let mut current = f64::INFINITY;
        merged[x] = true;
        for i in 0..n {
            if merged[i] {
                continue;
            }
            let d = dist[condensed(n, x, i)];
            if best[i] > d {
                best[i] = d;
            }
            if best[i] < current {
                y = i;
                current = best[i];
            }
        }
        z.push(Merge {
            a: x,
            b: y,
            dist: current,
        });
        x = y;
    }
    // A stable sort, as numpy's mergesort.
    z.sort_by(|p, q| p.dist.total_cmp(&q.dist));
    let mut parent: Vec<usize> = (0..2 * n - 1).collect();
    let find = |parent: &mut Vec<usize>, mut v: usize| {
        let mut root = v;
        while parent[root] != root {
            root = parent[root];
        }
        while parent[v] != root {
            let next = parent[v];
            parent[v] = root;
            v = next;
        }
        root
    };
    for (k, m) in z.iter_mut().enumerate() {
        let (ra, rb) = (find(&mut parent, m.a), find(&mut parent, m.b));
        let label = n + k;
        parent[ra] = label;
        parent[rb] = label;
        (m.a, m.b) = if ra < rb { (ra, rb) } else { (rb, ra) };
    }
    z
}

/// The leaves from the root down, left child first.
fn quasi_diagonal(z: &[Merge], n: usize) -> Vec<usize> {
    let mut out = Vec::with_capacity(n);
    let mut stack = vec![2 * n - 2];
    while let Some(c) = stack.pop() {
        if c < n {
            out.push(c);
        } else {
            let m = z[c - n];
            stack.push(m.b);
            stack.push(m.a);
        }
    }
    out
}

/// The variance of a cluster's inverse-variance portfolio.
fn cluster_var(cov: &Matrix, items: &[usize]) -> f64 {
    let sub = cov.select(items);
    let inv: Vec<f64> = (0..sub.n).map(|i| 1.0 / sub.at(i, i)).collect();
    let total: f64 = inv.iter().sum();
    let w: Vec<f64> = inv.iter().map(|v| v / total).collect();
    sub.quad(&w)
}

/// Recursive bisection over `order` (PyPortfolioOpt's
/// `_raw_hrp_allocation`): every level splits each cluster in halves.
fn bisect(cov: &Matrix, order: &[usize]) -> Vec<f64> {
    let mut w = vec![1.0; cov.n];
    let mut clusters: Vec<&[usize]> = vec![order];
    while !clusters.is_empty() {
        clusters = clusters
            .iter()
            .filter(|c| c.len() > 1)
            .flat_map(|c| {
                let (a, b) = c.split_at(c.len() / 2);
                [a, b]
            })
            .collect();
        for pair in clusters.chunks_exact(2) {
            let (first, second) = (pair[0], pair[1]);
            let (v1, v2) = (cluster_var(cov, first), cluster_var(cov, second));
            let alpha = 1.0 - v1 / (v1 + v2);
            for i in first {
                w[*i] *= alpha;
            }
            for i in second {
                w[*i] *= 1.0 - alpha;
            }
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cov(vols: &[f64], rho: &[&[f64]]) -> Matrix {
        let n = vols.len();
        let mut m = Matrix::zeros(n);
        for i in 0..n {
            for j in 0..n {
                m.data[i * n + j] = rho[i][j] * vols[i] * vols[j];
            }
        }
        m
    }

    #[test]
    fn two_uncorrelated_assets_get_inverse_variance_weights() {
        let m = cov(&[0.1, 0.2], &[&[1.0, 0.0], &[0.0, 1.0]]);
        let w = hrp_weights(&m);
        // 1/0.01 : 1/0.04 = 4 : 1.
        assert!(
            (w[0] - 0.8).abs() < 1e-15 && (w[1] - 0.2).abs() < 1e-15,
            "{w:?}"
        );
    }

    #[test]
    fn correlated_pairs_are_clustered_together() {
        // Assets 0 and 2 move together, as do 1 and 3.
        let rho: [&[f64]; 4] = [
            &[1.0, 0.1, 0.9, 0.1],
            &[0.1, 1.0, 0.1, 0.8],
            &[0.9, 0.1, 1.0, 0.1],
            &[0.1, 0.8, 0.1, 1.0],
        ];
        let m = cov(&[0.2, 0.2, 0.2, 0.2], &rho);
        let order = quasi_diagonal(&linkage(&distances(&m), 4), 4);
        let pos = |a: usize| order.iter().position(|x| *x == a).unwrap();
        assert_eq!(pos(0).abs_diff(pos(2)), 1, "{order:?}");
        assert_eq!(pos(1).abs_diff(pos(3)), 1, "{order:?}");
        let w = hrp_weights(&m);
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-15);
    }
}
