//! GARCH(1,1) with Student-t errors and GJR-GARCH(1,1,1) with normal or t
//! errors (docs §16.5), as arch's `arch_model(y, mean="Constant",
//! vol="GARCH", p=1, o=0|1, q=1, dist="normal"|"t")` defines them, with
//! their standard errors (docs §16.5.1). The plain normal GARCH(1,1) keeps
//! its own exact-derivative fit in [`super::garch`].
//!
//! - Parameters, in arch's order: μ, ω, α, γ (GJR only), β, ν (t only).
//! - σ²_t = ω + (α + γ·1[e_{t−1} < 0])·e²_{t−1} + β·σ²_{t−1}; before the
//!   sample e²_{−1} and σ²_{−1} are the backcast and the indicator term is
//!   γ·½·backcast (arch's recursion); the same variance bounds as GARCH.
//! - Student-t (arch's standardised t, unit variance): each observation adds
//!   lnΓ((ν+1)/2) − lnΓ(ν/2) − ½ln(π(ν−2)) − ½ln σ²_t
//!   − ((ν+1)/2)·ln(1 + e²_t/(σ²_t(ν−2))), with 2.05 ≤ ν ≤ 500.
//! - Start: the best of arch's grid (α, γ ∈ {.01, .05, .1, .2}, α + γ/2 + β
//!   ∈ {.5, .7, .9, .98}) by the normal likelihood; ν from the kurtosis k of
//!   the standardised residuals there, max((4k − 6)/(k − 3) if k > 3.75
//!   else 12, 4) (arch's moment estimator).
//! - Fit: Newton's method on the exact gradient (dσ²_t/dθ runs beside σ²_t)
//!   and a Hessian by forward differences of it, damped when the Hessian is
//!   not negative definite, within arch's bounds (ω ≥ 10⁻⁸·mean
//!   e², 0 ≤ α, β ≤ 1, −1 ≤ γ ≤ 2) and constraints (α + γ ≥ 0,
//!   α + γ/2 + β < 1) by a backtracking line search.
//! - Forecast (arch's analytic one): σ²_{T+1} from the recursion, then
//!   σ²_{T+h} = ω + (α + γ/2 + β)·σ²_{T+h−1}, the indicator's expectation
//!   being ½ for a symmetric distribution.
//! - Standard errors: arch's numerical Hessian and scores, as for GARCH
//!   (see [`super::garch_inference`]).

use super::garch::{backcast, variance_bounds};
use super::garch_inference::pairwise_sum;
use super::{TsError, check_series, is_constant};
use crate::research::stats::norm_cdf;

const LN_2PI: f64 = 1.837_877_066_409_345_5;
const NU_MIN: f64 = 2.05;
const NU_MAX: f64 = 500.0;
const MAX_ITER: usize = 200;

/// The errors' distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorDist {
    Normal,
    /// arch's standardised Student-t, ν estimated.
    StudentT,
}

/// Which member of the family: GJR's leverage term and the errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GarchSpec {
    pub gjr: bool,
    pub dist: ErrorDist,
}

impl GarchSpec {
    /// The parameter names in arch's order (γ and ν where the model has them).
    pub fn names(&self) -> Vec<&'static str> {
        let mut n = vec!["mu", "omega", "alpha"];
        if self.gjr {
            n.push("gamma");
        }
        n.push("beta");
        if self.dist == ErrorDist::StudentT {
            n.push("nu");
        }
        n
    }

    fn beta_at(&self) -> usize {
        if self.gjr { 4 } else { 3 }
    }
}

/// Parameters by name from a vector in the spec's order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FamilyParams {
    pub mu: f64,
    pub omega: f64,
    pub alpha: f64,
    /// 0 without the leverage term.
    pub gamma: f64,
    pub beta: f64,
    /// `None` for normal errors.
    pub nu: Option<f64>,
}

impl FamilyParams {
    pub fn from_slice(spec: &GarchSpec, x: &[f64]) -> Self {
        let b = spec.beta_at();
        FamilyParams {
            mu: x[0],
            omega: x[1],
            alpha: x[2],
            gamma: if spec.gjr { x[3] } else { 0.0 },
            beta: x[b],
            nu: (spec.dist == ErrorDist::StudentT).then(|| x[b + 1]),
        }
    }
}

/// A fitted member of the family.
#[derive(Clone, Debug, PartialEq)]
pub struct FamilyFit {
    pub spec: GarchSpec,
    /// In the order of [`GarchSpec::names`].
    pub params: Vec<f64>,
    pub loglik: f64,
    pub backcast: f64,
    pub iterations: usize,
    /// σ²_t, percent².
    pub conditional_variance: Vec<f64>,
    pub last_residual: f64,
}

