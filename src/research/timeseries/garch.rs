//! Volatility models (docs §16.5): the RiskMetrics EWMA and a GARCH(1,1)
//! with a constant mean and normal errors fitted by maximum likelihood, as
//! the `arch` package (8.0) defines them.
//!
//! Both work on returns in percent (100 × the simple daily return), as arch
//! expects: its variance bounds and starting values assume that scale.
//!
//! - Backcast: σ̂²_0 = Σ w_i e_i² over the first τ = min(75, n) residuals of
//!   the sample mean, w_i ∝ 0.94^i (arch's `backcast`), fixed for the fit.
//! - GARCH: e_t = y_t − μ, σ²_t = ω + α·e²_{t−1} + β·σ²_{t−1}, with the
//!   backcast for e²_{−1} and σ²_{−1}; each σ²_t is kept within arch's loose
//!   variance bounds (an EWMA of the residuals / 10⁶ and × 10⁶, floored at
//!   var/10⁸); ℓ = −½ Σ (ln 2π + ln σ²_t + e²_t/σ²_t).
//! - Fit: the start is the best of arch's grid (α ∈ {.01, .05, .1, .2},
//!   α+β ∈ {.5, .7, .9, .98}, ω = (1 − α − β)·mean e²); then Newton's method
//!   on the exact gradient and Hessian (their recursions run beside σ²_t),
//!   damped when the Hessian is not negative definite, with a backtracking
//!   line search that keeps ω > 0, α, β ≥ 0 and α + β < 1, and variables at
//!   a bound held there while the gradient pushes outward. It stops when
//!   Newton's decrement promises less than 10⁻¹¹ of log-likelihood.
//! - Forecast: σ²_{T+1} = ω + α·e²_T + β·σ²_T, σ²_{T+h} = ω + (α+β)·σ²_{T+h−1}.
//! - EWMA: σ²_0 = backcast of the returns themselves (zero mean),
//!   σ²_t = (1−λ)·y²_{t−1} + λ·σ²_{t−1}; the forecast is flat at σ²_{T+1}.

use super::{TsError, check_series, is_constant};

/// Fewest returns a GARCH fit takes.
pub(crate) const GARCH_MIN_OBS: usize = 100;
/// Fewest returns an EWMA takes.
pub(crate) const EWMA_MIN_OBS: usize = 2;
const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// GARCH(1,1) parameters on returns in percent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GarchParams {
    pub mu: f64,
    pub omega: f64,
    pub alpha: f64,
    pub beta: f64,
}

impl GarchParams {
    pub(super) fn to_array(self) -> [f64; 4] {
        [self.mu, self.omega, self.alpha, self.beta]
    }
    pub(super) fn from_array(p: [f64; 4]) -> Self {
        GarchParams {
            mu: p[0],
            omega: p[1],
            alpha: p[2],
            beta: p[3],
        }
    }
}

/// A fitted GARCH(1,1).
#[derive(Clone, Debug, PartialEq)]
pub struct GarchFit {
    pub params: GarchParams,
    pub loglik: f64,
    pub backcast: f64,
    pub n_obs: usize,
    pub iterations: usize,
    /// σ²_t, percent².
    pub conditional_variance: Vec<f64>,
    /// The last residual e_T = y_T − μ.
    pub last_residual: f64,
}

impl GarchFit {
    pub(crate) fn persistence(&self) -> f64 {
        self.params.alpha + self.params.beta
    }

    /// ω / (1 − α − β), percent²; `None` without mean reversion.
    pub(crate) fn long_run_variance(&self) -> Option<f64> {
        let p = self.persistence();
        (p < 1.0).then(|| self.params.omega / (1.0 - p))
    }

    /// σ²_{T+1..=T+horizon}, percent².
    pub fn forecast(&self, horizon: usize) -> Vec<f64> {
        let GarchParams {
            omega, alpha, beta, ..
        } = self.params;
        let last = self
            .conditional_variance
            .last()
            .copied()
            .unwrap_or(f64::NAN);
        let mut out = Vec::with_capacity(horizon);
        let mut h = omega + alpha * self.last_residual * self.last_residual + beta * last;
        for _ in 0..horizon {
            out.push(h);
            h = omega + (alpha + beta) * h;
        }
        out
    }
}

