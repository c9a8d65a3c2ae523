//! Johansen's cointegration rank test (docs §16.3.1), as statsmodels'
//! `coint_johansen` computes it (Johansen 1991).
//!
//! For n series y_t and k lagged differences:
//! 1. The deterministic terms are removed from the levels first (`c`: each
//!    series' mean; `ct`: its least-squares line; `n`: nothing), then
//!    Δy_t, the lagged differences Δy_{t−1} … Δy_{t−k} and the levels are
//!    demeaned again unless the terms are `n` (statsmodels' recipe).
//! 2. R0 and R1 are the residuals of Δy_t and of the levels y_{t−k} (the
//!    form of Johansen 1988; y_{t−1} differs from it by lagged differences
//!    already in the regression, so the residuals are the same) on the lagged
//!    differences, over the T = N − 1 − k rows where all exist.
//! 3. With S_ij = R_iᵀR_j / T, the eigenvalues λ of S10 S00⁻¹ S01 v = λ S11 v
//!    are found as a symmetric problem: with S11 = LLᵀ and S00 = MMᵀ,
//!    B = M⁻¹ S01 L⁻ᵀ and BᵀB w = λ w, v = L⁻ᵀ w (so vᵀ S11 v = 1).
//! 4. The trace statistic for rank ≤ r is −T Σ_{i>r} ln(1 − λ_i), the
//!    maximum-eigenvalue statistic −T ln(1 − λ_{r+1}); each is read against
//!    the critical values for n − r trends ([`johansen_tables`]). The rank
//!    is the first r whose statistic is below its 95 % value (n if none).
//!
//! There is no p-value: the references give critical values only.
//!
//! [`johansen_tables`]: super::johansen_tables

use super::johansen_tables as tables;
use super::ols::{backward, cholesky, dot, forward, gram, partial_out};
use super::{Trend, TsError, check_series, eigen, is_constant};

/// Most series the critical values cover.
pub const JOHANSEN_MAX_SERIES: usize = 12;
/// Residual degrees of freedom the smallest sample must keep beyond the
/// regressors, so S00 and S11 are well estimated.
const SPARE_ROWS: usize = 10;

/// A Johansen test's result; vectors run over r = 0 … n − 1, eigenvalues
/// in decreasing order.
#[derive(Clone, Debug, PartialEq)]
pub struct JohansenResult {
    pub eigenvalues: Vec<f64>,
    pub trace: Vec<f64>,
    pub max_eigen: Vec<f64>,
    /// 90 %, 95 %, 99 % for each r.
    pub trace_critical_values: Vec<[f64; 3]>,
    pub max_eigen_critical_values: Vec<[f64; 3]>,
    /// The eigenvectors v (S11-normalised: vᵀ S11 v = 1), one per
    /// eigenvalue, each with a component per series; the sign makes the
    /// first vector's first component positive, as statsmodels does.
    pub eigenvectors: Vec<Vec<f64>>,
    /// The rank at 5 % by the trace test, and by the maximum-eigenvalue test.
    pub rank_trace: usize,
    pub rank_max_eigen: usize,
    /// T: the rows of the residual regressions.
    pub n_obs: usize,
    pub k_ar_diff: usize,
    pub trend: Trend,
}

impl JohansenResult {
    /// The first `r` eigenvectors scaled so their first component is 1 (by
    /// the first non-zero one if that is zero): the cointegrating vectors β,
    /// each giving a stationary combination Σ β_i·y_i.
    pub fn cointegrating_vectors(&self, r: usize) -> Vec<Vec<f64>> {
        self.eigenvectors
            .iter()
            .take(r)
            .map(|v| {
                let lead = v.iter().copied().find(|x| *x != 0.0).unwrap_or(1.0);
                v.iter().map(|x| x / lead).collect()
            })
            .collect()
    }
}

/// statsmodels' `det_order` for the terms: −1, 0, 1.
pub fn det_order(trend: Trend) -> i32 {
    match trend {
        Trend::None => -1,
        Trend::Constant => 0,
        Trend::ConstantTrend => 1,
    }
}

/// The fewest observations `n` series with `k` lagged differences take.
pub fn johansen_min_obs(n: usize, k: usize) -> usize {
    // T = N − 1 − k rows must exceed the n·k regressors by SPARE_ROWS + n.
    1 + k + n * k + n + SPARE_ROWS
}

