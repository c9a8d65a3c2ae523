//! One result row per cell and window, and its line in shard and journal
//! files: `cell,window,final_value,total_return,sharpe,max_drawdown,trade_count`
//! then the power sums of the excess returns (`n,s1,s2,s3,s4`: what the
//! report's deflated Sharpe reads, pooled over walk-forward test windows),
//! with each float in Rust's shortest form that reads back to the same
//! bits, so the same row is always the same bytes (docs §18.3).

/// The metrics of one cell over one window (docs §7.5).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row {
    pub cell: usize,
    /// Index into the plan's windows.
    pub window: usize,
    pub final_value: f64,
    pub total_return: f64,
    pub sharpe: f64,
    pub max_drawdown: f64,
    pub trade_count: u64,
    /// The per-bar excess returns' count and sums of their powers 1..4.
    pub moments: PowerSums,
}

/// n and Σx, Σx², Σx³, Σx⁴ of a return series: moments that add up
/// across windows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PowerSums {
    pub n: u64,
    pub s: [f64; 4],
}

impl PowerSums {
    pub fn of(x: &[f64]) -> PowerSums {
        let mut s = [0.0; 4];
        for &v in x {
            let v2 = v * v;
            s[0] += v;
            s[1] += v2;
            s[2] += v2 * v;
            s[3] += v2 * v2;
        }
        PowerSums {
            n: x.len() as u64,
            s,
        }
    }

    pub fn add(&mut self, o: &PowerSums) {
        self.n += o.n;
        for (a, b) in self.s.iter_mut().zip(&o.s) {
            *a += b;
        }
    }

    /// The moments PSR reads (docs §17.3): per-period Sharpe, population
    /// skewness and kurtosis; `None` under 3 returns or no dispersion.
    pub fn moments(&self) -> Option<crate::research::overfitting::SharpeMoments> {
        if self.n < 3 {
            return None;
        }
        let n = self.n as f64;
        let m = self.s[0] / n;
        let (e2, e3, e4) = (self.s[1] / n, self.s[2] / n, self.s[3] / n);
        let m2 = (e2 - m * m).max(0.0);
        let m3 = e3 - 3.0 * m * e2 + 2.0 * m * m * m;
        let m4 = e4 - 4.0 * m * e3 + 6.0 * m * m * e2 - 3.0 * m.powi(4);
        if m2 <= 0.0 {
            return None;
        }
        let std = (m2 * n / (n - 1.0)).sqrt();
        Some(crate::research::overfitting::SharpeMoments {
            n: self.n as usize,
            mean: m,
            std,
            sharpe: m / std,
            skewness: m3 / m2.powf(1.5),
            kurtosis: m4 / (m2 * m2),
        })
    }
}

/// The column line of shard and journal files.
pub const ROW_HEADER: &str =
    "cell,window,final_value,total_return,sharpe,max_drawdown,trade_count,n,s1,s2,s3,s4";

impl Row {
    /// The metric `rank_by` names (see `spec::METRICS`).
    pub fn metric(&self, name: &str) -> f64 {
        match name {
            "total_return" => self.total_return,
            "final_value" => self.final_value,
            "max_drawdown" => self.max_drawdown,
            "trade_count" => self.trade_count as f64,
            _ => self.sharpe,
        }
    }

    /// The row's line (no newline).
    pub fn to_line(&self) -> String {
        let mut line = String::with_capacity(160);
        self.push_line(&mut line);
        line
    }

    /// Appends [`Row::to_line`] to `out`, with no string of its own per
    /// value: the journal writes a line per cell and window while the
    /// workers run, on the same cores.
    pub fn push_line(&self, out: &mut String) {
        use std::fmt::Write;
        // Writing into a String cannot fail.
        let _ = write!(out, "{},{},", self.cell, self.window);
        for x in [
            self.final_value,
            self.total_return,
            self.sharpe,
            self.max_drawdown,
        ] {
            push_f64(out, x);
            out.push(',');
        }
        let _ = write!(out, "{},{}", self.trade_count, self.moments.n);
        for x in self.moments.s {
            out.push(',');
            push_f64(out, x);
        }
    }