/// arch's backcast: Σ w_i e_i² over the first min(75, n), w_i ∝ 0.94^i.
pub(crate) fn backcast(e: &[f64]) -> f64 {
    let tau = e.len().min(75);
    let w: Vec<f64> = (0..tau).map(|i| 0.94f64.powf(i as f64)).collect();
    let total: f64 = w.iter().sum();
    e[..tau]
        .iter()
        .zip(&w)
        .map(|(x, wi)| x * x * (wi / total))
        .sum()
}

/// arch's loose bounds on each σ²_t (lower, upper).
pub(crate) fn variance_bounds(e: &[f64]) -> Vec<(f64, f64)> {
    let n = e.len() as f64;
    let mut v = backcast(e);
    let m = e.iter().sum::<f64>() / n;
    let var = e.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n;
    let max_sq = e.iter().map(|x| x * x).fold(0.0, f64::max);
    let (lower, min_upper, upper) = (var / 1e8, 1.0 + max_sq, 1e7 * (1.0 + max_sq));
    let mut out = Vec::with_capacity(e.len());
    // The EWMA recursion as arch runs it (through its GARCH recursion with
    // ω = 0, α = 1 − λ, β = λ), from the backcast.
    let mut e2_prev = v;
    for x in e {
        v = 0.0 + (1.0 - 0.94) * e2_prev + 0.94 * v;
        e2_prev = x * x;
        let lo = (v / 1e6).max(lower);
        let hi = (v * 1e6).max(min_upper).min(upper);
        out.push((lo, hi));
    }
    out
}

fn bound(h: f64, b: (f64, f64)) -> (f64, bool) {
    if h < b.0 {
        (b.0, true)
    } else if h > b.1 {
        if h.is_finite() {
            (b.1 + (h / b.1).ln(), true)
        } else {
            (b.1 + 1000.0, true)
        }
    } else {
        (h, false)
    }
}

/// Σ ln h in chunks of eight: one logarithm per chunk while the product
/// stays a normal number, else one per value.
struct LogSum {
    buf: [f64; 8],
    len: usize,
    sum: f64,
}

impl LogSum {
    fn new() -> Self {
        LogSum {
            buf: [1.0; 8],
            len: 0,
            sum: 0.0,
        }
    }
    #[inline]
    fn push(&mut self, h: f64) {
        self.buf[self.len] = h;
        self.len += 1;
        if self.len == 8 {
            self.flush();
        }
    }
    fn flush(&mut self) {
        let b = &self.buf[..self.len];
        let p: f64 = b.iter().product();
        if p.is_normal() {
            self.sum += p.ln();
        } else {
            self.sum += b.iter().map(|h| h.ln()).sum::<f64>();
        }
        self.len = 0;
    }
    fn total(mut self) -> f64 {
        self.flush();
        self.sum
    }
}

/// The data a GARCH likelihood is evaluated on.
pub(super) struct Problem<'a> {
    pub(super) y: &'a [f64],
    pub(super) backcast: f64,
    pub(super) bounds: &'a [(f64, f64)],
}

