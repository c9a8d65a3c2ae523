//! The curves: growth of 1, the underwater curve and the rolling 6- and
//! 12-month statistics, each in one pass of running sums.

use super::Rolling;

/// Compounded growth of 1 (a NaN day keeps the previous value).
pub(crate) fn equity(r: &[f64]) -> Vec<f64> {
    let mut g = 1.0;
    r.iter()
        .map(|x| {
            if x.is_finite() {
                g *= 1.0 + x;
            }
            g
        })
        .collect()
}

/// Running sums over a window of `w` values.
#[derive(Default)]
struct Window {
    n: usize,
    s: f64,
    ss: f64,
    neg2: f64,
}

impl Window {
    fn add(&mut self, x: f64, sign: f64) {
        self.s += sign * x;
        self.ss += sign * x * x;
        if x < 0.0 {
            self.neg2 += sign * x * x;
        }
    }
}

/// Rolling Sharpe, Sortino and volatility (quantstats' `rolling_*`,
/// annualised by √`ppy`) of excess returns `x` over `w` days, aligned
/// with `x`: `None` until the window is full.
pub(crate) fn rolling_single(x: &[f64], w: usize, ppy: f64) -> [Rolling; 3] {
    let n = x.len();
    let mut sharpe = vec![None; n];
    let mut sortino = vec![None; n];
    let mut vol = vec![None; n];
    let mut win = Window::default();
    let ann = ppy.sqrt();
    for i in 0..n {
        win.add(x.get(i).copied().unwrap_or(0.0), 1.0);
        win.n += 1;
        if i >= w {
            win.add(x.get(i - w).copied().unwrap_or(0.0), -1.0);
            win.n -= 1;
        }
        if win.n == w && w > 1 {
            let wf = w as f64;
            let m = win.s / wf;
            let var = ((win.ss - win.s * m) / (wf - 1.0)).max(0.0);
            let sd = var.sqrt();
            vol[i] = super::calc::opt(sd * ann);
            sharpe[i] = super::calc::opt(m / sd * ann);
            let down = (win.neg2.max(0.0) / wf).sqrt();
            sortino[i] = super::calc::opt(m / down * ann);
        }
    }
    [
        Rolling {
            statistic: "sharpe".into(),
            window: w,
            values: sharpe,
        },
        Rolling {
            statistic: "sortino".into(),
            window: w,
            values: sortino,
        },
        Rolling {
            statistic: "volatility".into(),
            window: w,
            values: vol,
        },
    ]
}

/// Rolling beta of `r` on `b` over `w` days (cov / var of the window).
pub(crate) fn rolling_beta(r: &[f64], b: &[f64], w: usize) -> Rolling {
    let n = r.len().min(b.len());
    let mut out = vec![None; r.len()];
    let (mut sr, mut sb, mut sbb, mut srb) = (0.0, 0.0, 0.0, 0.0);
    for i in 0..n {
        let (x, y) = (
            r.get(i).copied().unwrap_or(0.0),
            b.get(i).copied().unwrap_or(0.0),
        );
        sr += x;
        sb += y;
        sbb += y * y;
        srb += x * y;
        if i >= w {
            let (x, y) = (
                r.get(i - w).copied().unwrap_or(0.0),
                b.get(i - w).copied().unwrap_or(0.0),
            );
            sr -= x;
            sb -= y;
            sbb -= y * y;
            srb -= x * y;
        }
        if i + 1 >= w && w > 1 {
            let wf = w as f64;
            let cov = srb - sr * sb / wf;
            let var = sbb - sb * sb / wf;
            if let (Some(slot), true) = (out.get_mut(i), var > 0.0) {
                *slot = super::calc::opt(cov / var);
            }
        }
    }
    Rolling {
        statistic: "beta".into(),
        window: w,
        values: out,
    }
}
