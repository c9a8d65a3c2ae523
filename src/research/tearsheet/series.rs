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
    let mut sharpe = Vec::with_capacity(n);
    let mut sortino = Vec::with_capacity(n);
    let mut vol = Vec::with_capacity(n);
    let mut win = Window::default();
    let ann = ppy.sqrt();
    for (i, v) in x.iter().enumerate() {
        win.add(*v, 1.0);
        win.n += 1;
        if let Some(old) = i.checked_sub(w).and_then(|j| x.get(j)) {
            win.add(*old, -1.0);
            win.n -= 1;
        }
        let full = win.n == w && w > 1;
        let wf = w as f64;
        let m = win.s / wf;
        let sd = ((win.ss - win.s * m) / (wf - 1.0)).max(0.0).sqrt();
        let down = (win.neg2.max(0.0) / wf).sqrt();
        let put = |out: &mut Vec<Option<f64>>, value: f64| {
            out.push(if full { super::calc::opt(value) } else { None });
        };
        put(&mut vol, sd * ann);
        put(&mut sharpe, m / sd * ann);
        put(&mut sortino, m / down * ann);
    }
    let roll = |statistic: &str, values| Rolling {
        statistic: statistic.into(),
        window: w,
        values,
    };
    [
        roll("sharpe", sharpe),
        roll("sortino", sortino),
        roll("volatility", vol),
    ]
}

/// Rolling beta of `r` on `b` over `w` days (cov / var of the window).
pub(crate) fn rolling_beta(r: &[f64], b: &[f64], w: usize) -> Rolling {
    let (mut sr, mut sb, mut sbb, mut srb) = (0.0, 0.0, 0.0, 0.0);
    let wf = w as f64;
    let mut values = Vec::with_capacity(r.len());
    for (i, (x, y)) in r.iter().zip(b).enumerate() {
        sr += x;
        sb += y;
        sbb += y * y;
        srb += x * y;
        let old = i.checked_sub(w).and_then(|j| Some((r.get(j)?, b.get(j)?)));
        if let Some((x, y)) = old {
            sr -= x;
            sb -= y;
            sbb -= y * y;
            srb -= x * y;
        }
        let cov = srb - sr * sb / wf;
        let var = sbb - sb * sb / wf;
        let full = i + 1 >= w && w > 1 && var > 0.0;
        values.push(if full {
            super::calc::opt(cov / var)
        } else {
            None
        });
    }
    values.resize(r.len(), None);
    Rolling {
        statistic: "beta".into(),
        window: w,
        values,
    }
}