impl Problem<'_> {
    /// Each observation's log-likelihood −½(ln 2π + ln σ²_t + e²_t/σ²_t),
    /// term by term as arch's normal distribution writes it.
    pub(super) fn contributions(&self, p: &GarchParams) -> Vec<f64> {
        self.variances(p)
            .iter()
            .zip(self.y)
            .map(|(h, y)| {
                let e = y - p.mu;
                -0.5 * (LN_2PI + h.ln() + e * e / h)
            })
            .collect()
    }

    /// σ²_t for `p`.
    fn variances(&self, p: &GarchParams) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.y.len());
        let mut h_prev = self.backcast;
        let mut e2_prev = self.backcast;
        for (t, y) in self.y.iter().enumerate() {
            let h = bound(
                p.omega + p.alpha * e2_prev + p.beta * h_prev,
                self.bounds[t],
            )
            .0;
            out.push(h);
            let e = y - p.mu;
            e2_prev = e * e;
            h_prev = h;
        }
        out
    }

    /// The log-likelihood at `p`.
    fn value(&self, p: &GarchParams) -> f64 {
        let mut logs = LogSum::new();
        let mut quad = 0.0;
        let mut h_prev = self.backcast;
        let mut e2_prev = self.backcast;
        for (t, y) in self.y.iter().enumerate() {
            let h = bound(
                p.omega + p.alpha * e2_prev + p.beta * h_prev,
                self.bounds[t],
            )
            .0;
            let e = y - p.mu;
            let e2 = e * e;
            logs.push(h);
            quad += e2 / h;
            e2_prev = e2;
            h_prev = h;
        }
        let n = self.y.len() as f64;
        -0.5 * (n * LN_2PI + logs.total() + quad)
    }

    /// The log-likelihood, its gradient and its Hessian in (μ, ω, α, β).
    fn derivatives(&self, p: &GarchParams) -> (f64, [f64; 4], [[f64; 4]; 4]) {
        let (mu, omega, alpha, beta) = (p.mu, p.omega, p.alpha, p.beta);
        let bc = self.backcast;
        let mut logs = LogSum::new();
        let mut quad = 0.0;
        let mut g = [0.0; 4];
        let mut hs = [[0.0; 4]; 4];
        // σ²_{t−1}, its first derivatives (μ, ω, α, β) and the non-zero
        // second ones (μμ, μα, μβ, ωβ, αβ, ββ); e_{t−1}.
        let (mut h_prev, mut e_prev) = (0.0, 0.0);
        let mut dh = [0.0; 4];
        let mut d2 = [0.0; 6];
        for (t, y) in self.y.iter().enumerate() {
            let (raw, ndh, nd2) = if t == 0 {
                (omega + alpha * bc + beta * bc, [0.0, 1.0, bc, bc], [0.0; 6])
            } else {
                let e2 = e_prev * e_prev;
                let ndh = [
                    -2.0 * alpha * e_prev + beta * dh[0],
                    1.0 + beta * dh[1],
                    e2 + beta * dh[2],
                    h_prev + beta * dh[3],
                ];
                let nd2 = [
                    2.0 * alpha + beta * d2[0],
                    -2.0 * e_prev + beta * d2[1],
                    dh[0] + beta * d2[2],
                    dh[1] + beta * d2[3],
                    dh[2] + beta * d2[4],
                    2.0 * dh[3] + beta * d2[5],
                ];
                (omega + alpha * e2 + beta * h_prev, ndh, nd2)
            };
            let (h, clamped) = bound(raw, self.bounds[t]);
            // A bounded variance no longer moves with the parameters.
            (dh, d2) = if clamped {
                ([0.0; 4], [0.0; 6])
            } else {
                (ndh, nd2)
            };
            let e = y - mu;
            let ih = 1.0 / h;
            let u = e * e * ih;
            logs.push(h);
            quad += u;
            let a = 0.5 * (u - 1.0) * ih;
            let c = 0.5 * (2.0 * u - 1.0) * ih * ih;
            let bm = e * ih * ih;
            for i in 0..4 {
                g[i] += a * dh[i];
                for j in i..4 {
                    hs[i][j] -= c * dh[i] * dh[j];
                }
            }
            g[0] += e * ih;
            // The second derivatives of σ²; the μ terms of ε.
            hs[0][0] += a * d2[0] - 2.0 * bm * dh[0] - ih;
            hs[0][2] += a * d2[1];
            hs[0][3] += a * d2[2];
            hs[1][3] += a * d2[3];
            hs[2][3] += a * d2[4];
            hs[3][3] += a * d2[5];
            for j in 1..4 {
                hs[0][j] -= bm * dh[j];
            }
            h_prev = h;
            e_prev = e;
        }
        // The lower triangle from the upper.
        for (i, j) in [(1, 0), (2, 0), (3, 0), (2, 1), (3, 1), (3, 2)] {
            hs[i][j] = hs[j][i];
        }
        let n = self.y.len() as f64;
        (-0.5 * (n * LN_2PI + logs.total() + quad), g, hs)
    }
}

/// The GARCH(1,1) log-likelihood of percent returns `y` at `p`, with the
/// backcast and variance bounds arch derives from `y`'s sample-mean
/// residuals (docs §16.5).
pub fn garch_loglik(y: &[f64], p: &GarchParams) -> f64 {
    let m = y.iter().sum::<f64>() / y.len() as f64;
    let e: Vec<f64> = y.iter().map(|v| v - m).collect();
    let bounds = variance_bounds(&e);
    Problem {
        y,
        backcast: backcast(&e),
        bounds: &bounds,
    }
    .value(p)
}