/// Tests `series` (2 to 12, equal lengths) for their cointegration rank
/// with deterministic terms `trend` and `k_ar_diff` ≥ 1 lagged differences.
pub fn johansen(
    series: &[Vec<f64>],
    trend: Trend,
    k_ar_diff: usize,
) -> Result<JohansenResult, TsError> {
    const TEST: &str = "johansen";
    let n = series.len();
    if !(2..=JOHANSEN_MAX_SERIES).contains(&n) {
        return Err(TsError::Input(format!(
            "johansen: give 2 to {JOHANSEN_MAX_SERIES} series (its critical values stop at 12), got {n}"
        )));
    }
    if k_ar_diff == 0 {
        return Err(TsError::Input(
            "johansen: the number of lagged differences (max_lags) must be at least 1".into(),
        ));
    }
    let len = series[0].len();
    if let Some(other) = series.iter().find(|s| s.len() != len) {
        return Err(TsError::Input(format!(
            "johansen: the series differ in length ({len} and {}): give them on the same dates",
            other.len()
        )));
    }
    for s in series {
        check_series(s, johansen_min_obs(n, k_ar_diff), TEST)?;
        if is_constant(s) {
            return Err(TsError::Constant { test: TEST });
        }
    }
    let (r0, r1) = residuals(series, trend, k_ar_diff)?;
    let t = r0[0].len();
    let (eigenvalues, eigenvectors) = reduced_rank(&r0, &r1)?;
    // Squared canonical correlations lie in [0, 1); one at 1 is an exact
    // relation, whose statistic would be infinite.
    if eigenvalues.iter().any(|l| l.is_nan() || *l >= 1.0) {
        return Err(TsError::Input(
            "johansen: a combination of the series is exact (an eigenvalue is 1), so the statistics are infinite; drop a series that is built from the others".into(),
        ));
    }
    Ok(statistics(eigenvalues, eigenvectors, t, k_ar_diff, trend))
}

/// Columns of equal length, one per series.
type Columns = Vec<Vec<f64>>;

/// R0 (of Δy_t) and R1 (of y_{t−k}) on the lagged differences, after the
/// deterministic terms are removed as statsmodels does (module doc, 1–2).
fn residuals(series: &[Vec<f64>], trend: Trend, k: usize) -> Result<(Columns, Columns), TsError> {
    let levels: Vec<Vec<f64>> = series
        .iter()
        .map(|s| {
            let mut s = s.clone();
            partial_out(&mut s, trend);
            s
        })
        .collect();
    let big_n = levels[0].len();
    let t = big_n - 1 - k;
    let diffs: Vec<Vec<f64>> = levels
        .iter()
        .map(|s| s.windows(2).map(|w| w[1] - w[0]).collect())
        .collect();
    // Row i of the regression is Δy at index i + k of the differences.
    let again = |mut v: Vec<f64>| {
        if trend != Trend::None {
            partial_out(&mut v, Trend::Constant);
        }
        v
    };
    let mut z = Vec::with_capacity(k * series.len());
    for lag in 1..=k {
        for d in &diffs {
            z.push(again(d[k - lag..k - lag + t].to_vec()));
        }
    }
    let dy: Vec<Vec<f64>> = diffs.iter().map(|d| again(d[k..].to_vec())).collect();
    let lev: Vec<Vec<f64>> = levels
        .iter()
        .map(|s| again(s[1..big_n - k].to_vec()))
        .collect();
    let singular = TsError::Singular { test: "johansen" };
    let kz = z.len();
    let l = cholesky(&gram(&z), kz).ok_or(singular.clone())?;
    let project = |y: Vec<f64>| -> Vec<f64> {
        let xy: Vec<f64> = z.iter().map(|c| dot(c, &y)).collect();
        let coef = backward(&l, kz, &forward(&l, kz, &xy));
        let mut r = y;
        for (c, b) in z.iter().zip(&coef) {
            r.iter_mut().zip(c).for_each(|(ri, ci)| *ri -= b * ci);
        }
        r
    };
    Ok((
        dy.into_iter().map(project).collect(),
        lev.into_iter().map(project).collect(),
    ))
}

/// The eigenvalues (decreasing) and S11-normalised eigenvectors of
/// S10 S00⁻¹ S01 v = λ S11 v (module doc, 3).
fn reduced_rank(r0: &[Vec<f64>], r1: &[Vec<f64>]) -> Result<(Vec<f64>, Vec<Vec<f64>>), TsError> {
    let n = r0.len();
    let t = r0[0].len() as f64;
    let moment = |a: &[Vec<f64>], b: &[Vec<f64>]| -> Vec<f64> {
        let mut s = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                s[i * n + j] = dot(&a[i], &b[j]) / t;
            }
        }
        s
    };
    let (s00, s01, s11) = (moment(r0, r0), moment(r0, r1), moment(r1, r1));
    let singular = TsError::Singular { test: "johansen" };
    let m = cholesky(&s00, n).ok_or(singular.clone())?;
    let l = cholesky(&s11, n).ok_or(singular.clone())?;
    // A = M⁻¹ S01, column by column; then B = A L⁻ᵀ, row by row (Bᵀ rows
    // solve L x = A row).
    let mut a = vec![0.0; n * n];
    for j in 0..n {
        let col: Vec<f64> = (0..n).map(|i| s01[i * n + j]).collect();
        let x = forward(&m, n, &col);
        (0..n).for_each(|i| a[i * n + j] = x[i]);
    }
    let mut b = vec![0.0; n * n];
    for i in 0..n {
        let x = forward(&l, n, &a[i * n..(i + 1) * n]);
        b[i * n..(i + 1) * n].copy_from_slice(&x);
    }
    let mut c = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            c[i * n + j] = (0..n).map(|p| b[p * n + i] * b[p * n + j]).sum();
        }
    }
    let (w, vecs) = eigen::symmetric_eigen(&c, n).ok_or(TsError::NoFit(
        "johansen: the eigenvalue problem did not converge; check the series for extreme values"
            .into(),
    ))?;
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| w[j].total_cmp(&w[i]));
    let values = order.iter().map(|&i| w[i]).collect();
    let mut vectors: Vec<Vec<f64>> = order
        .iter()
        .map(|&col| {
            let wcol: Vec<f64> = (0..n).map(|r| vecs[r * n + col]).collect();
            backward(&l, n, &wcol)
        })
        .collect();
    // One sign for all, from the first vector's first non-zero component.
    let lead = vectors[0]
        .iter()
        .copied()
        .find(|x| *x != 0.0)
        .unwrap_or(1.0);
    if lead < 0.0 {
        vectors.iter_mut().flatten().for_each(|x| *x = -*x);
    }
    Ok((values, vectors))
}