impl FamilyFit {
    pub fn named(&self) -> FamilyParams {
        FamilyParams::from_slice(&self.spec, &self.params)
    }

    /// α + γ/2 + β.
    pub fn persistence(&self) -> f64 {
        let p = self.named();
        p.alpha + 0.5 * p.gamma + p.beta
    }

    /// ω / (1 − persistence), percent²; `None` without mean reversion.
    pub fn long_run_variance(&self) -> Option<f64> {
        let p = self.persistence();
        (p < 1.0).then(|| self.named().omega / (1.0 - p))
    }

    /// σ²_{T+1..=T+horizon}, percent² (arch's analytic forecast).
    pub fn forecast(&self, horizon: usize) -> Vec<f64> {
        let last = self
            .conditional_variance
            .last()
            .copied()
            .unwrap_or(f64::NAN);
        forecast(&self.named(), self.last_residual, last, horizon)
    }
}

fn forecast(p: &FamilyParams, e: f64, last: f64, horizon: usize) -> Vec<f64> {
    let e2 = e * e;
    let neg = if e < 0.0 { e2 } else { 0.0 };
    let mut h = p.omega + p.alpha * e2 + p.gamma * neg + p.beta * last;
    let mut out = Vec::with_capacity(horizon);
    for _ in 0..horizon {
        out.push(h);
        h = p.omega + p.alpha * h + p.gamma * (0.5 * h) + p.beta * h;
    }
    out
}

/// The data a likelihood is evaluated on.
struct Problem<'a> {
    spec: GarchSpec,
    y: &'a [f64],
    backcast: f64,
    bounds: Vec<(f64, f64)>,
}

fn bound(h: f64, b: (f64, f64)) -> f64 {
    if h < b.0 {
        b.0
    } else if h > b.1 {
        if h.is_finite() {
            b.1 + (h / b.1).ln()
        } else {
            b.1 + 1000.0
        }
    } else {
        h
    }
}

impl<'a> Problem<'a> {
    /// arch's backcast and bounds from the sample-mean residuals of `y`.
    fn new(spec: GarchSpec, y: &'a [f64]) -> Self {
        let m = y.iter().sum::<f64>() / y.len() as f64;
        let e: Vec<f64> = y.iter().map(|v| v - m).collect();
        Problem {
            spec,
            y,
            backcast: backcast(&e),
            bounds: variance_bounds(&e),
        }
    }

    /// σ²_t, summed in arch's recursion's order.
    fn variances(&self, p: &FamilyParams) -> Vec<f64> {
        let bc = self.backcast;
        let mut out = Vec::with_capacity(self.y.len());
        let (mut e_prev, mut h_prev) = (0.0, bc);
        for (t, y) in self.y.iter().enumerate() {
            let mut h = p.omega;
            if t == 0 {
                h += p.alpha * bc;
                if self.spec.gjr {
                    h += p.gamma * 0.5 * bc;
                }
            } else {
                let e2 = e_prev * e_prev;
                h += p.alpha * e2;
                if self.spec.gjr {
                    h += p.gamma * if e_prev < 0.0 { e2 } else { 0.0 };
                }
            }
            h += p.beta * h_prev;
            let h = bound(h, self.bounds[t]);
            out.push(h);
            e_prev = y - p.mu;
            h_prev = h;
        }
        out
    }

    /// Each observation's log-likelihood, term by term as arch writes it.
    fn contributions(&self, x: &[f64]) -> Vec<f64> {
        let p = FamilyParams::from_slice(&self.spec, x);
        let hs = self.variances(&p);
        let e2 = self.y.iter().map(|y| (y - p.mu) * (y - p.mu));
        match p.nu {
            None => hs
                .iter()
                .zip(e2)
                .map(|(h, e2)| -0.5 * (LN_2PI + h.ln() + e2 / h))
                .collect(),
            Some(nu) => {
                let c = libm::lgamma((nu + 1.0) / 2.0)
                    - libm::lgamma(nu / 2.0)
                    - (std::f64::consts::PI * (nu - 2.0)).ln() / 2.0;
                hs.iter()
                    .zip(e2)
                    .map(|(h, e2)| {
                        c - 0.5 * h.ln() - ((nu + 1.0) / 2.0) * (1.0 + e2 / (h * (nu - 2.0))).ln()
                    })
                    .collect()
            }
        }
    }