/// σ²_t of percent returns `y` at `p` and the forecast σ²_{T+1..=T+horizon}
/// (arch's backcast and bounds from `y`'s sample-mean residuals).
pub fn conditional_variance(y: &[f64], p: &GarchParams, horizon: usize) -> (Vec<f64>, Vec<f64>) {
    if y.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let m = y.iter().sum::<f64>() / y.len() as f64;
    let e: Vec<f64> = y.iter().map(|v| v - m).collect();
    let bounds = variance_bounds(&e);
    let prob = Problem {
        y,
        backcast: backcast(&e),
        bounds: &bounds,
    };
    let fit = GarchFit {
        params: *p,
        loglik: f64::NAN,
        backcast: prob.backcast,
        n_obs: y.len(),
        iterations: 0,
        conditional_variance: prob.variances(p),
        last_residual: y[y.len() - 1] - p.mu,
    };
    let fc = fit.forecast(horizon);
    (fit.conditional_variance, fc)
}

/// Fits a GARCH(1,1) with a constant mean to percent returns `y`.
pub fn fit_garch(y: &[f64]) -> Result<GarchFit, TsError> {
    const TEST: &str = "garch";
    check_series(y, GARCH_MIN_OBS, TEST)?;
    if is_constant(y) {
        return Err(TsError::Constant { test: TEST });
    }
    let n = y.len() as f64;
    let m = y.iter().sum::<f64>() / n;
    let e: Vec<f64> = y.iter().map(|v| v - m).collect();
    let bounds = variance_bounds(&e);
    let target = e.iter().map(|x| x * x).sum::<f64>() / n;
    let prob = Problem {
        y,
        backcast: backcast(&e),
        bounds: &bounds,
    };
    let start = start(&prob, m, target);
    let (params, loglik, iterations) = newton(&prob, start, 1e-8 * target)?;
    let conditional_variance = prob.variances(&params);
    Ok(GarchFit {
        params,
        loglik,
        backcast: prob.backcast,
        n_obs: y.len(),
        iterations,
        conditional_variance,
        last_residual: y[y.len() - 1] - params.mu,
    })
}

/// The best point of arch's starting grid.
fn start(prob: &Problem<'_>, mu: f64, target: f64) -> GarchParams {
    let mut best = (
        f64::NEG_INFINITY,
        GarchParams {
            mu,
            omega: 0.1 * target,
            alpha: 0.05,
            beta: 0.85,
        },
    );
    for alpha in [0.01, 0.05, 0.1, 0.2] {
        for persistence in [0.5, 0.7, 0.9, 0.98] {
            let p = GarchParams {
                mu,
                omega: (1.0 - persistence) * target,
                alpha,
                beta: persistence - alpha,
            };
            let v = prob.value(&p);
            if v > best.0 {
                best = (v, p);
            }
        }
    }
    best.1
}

fn feasible(p: &[f64; 4], omega_min: f64) -> bool {
    p[1] >= omega_min
        && p[2] >= 0.0
        && p[3] >= 0.0
        && p[2] + p[3] < 1.0
        && p.iter().all(|v| v.is_finite())
}

/// Newton's method with damping, bounds and a line search; returns the
/// parameters, the log-likelihood and the iterations taken.
fn newton(
    prob: &Problem<'_>,
    start: GarchParams,
    omega_min: f64,
) -> Result<(GarchParams, f64, usize), TsError> {
    let lower = [f64::NEG_INFINITY, omega_min, 0.0, 0.0];
    let mut x = start.to_array();
    let (mut f, mut g, mut h) = prob.derivatives(&start);
    if !f.is_finite() {
        return Err(TsError::NoFit(
            "garch: the likelihood is not finite at the starting values; check the returns for extreme values".into(),
        ));
    }
    let mut iterations = 0;
    for it in 0..200 {
        // An iteration is a few passes over the returns (docs §2.4).
        crate::research::checkpoint()?;
        iterations = it + 1;
        // Variables at a bound whose gradient points outward stay there.
        let free: Vec<usize> = (0..4)
            .filter(|&i| !(x[i] <= lower[i] && g[i] < 0.0))
            .collect();
        let Some(step) = newton_step(&g, &h, &free) else {
            break;
        };
        let decrement: f64 = free.iter().map(|&i| g[i] * step[i]).sum();
        if decrement < 2e-11 {
            break;
        }
        let mut s = 1.0;
        let mut moved = false;
        while s > 1e-12 {
            let mut cand = [0.0; 4];
            for i in 0..4 {
                cand[i] = (x[i] + s * step[i]).max(lower[i]);
            }
            if feasible(&cand, omega_min) {
                let p = GarchParams::from_array(cand);
                let fc = prob.value(&p);
                let gain: f64 = (0..4).map(|i| g[i] * (cand[i] - x[i])).sum();
                // Armijo's rule; near the optimum (a tiny decrement) the full
                // step is taken unless it loses more than rounding.
                let near = s == 1.0 && decrement < 1e-6;
                let accept = if near {
                    fc >= f - 1e-9
                } else {
                    fc >= f + 1e-4 * gain.max(0.0)
                };
                if fc.is_finite() && accept {
                    x = cand;
                    moved = true;
                    break;
                }
            }
            s *= 0.5;
        }
        if !moved {
            break;
        }
        (f, g, h) = prob.derivatives(&GarchParams::from_array(x));
    }
    Ok((GarchParams::from_array(x), f, iterations))
}