/// The trace and maximum-eigenvalue statistics, their critical values and
/// the ranks at 5 % (module doc, 4).
fn statistics(
    eigenvalues: Vec<f64>,
    eigenvectors: Vec<Vec<f64>>,
    t: usize,
    k_ar_diff: usize,
    trend: Trend,
) -> JohansenResult {
    let n = eigenvalues.len();
    let tf = t as f64;
    let logs: Vec<f64> = eigenvalues.iter().map(|l| (-l).ln_1p()).collect();
    let trace: Vec<f64> = (0..n)
        .map(|r| -tf * logs[r..].iter().sum::<f64>())
        .collect();
    let max_eigen: Vec<f64> = logs.iter().map(|l| -tf * l).collect();
    let (trace_table, max_table) = match trend {
        Trend::None => (&tables::TRACE_NONE, &tables::MAX_EIGEN_NONE),
        Trend::Constant => (&tables::TRACE_CONSTANT, &tables::MAX_EIGEN_CONSTANT),
        Trend::ConstantTrend => (&tables::TRACE_TREND, &tables::MAX_EIGEN_TREND),
    };
    let trace_cv: Vec<[f64; 3]> = (0..n).map(|r| trace_table[n - r - 1]).collect();
    let max_cv: Vec<[f64; 3]> = (0..n).map(|r| max_table[n - r - 1]).collect();
    let rank = |stat: &[f64], cv: &[[f64; 3]]| (0..n).find(|&r| stat[r] < cv[r][1]).unwrap_or(n);
    JohansenResult {
        rank_trace: rank(&trace, &trace_cv),
        rank_max_eigen: rank(&max_eigen, &max_cv),
        eigenvalues,
        trace,
        max_eigen,
        trace_critical_values: trace_cv,
        max_eigen_critical_values: max_cv,
        eigenvectors,
        n_obs: t,
        k_ar_diff,
        trend,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two random walks and a third series tied to the first:
    /// y2 = 0.5 + 2·y0 + stationary noise (xorshift draws).
    fn system(n: usize) -> Vec<Vec<f64>> {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut draw = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64) - 0.5
        };
        let (mut a, mut b, mut u) = (0.0, 0.0, 0.0);
        let mut out = vec![Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..n {
            a += draw();
            b += draw();
            u = 0.5 * u + 0.3 * draw();
            out[0].push(a);
            out[1].push(b);
            out[2].push(0.5 + 2.0 * a + u);
        }
        out
    }

    #[test]
    fn finds_the_one_relation_of_a_simulated_system() {
        let r = johansen(&system(1500), Trend::Constant, 1).unwrap();
        assert_eq!(r.rank_trace, 1, "{r:?}");
        assert_eq!(r.rank_max_eigen, 1, "{r:?}");
        assert_eq!(r.n_obs, 1500 - 2);
        assert!(r.eigenvalues.windows(2).all(|w| w[0] >= w[1]));
        // β ∝ (2, 0, −1): first component 1, then 0, −0.5.
        let beta = &r.cointegrating_vectors(1)[0];
        assert_eq!(beta[0], 1.0);
        assert!(
            beta[1].abs() < 0.02 && (beta[2] + 0.5).abs() < 0.01,
            "{beta:?}"
        );
        // The trace for r is the sum of the max-eigenvalue statistics from r.
        let tail: f64 = r.max_eigen.iter().sum();
        assert!((r.trace[0] - tail).abs() < 1e-9 * tail);
        assert_eq!(r.trace_critical_values[0], [27.0669, 29.7961, 35.4628]);
    }

    #[test]
    fn bad_inputs_say_what_to_give() {
        let one = vec![vec![1.0; 100]];
        let e = johansen(&one, Trend::Constant, 1).unwrap_err().to_string();
        assert!(e.contains("2 to 12 series"), "{e}");
        let short: Vec<Vec<f64>> = system(20);
        let e = johansen(&short, Trend::Constant, 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least 22 observations"), "{e}");
        let e = johansen(&system(200), Trend::Constant, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least 1"), "{e}");
    }
}
