//! Formula checks of the tear sheet on series small enough to work by
//! hand.

use chrono::NaiveDate;

use super::*;

fn day(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

fn input(dates: &[&str], r: &[f64]) -> TearSheetInput {
    TearSheetInput {
        title: "t".into(),
        dates: dates.iter().map(|d| day(d)).collect(),
        returns: r.to_vec(),
        ..TearSheetInput::default()
    }
}

fn metric(t: &TearSheet, key: &str) -> Option<f64> {
    t.metrics.iter().find(|m| m.key == key).unwrap().value
}

#[test]
fn drawdown_periods_start_trough_end_and_recovery() {
    let d = [
        "2020-01-01",
        "2020-01-02",
        "2020-01-03",
        "2020-01-06",
        "2020-01-07",
        "2020-01-08",
    ];
    let t = compute(&input(&d, &[-0.01, 0.005, 0.02, -0.10, -0.05, 0.01])).unwrap();
    assert_eq!(t.drawdowns.len(), 2);
    let worst = &t.drawdowns[0];
    assert_eq!(worst.start, day("2020-01-06"));
    assert_eq!(worst.trough, day("2020-01-07"));
    assert_eq!(worst.recovery, None);
    assert_eq!(worst.days, 3);
    assert!((worst.depth - (0.9 * 0.95 - 1.0)).abs() < 1e-12);
    let first = &t.drawdowns[1];
    assert_eq!(
        (first.start, first.end),
        (day("2020-01-01"), day("2020-01-02"))
    );
    assert_eq!(first.recovery, Some(day("2020-01-03")));
    assert_eq!(first.days, 2);
}

#[test]
fn gaps_are_skipped_by_statistics_and_carried_by_curves() {
    let d = ["2021-01-04", "2021-01-05", "2021-01-06", "2021-02-01"];
    let t = compute(&input(&d, &[0.01, f64::NAN, -0.02, 0.03])).unwrap();
    let kept = [0.01f64, -0.02, 0.03];
    let m = kept.iter().sum::<f64>() / 3.0;
    let sd = (kept.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / 2.0).sqrt();
    let sharpe = metric(&t, "sharpe").unwrap();
    assert!((sharpe - m / sd * 252f64.sqrt()).abs() < 1e-12);
    assert_eq!(t.series.equity[1], t.series.equity[0]);
    assert_eq!(t.monthly.years, vec![2021]);
    let jan = t.monthly.cells[0][0].unwrap();
    assert!((jan - (1.01 * 0.98 - 1.0)).abs() < 1e-15);
    assert!(t.monthly.cells[0][2].is_none());
}

#[test]
fn excess_returns_use_the_daily_risk_free_rate() {
    let d = ["2021-01-04", "2021-01-05", "2021-01-06", "2021-01-07"];
    let r = [0.01, -0.005, 0.007, 0.002];
    let mut i = input(&d, &r);
    i.risk_free = Some(RiskFreeInput {
        source: "test".into(),
        daily: vec![0.0001; 4],
    });
    let t = compute(&i).unwrap();
    let x: Vec<f64> = r.iter().map(|v| v - 0.0001).collect();
    let m = x.iter().sum::<f64>() / 4.0;
    let sd = (x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / 3.0).sqrt();
    assert!((metric(&t, "sharpe").unwrap() - m / sd * 252f64.sqrt()).abs() < 1e-12);
    // CAGR is of the returns themselves, as quantstats'.
    let growth: f64 = r.iter().map(|v| 1.0 + v).product();
    let cagr = growth.powf(252.0 / 4.0) - 1.0;
    assert!((metric(&t, "cagr").unwrap() - cagr).abs() < 1e-9 * cagr.abs());
}

#[test]
fn benchmark_rows_and_bad_input() {
    let d = ["2021-01-04", "2021-01-05", "2021-01-06"];
    let mut i = input(&d, &[0.01, -0.02, 0.03]);
    i.benchmark = Some(Benchmark {
        name: "SPY".into(),
        returns: vec![0.005, -0.01, 0.015],
    });
    let t = compute(&i).unwrap();
    assert!((metric(&t, "beta").unwrap() - 2.0).abs() < 1e-12);
    let beta = t.metrics.iter().find(|m| m.key == "beta").unwrap();
    assert_eq!(beta.benchmark, None);
    let vol = t.metrics.iter().find(|m| m.key == "volatility").unwrap();
    assert!(vol.benchmark.is_some());
    i.returns.pop();
    assert!(matches!(compute(&i), Err(TearSheetError::Length { .. })));
    let mut u = input(&["2021-01-05", "2021-01-04"], &[0.0, 0.0]);
    assert!(matches!(compute(&u), Err(TearSheetError::Unsorted(_))));
    u.dates.reverse();
    u.returns = vec![f64::NAN, f64::NAN];
    assert!(matches!(compute(&u), Err(TearSheetError::Empty)));
}

#[test]
fn positions_give_exposure_and_turnover() {
    let d = ["2021-01-04", "2021-01-05", "2021-01-06"];
    let mut i = input(&d, &[0.0, 0.01, 0.0]);
    i.positions = Some(PositionsInput {
        codes: vec!["A".into(), "B".into()],
        weights: vec![vec![0.5, 0.0], vec![0.5, -0.25], vec![0.0, -0.25]],
    });
    let p = compute(&i).unwrap().positions.unwrap();
    assert_eq!(p.gross, vec![0.5, 0.75, 0.25]);
    assert_eq!(p.net, vec![0.5, 0.25, -0.25]);
    assert_eq!(p.turnover, vec![0.25, 0.125, 0.25]);
    assert_eq!(p.codes, vec!["A".to_string(), "B".to_string()]);
}

#[test]
fn rolling_statistics_match_their_window_formulas() {
    let n = 300;
    let start = day("2015-01-01");
    let dates: Vec<NaiveDate> = (0..n)
        .map(|i| start + chrono::Days::new(i as u64))
        .collect();
    let r: Vec<f64> = (0..n)
        .map(|i| 0.01 * ((i as f64) * 0.7).sin() + 0.0004)
        .collect();
    let b: Vec<f64> = (0..n).map(|i| 0.008 * ((i as f64) * 0.3).cos()).collect();
    let mut i = TearSheetInput {
        dates,
        returns: r.clone(),
        ..TearSheetInput::default()
    };
    i.benchmark = Some(Benchmark {
        name: "b".into(),
        returns: b.clone(),
    });
    let t = compute(&i).unwrap();
    let get = |stat: &str, w: usize| {
        t.series
            .rolling
            .iter()
            .find(|x| x.statistic == stat && x.window == w)
            .unwrap()
            .values
            .clone()
    };
    for w in [126usize, 252] {
        let sharpe = get("sharpe", w);
        assert!(sharpe[w - 2].is_none() && sharpe[w - 1].is_some());
        let last = &r[n - w..];
        let m = last.iter().sum::<f64>() / w as f64;
        let sd = (last.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (w - 1) as f64).sqrt();
        let want = m / sd * 252f64.sqrt();
        assert!((sharpe[n - 1].unwrap() - want).abs() < 1e-9 * want.abs());
        let down = (last
            .iter()
            .filter(|x| **x < 0.0)
            .map(|x| x * x)
            .sum::<f64>()
            / w as f64)
            .sqrt();
        let sortino = get("sortino", w)[n - 1].unwrap();
        assert!((sortino - m / down * 252f64.sqrt()).abs() < 1e-9 * sortino.abs());
        let lb = &b[n - w..];
        let mb = lb.iter().sum::<f64>() / w as f64;
        let cov: f64 = last.iter().zip(lb).map(|(x, y)| (x - m) * (y - mb)).sum();
        let var: f64 = lb.iter().map(|y| (y - mb) * (y - mb)).sum();
        let beta = get("beta", w)[n - 1].unwrap();
        assert!((beta - cov / var).abs() < 1e-9 * (cov / var).abs().max(1e-3));
    }
}