/// The Newton step on the free variables: solves (−H + λD) δ = g, with λ
/// raised from 0 until −H + λD is positive definite (D = diag |H_ii|).
fn newton_step(g: &[f64; 4], h: &[[f64; 4]; 4], free: &[usize]) -> Option<[f64; 4]> {
    let k = free.len();
    if k == 0 {
        return None;
    }
    let mut lambda = 0.0;
    for _ in 0..30 {
        let mut a = vec![0.0; k * k];
        for (r, &i) in free.iter().enumerate() {
            for (c, &j) in free.iter().enumerate() {
                a[r * k + c] = -h[i][j];
            }
            a[r * k + r] += lambda * h[i][i].abs().max(1e-12);
        }
        if let Some(l) = super::ols::cholesky(&a, k) {
            let b: Vec<f64> = free.iter().map(|&i| g[i]).collect();
            let z = super::ols::forward(&l, k, &b);
            let d = super::ols::backward(&l, k, &z);
            let mut step = [0.0; 4];
            for (r, &i) in free.iter().enumerate() {
                step[i] = d[r];
            }
            return Some(step);
        }
        lambda = if lambda == 0.0 { 1e-6 } else { lambda * 10.0 };
    }
    None
}

/// An EWMA variance path.
#[derive(Clone, Debug, PartialEq)]
pub struct EwmaResult {
    pub lambda: f64,
    /// σ²_t, in the returns' units squared.
    pub variance: Vec<f64>,
    /// σ²_{T+1}: the forecast for every horizon.
    pub next_variance: f64,
    pub backcast: f64,
    /// The normal log-likelihood of the returns with zero mean.
    pub loglik: f64,
}