    /// The log-likelihood and its exact gradient: dσ²_t/dθ runs beside
    /// σ²_t (zero where a bound holds σ²_t), and ν's constant term is
    /// differenced (libm has no digamma).
    fn gradient(&self, x: &[f64]) -> (f64, Vec<f64>) {
        let spec = self.spec;
        let p = FamilyParams::from_slice(&spec, x);
        let (k, ib) = (x.len(), spec.beta_at());
        let bc = self.backcast;
        let (c, dc) = match p.nu {
            // A step relative to ν: lnΓ grows with ν, its rounding too.
            Some(nu) => (
                t_const(nu),
                (t_const(nu * (1.0 + 1e-4)) - t_const(nu * (1.0 - 1e-4))) / (2e-4 * nu),
            ),
            None => (0.0, 0.0),
        };
        let mut g = vec![0.0; k];
        let mut dh = vec![0.0; k];
        let mut ndh = vec![0.0; k];
        let (mut e_prev, mut h_prev) = (0.0, bc);
        let mut ll = 0.0;
        for (t, y) in self.y.iter().enumerate() {
            let raw = if t == 0 {
                ndh.iter_mut().for_each(|v| *v = 0.0);
                ndh[1] = 1.0;
                ndh[2] = bc;
                ndh[ib] = bc;
                let mut h = p.omega + p.alpha * bc;
                if spec.gjr {
                    ndh[3] = 0.5 * bc;
                    h += p.gamma * 0.5 * bc;
                }
                h + p.beta * bc
            } else {
                let e2 = e_prev * e_prev;
                let ind = if spec.gjr && e_prev < 0.0 { 1.0 } else { 0.0 };
                ndh[0] = -2.0 * (p.alpha + p.gamma * ind) * e_prev + p.beta * dh[0];
                ndh[1] = 1.0 + p.beta * dh[1];
                ndh[2] = e2 + p.beta * dh[2];
                if spec.gjr {
                    ndh[3] = ind * e2 + p.beta * dh[3];
                }
                ndh[ib] = h_prev + p.beta * dh[ib];
                p.omega + p.alpha * e2 + p.gamma * ind * e2 + p.beta * h_prev
            };
            let h = bound(raw, self.bounds[t]);
            // A bounded variance no longer moves with the parameters.
            if h == raw {
                dh.copy_from_slice(&ndh);
            } else {
                dh.iter_mut().for_each(|v| *v = 0.0);
            }
            let e = y - p.mu;
            let (dl_dh, dl_dmu) = match p.nu {
                None => {
                    ll += -0.5 * (LN_2PI + h.ln() + e * e / h);
                    (0.5 * (e * e / h - 1.0) / h, e / h)
                }
                Some(nu) => {
                    let q = e * e / (h * (nu - 2.0));
                    let l1q = q.ln_1p();
                    ll += c - 0.5 * h.ln() - ((nu + 1.0) / 2.0) * l1q;
                    let r = q / (1.0 + q);
                    g[ib + 1] += dc - 0.5 * l1q + ((nu + 1.0) / 2.0) * r / (nu - 2.0);
                    (
                        (-0.5 + ((nu + 1.0) / 2.0) * r) / h,
                        (nu + 1.0) * e / ((1.0 + q) * h * (nu - 2.0)),
                    )
                }
            };
            for (gi, d) in g.iter_mut().zip(&dh).take(ib + 1) {
                *gi += dl_dh * d;
            }
            g[0] += dl_dmu;
            e_prev = e;
            h_prev = h;
        }
        (ll, g)
    }

    /// The gradient and a Hessian by forward differences of it
    /// (symmetrized), for Newton's steps.
    fn derivatives(&self, x: &[f64]) -> (f64, Vec<f64>, Vec<Vec<f64>>) {
        let (f, g) = self.gradient(x);
        let k = x.len();
        let mut h = vec![vec![0.0; k]; k];
        for i in 0..k {
            let step = 1e-7 * x[i].abs().max(0.1);
            let mut moved = x.to_vec();
            moved[i] += step;
            let (_, gi) = self.gradient(&moved);
            for j in 0..k {
                h[i][j] = (gi[j] - g[j]) / step;
            }
        }
        // Symmetric: the mean of the two differences.
        let sym: Vec<Vec<f64>> = (0..k)
            .map(|i| (0..k).map(|j| 0.5 * (h[i][j] + h[j][i])).collect())
            .collect();
        (f, g, sym)
    }

    /// The log-likelihood (numpy's pairwise sum of the terms).
    fn value(&self, x: &[f64]) -> f64 {
        pairwise_sum(&self.contributions(x))
    }
}

/// The Student-t's constant lnΓ((ν+1)/2) − lnΓ(ν/2) − ½ln(π(ν−2)).
fn t_const(nu: f64) -> f64 {
    libm::lgamma((nu + 1.0) / 2.0)
        - libm::lgamma(nu / 2.0)
        - (std::f64::consts::PI * (nu - 2.0)).ln() / 2.0
}