    /// Reads a line written by [`Row::to_line`].
    pub fn parse(line: &str) -> Option<Row> {
        let mut f = line.split(',');
        let mut next = || f.next();
        let row = Row {
            cell: next()?.parse().ok()?,
            window: next()?.parse().ok()?,
            final_value: parse_f64(next()?)?,
            total_return: parse_f64(next()?)?,
            sharpe: parse_f64(next()?)?,
            max_drawdown: parse_f64(next()?)?,
            trade_count: next()?.parse().ok()?,
            moments: PowerSums {
                n: next()?.parse().ok()?,
                s: [
                    parse_f64(next()?)?,
                    parse_f64(next()?)?,
                    parse_f64(next()?)?,
                    parse_f64(next()?)?,
                ],
            },
        };
        next().is_none().then_some(row)
    }
}

/// Shortest round-trip form; NaN and infinities spelled out.
pub fn fmt_f64(x: f64) -> String {
    let mut s = String::new();
    push_f64(&mut s, x);
    s
}

/// [`fmt_f64`] appended to `out`.
fn push_f64(out: &mut String, x: f64) {
    use std::fmt::Write;
    if x.is_nan() {
        out.push_str("NaN");
    } else if x.is_infinite() {
        out.push_str(if x > 0.0 { "inf" } else { "-inf" });
    } else {
        let _ = write!(out, "{x:?}");
    }
}

fn parse_f64(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        s => s.parse().ok(),
    }
}

/// Every row of a sweep, in cell order then window order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Results {
    pub rows: Vec<Row>,
}

impl Results {
    /// Sorts into cell, window order.
    pub fn from_rows(mut rows: Vec<Row>) -> Results {
        rows.sort_by_key(|r| (r.cell, r.window));
        Results { rows }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_to_the_same_bits() {
        let r = Row {
            cell: 7,
            window: 1,
            final_value: 1_234_567.891_234_567_8,
            total_return: 0.1 + 0.2,
            sharpe: f64::NAN,
            max_drawdown: -0.0,
            trade_count: 12,
            moments: PowerSums::of(&[0.01, -0.02, 0.005]),
        };
        let back = Row::parse(&r.to_line()).unwrap();
        assert_eq!(back.final_value.to_bits(), r.final_value.to_bits());
        assert_eq!(back.total_return.to_bits(), r.total_return.to_bits());
        assert!(back.sharpe.is_nan());
        assert_eq!(back.max_drawdown.to_bits(), (-0.0f64).to_bits());
        assert_eq!(back.to_line(), r.to_line());
        assert_eq!(back.moments, r.moments);
        assert!(Row::parse("7,1,2.0,3").is_none(), "a torn line");
        assert!(Row::parse(&format!("{},9", r.to_line())).is_none());
    }
}

#[cfg(test)]
mod moment_tests {
    use super::*;
    use crate::research::overfitting::SharpeMoments;

    #[test]
    fn power_sums_give_the_moments_of_the_series() {
        let x: Vec<f64> = (0..500)
            .map(|i| ((i * 37 % 101) as f64 - 50.0) * 1e-3 + 2e-4)
            .collect();
        let want = SharpeMoments::of(&x).unwrap();
        let mut pooled = PowerSums::of(&x[..200]);
        pooled.add(&PowerSums::of(&x[200..]));
        let got = pooled.moments().unwrap();
        assert_eq!(got.n, want.n);
        for (a, b) in [
            (got.sharpe, want.sharpe),
            (got.skewness, want.skewness),
            (got.kurtosis, want.kurtosis),
            (got.std, want.std),
        ] {
            assert!((a - b).abs() < 1e-9 * b.abs().max(1.0), "{a} vs {b}");
        }
    }
}