/// The RiskMetrics EWMA of returns `y` (zero mean) with decay `lambda`.
pub fn ewma(y: &[f64], lambda: f64) -> Result<EwmaResult, TsError> {
    const TEST: &str = "ewma";
    if !(lambda > 0.0 && lambda < 1.0) {
        return Err(TsError::Input(format!(
            "ewma: lambda must be strictly between 0 and 1 (RiskMetrics daily: 0.94), got {lambda}"
        )));
    }
    check_series(y, EWMA_MIN_OBS, TEST)?;
    if y.iter().all(|v| *v == 0.0) {
        return Err(TsError::Constant { test: TEST });
    }
    let bc = backcast(y);
    let mut variance = Vec::with_capacity(y.len());
    let (mut h, mut e2) = (bc, bc);
    let mut ll = 0.0;
    for v in y {
        h = 0.0 + (1.0 - lambda) * e2 + lambda * h;
        variance.push(h);
        e2 = v * v;
        ll += -0.5 * (LN_2PI + h.ln() + e2 / h);
    }
    let next_variance = 0.0 + (1.0 - lambda) * e2 + lambda * h;
    Ok(EwmaResult {
        lambda,
        variance,
        next_variance,
        backcast: bc,
        loglik: ll,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seeded GARCH(1,1) path (xorshift and Box–Muller).
    fn simulate(n: usize, p: GarchParams, seed: u64) -> Vec<f64> {
        let mut s = seed;
        let mut uniform = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let mut h = p.omega / (1.0 - p.alpha - p.beta);
        (0..n)
            .map(|_| {
                let z =
                    (-2.0 * uniform().ln()).sqrt() * (2.0 * std::f64::consts::PI * uniform()).cos();
                let e = h.sqrt() * z;
                h = p.omega + p.alpha * e * e + p.beta * h;
                p.mu + e
            })
            .collect()
    }

    /// A fit whose interrupt has fired stops at its next iteration with
    /// `Interrupted`, the normal and the family fits alike (docs §2.4).
    #[test]
    fn an_interrupted_fit_stops_with_interrupted() {
        let truth = GarchParams {
            mu: 0.05,
            omega: 0.05,
            alpha: 0.1,
            beta: 0.85,
        };
        let y = simulate(4000, truth, 7);
        let fired = crate::research::Interrupt::new();
        fired.interrupt();
        let e = fired.within(|| fit_garch(&y)).unwrap_err();
        assert_eq!(e, TsError::Interrupted(crate::research::Interrupted));
        let spec = crate::research::timeseries::GarchSpec {
            gjr: true,
            dist: crate::research::timeseries::ErrorDist::StudentT,
        };
        let e = fired
            .within(|| crate::research::timeseries::fit_family(&y, spec))
            .unwrap_err();
        assert_eq!(e, TsError::Interrupted(crate::research::Interrupted));
        assert!(fit_garch(&y).is_ok(), "no interrupt outside");
    }

    #[test]
    fn the_fit_recovers_simulated_parameters_and_is_a_maximum() {
        let truth = GarchParams {
            mu: 0.05,
            omega: 0.05,
            alpha: 0.1,
            beta: 0.85,
        };
        let y = simulate(4000, truth, 7);
        let fit = fit_garch(&y).unwrap();
        let p = fit.params;
        assert!(
            (p.alpha - 0.1).abs() < 0.04 && (p.beta - 0.85).abs() < 0.06,
            "{p:?}"
        );
        // No nearby point is better.
        for d in [1e-4, -1e-4] {
            for i in 0..4 {
                let mut q = p.to_array();
                q[i] += d;
                if feasible(&q, 0.0) {
                    assert!(garch_loglik(&y, &GarchParams::from_array(q)) <= fit.loglik + 1e-9);
                }
            }
        }
        assert!((garch_loglik(&y, &p) - fit.loglik).abs() < 1e-9);
        let f = fit.forecast(50);
        let lr = fit.long_run_variance().unwrap();
        // The forecast decays toward the long-run variance.
        assert!((f[49] - lr).abs() < (f[0] - lr).abs());
    }

    #[test]
    fn the_analytic_gradient_matches_differences() {
        let y = simulate(
            500,
            GarchParams {
                mu: 0.0,
                omega: 0.1,
                alpha: 0.1,
                beta: 0.8,
            },
            3,
        );
        let m = y.iter().sum::<f64>() / y.len() as f64;
        let e: Vec<f64> = y.iter().map(|v| v - m).collect();
        let bounds = variance_bounds(&e);
        let prob = Problem {
            y: &y,
            backcast: backcast(&e),
            bounds: &bounds,
        };
        let p = GarchParams {
            mu: 0.02,
            omega: 0.12,
            alpha: 0.09,
            beta: 0.82,
        };
        let (_, g, h) = prob.derivatives(&p);
        let step = 1e-6;
        for i in 0..4 {
            let (mut a, mut b) = (p.to_array(), p.to_array());
            a[i] += step;
            b[i] -= step;
            let (fa, ga, _) = prob.derivatives(&GarchParams::from_array(a));
            let (fb, gb, _) = prob.derivatives(&GarchParams::from_array(b));
            let num = (fa - fb) / (2.0 * step);
            assert!(
                (num - g[i]).abs() < 1e-4 * g[i].abs().max(1.0),
                "g{i}: {num} vs {}",
                g[i]
            );
            for j in 0..4 {
                let nh = (ga[j] - gb[j]) / (2.0 * step);
                assert!(
                    (nh - h[i][j]).abs() < 1e-4 * h[i][j].abs().max(1.0),
                    "h{i}{j}: {nh} vs {}",
                    h[i][j]
                );
            }
        }
    }

    #[test]
    fn ewma_refuses_a_bad_lambda() {
        let e = ewma(&[0.1, 0.2], 1.5).unwrap_err().to_string();
        assert!(e.contains("0.94"), "{e}");
    }
}