/// The log-likelihood of percent returns `y` at `x` (in the spec's order),
/// with arch's backcast and bounds from `y`'s sample-mean residuals.
pub fn family_loglik(y: &[f64], spec: GarchSpec, x: &[f64]) -> f64 {
    if y.is_empty() || x.len() != spec.names().len() {
        return f64::NAN;
    }
    Problem::new(spec, y).value(x)
}

/// σ²_t of `y` at `x` and the forecast σ²_{T+1..=T+horizon}.
pub fn family_variance(
    y: &[f64],
    spec: GarchSpec,
    x: &[f64],
    horizon: usize,
) -> (Vec<f64>, Vec<f64>) {
    if y.is_empty() || x.len() != spec.names().len() {
        return (Vec::new(), Vec::new());
    }
    let p = FamilyParams::from_slice(&spec, x);
    let h = Problem::new(spec, y).variances(&p);
    let last = h.last().copied().unwrap_or(f64::NAN);
    let fc = forecast(&p, y[y.len() - 1] - p.mu, last, horizon);
    (h, fc)
}

/// Fits the member `spec` to percent returns `y`.
pub fn fit_family(y: &[f64], spec: GarchSpec) -> Result<FamilyFit, TsError> {
    const TEST: &str = "garch";
    check_series(y, super::garch::GARCH_MIN_OBS, TEST)?;
    if is_constant(y) {
        return Err(TsError::Constant { test: TEST });
    }
    let prob = Problem::new(spec, y);
    let x0 = start(&prob);
    let target = mean_square(&prob);
    let (lower, upper) = limits(&spec, target);
    let (x, loglik, iterations) = newton(&prob, x0, &lower, &upper)?;
    let p = FamilyParams::from_slice(&spec, &x);
    Ok(FamilyFit {
        spec,
        loglik,
        backcast: prob.backcast,
        iterations,
        conditional_variance: prob.variances(&p),
        last_residual: y[y.len() - 1] - p.mu,
        params: x,
    })
}

fn mean_square(prob: &Problem<'_>) -> f64 {
    let n = prob.y.len() as f64;
    let m = prob.y.iter().sum::<f64>() / n;
    prob.y.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / n
}

/// arch's bounds (the mean is free).
fn limits(spec: &GarchSpec, target: f64) -> (Vec<f64>, Vec<f64>) {
    let mut lo = vec![f64::NEG_INFINITY, 1e-8 * target, 0.0];
    let mut hi = vec![f64::INFINITY, f64::INFINITY, 1.0];
    if spec.gjr {
        lo.push(-1.0);
        hi.push(2.0);
    }
    lo.push(0.0);
    hi.push(1.0);
    if spec.dist == ErrorDist::StudentT {
        lo.push(NU_MIN);
        hi.push(NU_MAX);
    }
    (lo, hi)
}

/// arch's linear constraints as a·x ≤ b: α + γ/2 + β ≤ 1 and, with the
/// leverage term, −α − γ ≤ 0.
fn constraints(spec: &GarchSpec) -> Vec<(Vec<f64>, f64)> {
    let k = spec.names().len();
    let b = spec.beta_at();
    let mut persistence = vec![0.0; k];
    persistence[2] = 1.0;
    persistence[b] = 1.0;
    let mut out = Vec::new();
    if spec.gjr {
        persistence[3] = 0.5;
        let mut lev = vec![0.0; k];
        lev[2] = -1.0;
        lev[3] = -1.0;
        out.push((lev, 0.0));
    }
    out.insert(0, (persistence, 1.0));
    out
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Slack a constraint may be violated by through rounding.
const SLACK: f64 = 1e-12;

fn feasible(spec: &GarchSpec, x: &[f64], lo: &[f64], hi: &[f64]) -> bool {
    x.iter().all(|v| v.is_finite())
        && x.iter().zip(lo).all(|(v, l)| v >= l)
        && x.iter().zip(hi).all(|(v, h)| v <= h)
        && constraints(spec)
            .iter()
            .all(|(a, b)| dot(a, x) <= b + SLACK)
}

/// The best point of arch's grid, and ν from the kurtosis there.
fn start(prob: &Problem<'_>) -> Vec<f64> {
    let spec = prob.spec;
    let n = prob.y.len() as f64;
    let mu = prob.y.iter().sum::<f64>() / n;
    let target = mean_square(prob);
    let normal = GarchSpec {
        dist: ErrorDist::Normal,
        ..spec
    };
    let gauss = Problem {
        spec: normal,
        y: prob.y,
        backcast: prob.backcast,
        bounds: prob.bounds.clone(),
    };
    let gammas: &[f64] = if spec.gjr {
        &[0.01, 0.05, 0.1, 0.2]
    } else {
        &[0.0]
    };
    let mut best: (f64, Vec<f64>) = (f64::NEG_INFINITY, Vec::new());
    for alpha in [0.01, 0.05, 0.1, 0.2] {
        for &gamma in gammas {
            for total in [0.5, 0.7, 0.9, 0.98] {
                let mut x = vec![mu, (1.0 - total) * target, alpha];
                if spec.gjr {
                    x.push(gamma);
                }
                x.push(total - alpha - gamma / 2.0);
                let v = gauss.value(&x);
                if v > best.0 || best.1.is_empty() {
                    best = (v, x);
                }
            }
        }
    }
    let mut x = best.1;
    if spec.dist == ErrorDist::StudentT {
        let h = gauss.variances(&FamilyParams::from_slice(&normal, &x));
        let z: Vec<f64> = prob
            .y
            .iter()
            .zip(&h)
            .map(|(y, h)| (y - mu) / h.sqrt())
            .collect();
        let zm = z.iter().sum::<f64>() / n;
        let m2 = z.iter().map(|v| (v - zm).powi(2)).sum::<f64>() / n;
        let m4 = z.iter().map(|v| (v - zm).powi(4)).sum::<f64>() / n;
        let k = m4 / (m2 * m2);
        let nu = if k > 3.75 {
            (4.0 * k - 6.0) / (k - 3.0)
        } else {
            12.0
        };
        x.push(nu.max(4.0));
    }
    x
}

/// statsmodels' `approx_hess3` of `f`: four-point central differences with
/// hᵢ = ε^¼·max(|xᵢ|, 0.1), the shifts added as numpy adds them.
fn hessian(f: &dyn Fn(&[f64]) -> f64, x: &[f64]) -> Vec<Vec<f64>> {
    let k = x.len();
    let h: Vec<f64> = x
        .iter()
        .map(|v| f64::EPSILON.powf(0.25) * v.abs().max(0.1))
        .collect();
    let shifted = |i: usize, a: f64, j: usize, b: f64| {
        let mut y = x.to_vec();
        y[i] += a * h[i];
        y[j] += b * h[j];
        y
    };
    let mut out = vec![vec![0.0; k]; k];
    for i in 0..k {
        for j in i..k {
            let v = (f(&shifted(i, 1.0, j, 1.0))
                - f(&shifted(i, 1.0, j, -1.0))
                - (f(&shifted(i, -1.0, j, 1.0)) - f(&shifted(i, -1.0, j, -1.0))))
                / (4.0 * (h[i] * h[j]));
            out[i][j] = v;
            out[j][i] = v;
        }
    }
    out
}

/// Newton's method within the bounds and constraints; (x, log-likelihood,
/// iterations). Bounds and constraints that hold with equality while the
/// gradient pushes through them are active: the step is taken in the null
/// space of their normals (arch's optimum can lie on α + β = 1).
fn newton(
    prob: &Problem<'_>,
    mut x: Vec<f64>,
    lo: &[f64],
    hi: &[f64],
) -> Result<(Vec<f64>, f64, usize), TsError> {
    let spec = prob.spec;
    let cons = constraints(&spec);
    let f = |v: &[f64]| prob.value(v);
    let mut fx = f(&x);
    if !fx.is_finite() || !feasible(&spec, &x, lo, hi) {
        return Err(TsError::NoFit(
            "garch: the likelihood is not finite at the starting values; check the returns for extreme values".into(),
        ));
    }
    let k = x.len();
    for it in 0..MAX_ITER {
        // An iteration is a few passes over the returns (docs §2.4).
        crate::research::checkpoint()?;
        let (_, g, h) = prob.derivatives(&x);
        let mut normals: Vec<Vec<f64>> = (0..k)
            .filter(|&i| (x[i] <= lo[i] && g[i] < 0.0) || (x[i] >= hi[i] && g[i] > 0.0))
            .map(|i| (0..k).map(|j| if i == j { 1.0 } else { 0.0 }).collect())
            .collect();
        normals.extend(
            cons.iter()
                .filter(|(a, b)| dot(a, &x) >= b - SLACK && dot(a, &g) > 0.0)
                .map(|(a, _)| a.clone()),
        );
        // A constraint on its boundary that the step would cross joins the
        // active ones.
        let mut step = None;
        for _ in 0..=cons.len() {
            let z = null_space(&normals, k);
            let Some(d) = damped_step(&g, &h, &z) else {
                break;
            };
            let crossing: Vec<Vec<f64>> = cons
                .iter()
                .filter(|(a, b)| dot(a, &x) >= b - SLACK && dot(a, &d) > 1e-14)
                .map(|(a, _)| a.clone())
                .filter(|a| !normals.contains(a))
                .collect();
            if crossing.is_empty() {
                step = Some(d);
                break;
            }
            normals.extend(crossing);
        }
        let Some(step) = step else {
            return Ok((x, fx, it + 1));
        };
        let decrement = dot(&g, &step);
        if decrement < 2e-10 {
            return Ok((x, fx, it + 1));
        }
        // The longest step the other constraints allow.
        let reach = cons
            .iter()
            .filter(|(a, _)| dot(a, &step) > 1e-14)
            .map(|(a, b)| ((b - dot(a, &x)) / dot(a, &step)).max(0.0))
            .fold(1.0f64, f64::min);
        let mut s = reach;
        let mut moved = false;
        while s > 1e-12 {
            let cand: Vec<f64> = (0..k)
                .map(|i| (x[i] + s * step[i]).clamp(lo[i], hi[i]))
                .collect();
            if feasible(&spec, &cand, lo, hi) {
                let fc = f(&cand);
                let gain = dot(&g, &cand) - dot(&g, &x);
                let near = s == reach && decrement < 1e-6;
                let accept = if near {
                    fc >= fx - 1e-9
                } else {
                    fc >= fx + 1e-4 * gain.max(0.0)
                };
                if fc.is_finite() && accept {
                    x = cand;
                    fx = fc;
                    moved = true;
                    break;
                }
            }
            s *= 0.5;
        }
        if !moved {
            // No ascent along the Newton direction: a maximum to rounding
            // when the promised gain is small, else a failure.
            if decrement < 1e-6 {
                return Ok((x, fx, it + 1));
            }
            return Err(not_converged(it + 1));
        }
    }
    Err(not_converged(MAX_ITER))
}

fn not_converged(iterations: usize) -> TsError {
    TsError::NoFit(format!(
        "garch: the maximum-likelihood fit did not converge ({iterations} Newton iterations); try a longer or cleaner sample, or the normal GARCH"
    ))
}

/// An orthonormal basis (as columns) of the vectors orthogonal to `rows`,
/// by Gram–Schmidt.
fn null_space(rows: &[Vec<f64>], k: usize) -> Vec<Vec<f64>> {
    let mut basis: Vec<Vec<f64>> = Vec::new();
    let orthogonalize = |v: &mut Vec<f64>, against: &[Vec<f64>]| {
        for q in against {
            let c = dot(v, q);
            v.iter_mut().zip(q).for_each(|(x, y)| *x -= c * y);
        }
    };
    for r in rows {
        let mut v = r.clone();
        orthogonalize(&mut v, &basis);
        let n = dot(&v, &v).sqrt();
        if n > 1e-10 {
            basis.push(v.iter().map(|x| x / n).collect());
        }
    }
    let fixed = basis.len();
    for i in 0..k {
        let mut v: Vec<f64> = (0..k).map(|j| if i == j { 1.0 } else { 0.0 }).collect();
        orthogonalize(&mut v, &basis);
        let n = dot(&v, &v).sqrt();
        if n > 1e-8 {
            basis.push(v.iter().map(|x| x / n).collect());
        }
    }
    basis.split_off(fixed)
}

/// The Newton step within the span of `z`: solves (−ZᵀHZ + λD) d = Zᵀg, λ
/// raised from 0 until the matrix is positive definite (D = diag |ZᵀHZ|),
/// and returns Z d.
fn damped_step(g: &[f64], h: &[Vec<f64>], z: &[Vec<f64>]) -> Option<Vec<f64>> {
    let m = z.len();
    if m == 0 {
        return None;
    }
    let hz: Vec<Vec<f64>> = z
        .iter()
        .map(|c| h.iter().map(|row| dot(row, c)).collect())
        .collect();
    let reduced: Vec<f64> = (0..m)
        .flat_map(|r| (0..m).map(move |c| (r, c)))
        .map(|(r, c)| -dot(&z[r], &hz[c]))
        .collect();
    let b: Vec<f64> = z.iter().map(|c| dot(c, g)).collect();
    let mut lambda = 0.0;
    for _ in 0..30 {
        let mut a = reduced.clone();
        for r in 0..m {
            a[r * m + r] += lambda * reduced[r * m + r].abs().max(1e-12);
        }
        if let Some(l) = super::ols::cholesky(&a, m) {
            let y = super::ols::forward(&l, m, &b);
            let d = super::ols::backward(&l, m, &y);
            let mut step = vec![0.0; g.len()];
            for (c, dc) in z.iter().zip(&d) {
                step.iter_mut().zip(c).for_each(|(s, v)| *s += dc * v);
            }
            return Some(step);
        }
        lambda = if lambda == 0.0 { 1e-6 } else { lambda * 10.0 };
    }
    None
}

/// Standard errors and tests of a family member's parameters (docs §16.5.1).
#[derive(Clone, Debug, PartialEq)]
pub struct FamilyInference {
    /// Robust (sandwich); NaN where the covariance's diagonal is not positive.
    pub std_err: Vec<f64>,
    pub t_stat: Vec<f64>,
    pub p_value: Vec<f64>,
    /// Classic (inverse-Hessian).
    pub classic_std_err: Vec<f64>,
}

/// arch's robust and classic standard errors of `spec` on percent returns
/// `y` at `x`: its numerical Hessian of the negative log-likelihood over n
/// and the covariance of forward-difference scores, H⁻¹SH⁻¹/n and H⁻¹/n.
pub fn family_inference(y: &[f64], spec: GarchSpec, x: &[f64]) -> Result<FamilyInference, TsError> {
    check_series(y, 2, "garch")?;
    let k = spec.names().len();
    if x.len() != k {
        return Err(TsError::Input(format!(
            "garch: {k} parameters expected ({}), got {}",
            spec.names().join(", "),
            x.len()
        )));
    }
    let prob = Problem::new(spec, y);
    let n = y.len() as f64;
    let neg = |v: &[f64]| -prob.value(v);
    let mut hess = hessian(&neg, x);
    hess.iter_mut().flatten().for_each(|v| *v /= n);
    let inv = invert(&hess).ok_or_else(|| {
        TsError::NoFit(
            "garch: the log-likelihood's Hessian is singular at these parameters, so they have no standard errors".into(),
        )
    })?;
    let s = score_covariance(&prob, x);
    let robust = mul(&mul(&inv, &s), &inv);
    let se = |c: &[Vec<f64>], i: usize| {
        let v = c[i][i] / n;
        if v > 0.0 { v.sqrt() } else { f64::NAN }
    };
    let std_err: Vec<f64> = (0..k).map(|i| se(&robust, i)).collect();
    let t_stat: Vec<f64> = (0..k).map(|i| x[i] / std_err[i]).collect();
    Ok(FamilyInference {
        p_value: t_stat.iter().map(|t| 2.0 * norm_cdf(-t.abs())).collect(),
        classic_std_err: (0..k).map(|i| se(&inv, i)).collect(),
        std_err,
        t_stat,
    })
}

/// The sample covariance (ddof 1) of forward-difference per-observation
/// scores (statsmodels' `approx_fprime`).
fn score_covariance(prob: &Problem<'_>, x: &[f64]) -> Vec<Vec<f64>> {
    let base = prob.contributions(x);
    let nobs = base.len() as f64;
    let k = x.len();
    let scores: Vec<Vec<f64>> = (0..k)
        .map(|i| {
            let step = f64::EPSILON.sqrt() * x[i].abs().max(0.1);
            let mut moved = x.to_vec();
            moved[i] += step;
            let up = prob.contributions(&moved);
            up.iter().zip(&base).map(|(u, b)| (b - u) / step).collect()
        })
        .collect();
    let means: Vec<f64> = scores
        .iter()
        .map(|s| s.iter().sum::<f64>() / nobs)
        .collect();
    let mut out = vec![vec![0.0; k]; k];
    for i in 0..k {
        for j in i..k {
            let c = scores[i]
                .iter()
                .zip(&scores[j])
                .map(|(a, b)| (a - means[i]) * (b - means[j]))
                .sum::<f64>()
                / (nobs - 1.0);
            out[i][j] = c;
            out[j][i] = c;
        }
    }
    out
}

fn mul(a: &[Vec<f64>], b: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let k = a.len();
    (0..k)
        .map(|i| {
            (0..k)
                .map(|j| (0..k).map(|m| a[i][m] * b[m][j]).sum())
                .collect()
        })
        .collect()
}

/// Gauss–Jordan inverse with partial pivoting; `None` when a pivot vanishes.
fn invert(a: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let k = a.len();
    let mut m = a.to_vec();
    let mut inv: Vec<Vec<f64>> = (0..k)
        .map(|i| (0..k).map(|j| if i == j { 1.0 } else { 0.0 }).collect())
        .collect();
    let scale = a.iter().flatten().fold(0.0f64, |s, v| s.max(v.abs()));
    for col in 0..k {
        let piv = (col..k).max_by(|&r, &s| m[r][col].abs().total_cmp(&m[s][col].abs()))?;
        let p = m[piv][col].abs();
        if p.is_nan() || p <= 1e-14 * scale {
            return None;
        }
        m.swap(col, piv);
        inv.swap(col, piv);
        let d = m[col][col];
        for c in 0..k {
            m[col][c] /= d;
            inv[col][c] /= d;
        }
        for r in 0..k {
            if r != col {
                let f = m[r][col];
                for c in 0..k {
                    m[r][c] -= f * m[col][c];
                    inv[r][c] -= f * inv[col][c];
                }
            }
        }
    }
    Some(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seeded GJR path with fat-tailed shocks (xorshift, a sum of
    /// uniforms cubed for the tails).
    fn simulate(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed;
        let mut uniform = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let (omega, alpha, gamma, beta): (f64, f64, f64, f64) = (0.03, 0.03, 0.1, 0.88);
        let mut h = omega / (1.0 - alpha - gamma / 2.0 - beta);
        (0..n)
            .map(|_| {
                let z =
                    (-2.0 * uniform().ln()).sqrt() * (2.0 * std::f64::consts::PI * uniform()).cos();
                let e = h.sqrt() * z;
                h = omega + (alpha + if e < 0.0 { gamma } else { 0.0 }) * e * e + beta * h;
                0.04 + e
            })
            .collect()
    }

    #[test]
    fn gjr_recovers_its_leverage_and_is_a_maximum() {
        let y = simulate(4000, 11);
        let spec = GarchSpec {
            gjr: true,
            dist: ErrorDist::Normal,
        };
        let fit = fit_family(&y, spec).unwrap();
        let p = fit.named();
        assert!((p.gamma - 0.1).abs() < 0.05, "{p:?}");
        assert!((p.beta - 0.88).abs() < 0.05, "{p:?}");
        for d in [1e-4, -1e-4] {
            for i in 0..fit.params.len() {
                let mut q = fit.params.clone();
                q[i] += d;
                let (lo, hi) = limits(&spec, 1.0);
                if feasible(&spec, &q, &lo, &hi) {
                    assert!(family_loglik(&y, spec, &q) <= fit.loglik + 1e-9, "{i} {d}");
                }
            }
        }
        // The forecast decays toward the long-run variance.
        let f = fit.forecast(60);
        let lr = fit.long_run_variance().unwrap();
        assert!((f[59] - lr).abs() < (f[0] - lr).abs());
        assert_eq!(family_variance(&y, spec, &fit.params, 3).1, fit.forecast(3));
    }

    #[test]
    fn t_errors_on_normal_data_push_nu_up_and_lose_nothing() {
        let y = simulate(1500, 5);
        let t = fit_family(
            &y,
            GarchSpec {
                gjr: true,
                dist: ErrorDist::StudentT,
            },
        )
        .unwrap();
        let nu = t.named().nu.unwrap();
        assert!(nu > 15.0, "{nu}");
        let normal = fit_family(
            &y,
            GarchSpec {
                gjr: true,
                dist: ErrorDist::Normal,
            },
        )
        .unwrap();
        // The t nests the normal as ν → ∞: its fit is at least nearly as good.
        assert!(
            t.loglik > normal.loglik - 1.0,
            "{} {}",
            t.loglik,
            normal.loglik
        );
    }

    #[test]
    fn the_exact_gradient_matches_differences() {
        let y = simulate(600, 3);
        for (gjr, dist, x) in [
            (false, ErrorDist::Normal, vec![0.03, 0.05, 0.08, 0.85]),
            (
                false,
                ErrorDist::StudentT,
                vec![0.03, 0.05, 0.08, 0.85, 6.0],
            ),
            (true, ErrorDist::Normal, vec![0.03, 0.05, 0.04, 0.1, 0.85]),
            (
                true,
                ErrorDist::StudentT,
                vec![0.03, 0.05, 0.04, 0.1, 0.85, 7.0],
            ),
        ] {
            let prob = Problem::new(GarchSpec { gjr, dist }, &y);
            let (f, g) = prob.gradient(&x);
            assert!((f - prob.value(&x)).abs() < 1e-9 * f.abs());
            for i in 0..x.len() {
                let step = 1e-6 * x[i].abs().max(0.1);
                let (mut a, mut b) = (x.clone(), x.clone());
                a[i] += step;
                b[i] -= step;
                let num = (prob.value(&a) - prob.value(&b)) / (2.0 * step);
                assert!(
                    (num - g[i]).abs() < 1e-5 * g[i].abs().max(1.0),
                    "{gjr} {dist:?} g{i}: {num} vs {}",
                    g[i]
                );
            }
        }
    }

    #[test]
    fn inversion_undoes_a_matrix() {
        let a = vec![
            vec![4.0, 1.0, 0.5],
            vec![1.0, 3.0, 0.2],
            vec![0.5, 0.2, 2.0],
        ];
        let i = mul(&a, &invert(&a).unwrap());
        for (r, row) in i.iter().enumerate() {
            for (c, v) in row.iter().enumerate() {
                assert!((v - if r == c { 1.0 } else { 0.0 }).abs() < 1e-14);
            }
        }
        assert!(invert(&vec![vec![1.0; 3]; 3]).is_none());
    }
}
