//! The factor expression language (docs §17.7): the parser's round trips
//! and caret errors, every operator on a tiny panel whose values were worked
//! out by hand (in the comments), the groups file, and the no-look-ahead
//! rule on the offline market: perturbing every price after a date changes
//! no value on or before it.

use chrono::NaiveDate;
use proptest::prelude::*;
use vibedesk::research::Interrupt;
use vibedesk::research::data::{Bars, embedded};
use vibedesk::research::factor::expr::{
    Expr, ExprError, Groups, GroupsError, Input, LineProblem, OhlcvPanel, ParseErrorKind, TsFn,
    evaluate, parse,
};

const N: f64 = f64::NAN;

/// Three symbols A, B, C over five dates; C has no bar on the second.
/// close (rows = dates):  A B C
///                        1 5 2
///                        2 3 –
///                        3 3 4
///                        4 1 4
///                        5 2 8
/// volume: A 10 always, B 1 2 3 4 5, C 2 always; high = close + 1,
/// low = close − 1, open = close.
fn tiny() -> OhlcvPanel {
    let close = vec![1., 5., 2., 2., 3., N, 3., 3., 4., 4., 1., 4., 5., 2., 8.];
    let volume = vec![
        10., 1., 2., 10., 2., N, 10., 3., 2., 10., 4., 2., 10., 5., 2.,
    ];
    let d0 = NaiveDate::from_ymd_opt(2020, 1, 6).unwrap();
    OhlcvPanel {
        dates: (0..5).map(|i| d0 + chrono::Days::new(i)).collect(),
        symbols: vec!["A".into(), "B".into(), "C".into()],
        open: close.clone(),
        high: close.iter().map(|c| c + 1.0).collect(),
        low: close.iter().map(|c| c - 1.0).collect(),
        close,
        volume,
    }
}

fn groups() -> Groups {
    Groups::parse("symbol,group\nA,tech\nB,tech\nC,energy\n").unwrap()
}

fn eval_one(src: &str) -> Vec<f64> {
    let e = parse(src).unwrap_or_else(|e| panic!("{src}:\n{e}"));
    evaluate(&[e], &tiny(), Some(&groups())).unwrap().remove(0)
}

fn same(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-12 * b.abs().max(1.0)
}

fn check(src: &str, want: &[f64]) {
    let got = eval_one(src);
    assert_eq!(got.len(), want.len(), "{src}");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            same(*g, *w),
            "{src}: date {} symbol {}: got {g}, want {w}",
            k / 3,
            k % 3
        );
    }
}

#[test]
fn time_series_operators_match_hand_computed_values() {
    check(
        "delay(close, 1)",
        &[N, N, N, 1., 5., 2., 2., 3., N, 3., 3., 4., 4., 1., 4.],
    );
    // close[t] − close[t−2]
    check(
        "delta(close, 2)",
        &[N, N, N, N, N, N, 2., -2., 2., 2., -2., N, 2., -1., 4.],
    );
    // C's window holds its missing bar until the last date.
    let sum3 = [N, N, N, N, N, N, 6., 11., N, 9., 7., N, 12., 6., 16.];
    check("ts_sum(close, 3)", &sum3);
    check("Sum(close, 3.7)", &sum3);
    check(
        "ts_mean(close, 2)",
        &[N, N, N, 1.5, 4., N, 2.5, 3., N, 3.5, 2., 4., 4.5, 1.5, 6.],
    );
    check(
        "product(close, 2)",
        &[N, N, N, 2., 15., N, 6., 9., N, 12., 3., 16., 20., 2., 32.],
    );
    let min3 = [N, N, N, N, N, N, 1., 3., N, 2., 1., N, 3., 1., 4.];
    check("ts_min(close, 3)", &min3);
    check("min(close, 3)", &min3);
    let max3 = [N, N, N, N, N, N, 3., 5., N, 4., 3., N, 5., 3., 8.];
    check("ts_max(close, 3)", &max3);
    check("MAX(close, 3)", &max3);
    // Oldest = 1; B's [5,3,3] has its max first, ties keep the earliest.
    check(
        "ts_argmax(close, 3)",
        &[N, N, N, N, N, N, 3., 1., N, 3., 1., N, 3., 1., 3.],
    );
    check(
        "ts_argmin(close, 3)",
        &[N, N, N, N, N, N, 1., 2., N, 1., 3., N, 1., 2., 1.],
    );
    // B [5,3,3]: today ties one other → (0 + 1.5)/3; [3,3,1] → 1/3; [3,1,2] → 2/3.
    check(
        "ts_rank(close, 3)",
        &[
            N,
            N,
            N,
            N,
            N,
            N,
            1.,
            0.5,
            N,
            1.,
            1. / 3.,
            N,
            1.,
            2. / 3.,
            1.,
        ],
    );
    // B [5,3,3] and [3,3,1]: squared deviations sum to 8/3, variance 4/3;
    // C [4,4,8]: 32/3, variance 16/3.
    let (b, c) = ((4.0f64 / 3.0).sqrt(), (16.0f64 / 3.0).sqrt());
    check(
        "stddev(close, 3)",
        &[N, N, N, N, N, N, 1., b, N, 1., b, N, 1., 1., c],
    );
    // Weights 1, 2, 3 (today) over 6: A (1+4+9)/6, B (5+6+9)/6, …
    check(
        "decay_linear(close, 3)",
        &[
            N,
            N,
            N,
            N,
            N,
            N,
            7. / 3.,
            10. / 3.,
            N,
            10. / 3.,
            2.,
            N,
            13. / 3.,
            11. / 6.,
            6.,
        ],
    );
}

#[test]
fn pair_operators_match_hand_computed_values() {
    // B: close [5,3,3] vs volume [1,2,3]: Σdxdy = −2, Σdx² = 8/3, Σdy² = 2,
    // so −2/√(16/3) = −√3/2; the last window −1/√(2·2) = −0.5. A's and C's
    // volumes are flat: no correlation.
    let r = -(3.0f64.sqrt()) / 2.0;
    check(
        "correlation(close, volume, 3)",
        &[N, N, N, N, N, N, N, r, N, N, r, N, N, -0.5, N],
    );
    // Covariance Σdxdy/2; a flat side gives 0, not NaN.
    check(
        "covariance(close, volume, 3)",
        &[N, N, N, N, N, N, 0., -1., N, 0., -1., N, 0., -0.5, 0.],
    );
}

#[test]
fn cross_sectional_operators_match_hand_computed_values() {
    // Per date over the symbols with a value; ties share the average rank.
    check(
        "rank(close)",
        &[
            1. / 3.,
            1.,
            2. / 3.,
            0.5,
            1.,
            N,
            0.5,
            0.5,
            1.,
            2.5 / 3.,
            1. / 3.,
            2.5 / 3.,
            2. / 3.,
            1. / 3.,
            1.,
        ],
    );
    // Σ|close| = 8, 5, 10, 9, 15.
    check(
        "scale(close)",
        &[
            1. / 8.,
            5. / 8.,
            2. / 8.,
            2. / 5.,
            3. / 5.,
            N,
            0.3,
            0.3,
            0.4,
            4. / 9.,
            1. / 9.,
            4. / 9.,
            1. / 3.,
            2. / 15.,
            8. / 15.,
        ],
    );
    check(
        "scale(close, 2)",
        &[
            0.25,
            1.25,
            0.5,
            0.8,
            1.2,
            N,
            0.6,
            0.6,
            0.8,
            8. / 9.,
            2. / 9.,
            8. / 9.,
            2. / 3.,
            4. / 15.,
            16. / 15.,
        ],
    );
    // A and B are tech (means 3, 2.5, 3, 2.5, 3.5), C alone in energy.
    check(
        "IndNeutralize(close, IndClass.industry)",
        &[
            -2., 2., 0., -0.5, 0.5, N, 0., 0., 0., 1.5, -1.5, 0., 1.5, -1.5, 0.,
        ],
    );
}

#[test]
fn elementwise_operators_and_inputs_match_hand_computed_values() {
    let first = |src: &str| eval_one(src)[..6].to_vec();
    let want = |src: &str, w: [f64; 6]| {
        let got = first(src);
        for (g, w) in got.iter().zip(w) {
            assert!(same(*g, w), "{src}: {got:?} against {w:?}");
        }
    };
    want("abs(-close)", [1., 5., 2., 2., 3., N]);
    want("sign(close - 3)", [-1., 1., -1., -1., 0., N]);
    want(
        "log(close)",
        [0., 5f64.ln(), 2f64.ln(), 2f64.ln(), 3f64.ln(), N],
    );
    want("signedpower(close - 3, 2)", [-4., 4., -1., -1., 0., N]);
    want("close ^ 2", [1., 25., 4., 4., 9., N]);
    want("-close ^ 2", [-1., -25., -4., -4., -9., N]);
    want("2 * close + 1", [3., 11., 5., 5., 7., N]);
    want(
        "(close - 1) / (close - 2)",
        [-0., 4. / 3., f64::INFINITY, f64::INFINITY, 2., N],
    );
    want("close > 2", [0., 1., 0., 0., 1., N]);
    want("close <= 2", [1., 0., 1., 1., 0., N]);
    want("close == 2", [0., 0., 1., 1., 0., N]);
    want("close != 2", [1., 1., 0., 0., 1., N]);
    want("(close > 1) && (volume > 1)", [0., 0., 1., 1., 1., N]);
    want("(close > 4) || (volume < 2)", [0., 1., 0., 0., 0., N]);
    want("close > 2 ? close : -close", [-1., 5., -2., -2., 3., N]);
    want("min(close, volume)", [1., 1., 2., 2., 2., N]);
    want("max(close, 2.5)", [2.5, 5., 2.5, 2.5, 3., N]);
    want("open + high + low", [3., 15., 6., 6., 9., N]);
    // returns = close / delay(close, 1) − 1; vwap = (h + l + c)/3 = close here.
    want("returns", [N, N, N, 1., -0.4, N]);
    want("vwap", [1., 5., 2., 2., 3., N]);
    // adv2 = mean of close·volume over 2 days: A (10+20)/2, B (5+6)/2.
    want("adv2", [N, N, N, 15., 5.5, N]);
}

#[test]
fn shared_and_repeated_expressions_give_the_same_values_as_alone() {
    let srcs = [
        "rank(ts_sum(returns, 2))",
        "ts_sum(returns, 2) * rank(ts_sum(returns, 2))",
        "rank(ts_sum(returns, 2))",
    ];
    let exprs: Vec<Expr> = srcs.iter().map(|s| parse(s).unwrap()).collect();
    let together = evaluate(&exprs, &tiny(), None).unwrap();
    for (s, got) in srcs.iter().zip(&together) {
        let alone = evaluate(&[parse(s).unwrap()], &tiny(), None)
            .unwrap()
            .remove(0);
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(got), bits(&alone), "{s}");
    }
}

fn err(src: &str) -> String {
    parse(src).unwrap_err().to_string()
}

#[test]
fn parse_errors_point_at_the_column_with_a_caret() {
    assert_eq!(
        err("rank(rnak(close))"),
        "line 1, column 6: unknown function `rnak`; did you mean `rank`?\n  rank(rnak(close))\n       ^"
    );
    assert_eq!(
        err("rank(close"),
        "line 1, column 5: unbalanced parenthesis: this `(` is never closed\n  rank(close\n      ^"
    );
    assert_eq!(
        err("(close + 1"),
        "line 1, column 1: unbalanced parenthesis: this `(` is never closed\n  (close + 1\n  ^"
    );
    assert_eq!(
        err("close)"),
        "line 1, column 6: unbalanced parenthesis: no `(` opens this `)`\n  close)\n       ^"
    );
    assert_eq!(
        err("ts_sum(close)"),
        "line 1, column 1: `ts_sum` takes 2 arguments (x, d); found 1\n  ts_sum(close)\n  ^"
    );
    assert_eq!(
        err("delta(close, 0.5)"),
        "line 1, column 14: the window of `delta` must be at least 1 day; found 0.5\n  delta(close, 0.5)\n               ^"
    );
    assert_eq!(
        err("ts_sum(close, volume)"),
        "line 1, column 15: the window of `ts_sum` must be a number of days\n  ts_sum(close, volume)\n                ^"
    );
    assert_eq!(
        err("rank(close)\n\t+ cap"),
        "line 2, column 4: unknown input `cap`; the inputs are open, high, low, close, volume, returns, vwap and adv{d}\n  \t+ cap\n  \t  ^"
    );
    assert_eq!(
        err("close +"),
        "line 1, column 8: expected a number, an input or a function, found the end of the expression\n  close +\n         ^"
    );
    assert_eq!(
        err("clsoe").lines().next().unwrap(),
        "line 1, column 1: unknown input `clsoe`; did you mean `close`?"
    );
    assert_eq!(
        err("rank").lines().next().unwrap(),
        "line 1, column 1: `rank` is a function; expected `(` after it"
    );
    assert_eq!(
        err("close(3)").lines().next().unwrap(),
        "line 1, column 1: `close` is an input, not a function"
    );
    assert_eq!(
        err("close $ 2").lines().next().unwrap(),
        "line 1, column 7: unexpected character `$`"
    );
    assert_eq!(
        err("close 2").lines().next().unwrap(),
        "line 1, column 7: expected an operator or the end of the expression, found the number `2`"
    );
    assert_eq!(
        err("a ? b").lines().next().unwrap(),
        "line 1, column 1: unknown input `a`; the inputs are open, high, low, close, volume, returns, vwap and adv{d}"
    );
    assert_eq!(
        err("close ? open").lines().next().unwrap(),
        "line 1, column 13: expected `:` of the `c ? a : b` conditional, found the end of the expression"
    );
    assert_eq!(
        err("  ").lines().next().unwrap(),
        "line 1, column 1: empty expression; expected a number, an input or a function"
    );
    assert_eq!(
        err("adv0").lines().next().unwrap(),
        "line 1, column 1: the window of `adv0` must be at least 1 day; found 0"
    );
    assert_eq!(
        err("scale(close, open)").lines().next().unwrap(),
        "line 1, column 14: the second argument of `scale` must be a number"
    );
    assert_eq!(
        err("indneutralize(close, 3)").lines().next().unwrap(),
        "line 1, column 22: the second argument of `indneutralize` names a group level, e.g. IndClass.industry"
    );
    assert_eq!(
        err("rank(close, 2)").lines().next().unwrap(),
        "line 1, column 1: `rank` takes 1 argument (x); found 2"
    );
    assert_eq!(
        err("ts_corr(close, open, 3, 4)").lines().next().unwrap(),
        "line 1, column 1: `ts_corr` takes 3 arguments (x, y, d); found 4"
    );
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    for src in [
        "(".repeat(100_000),
        "-".repeat(100_000) + "close",
        "rank(".repeat(50_000),
    ] {
        let e = parse(&src).unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::TooDeep, "{}", &src[..10]);
    }
    let ok = "(".repeat(150) + "close" + &")".repeat(150);
    assert_eq!(parse(&ok).unwrap(), Expr::Input(Input::Close));
}

#[test]
fn parse_follows_the_paper_and_round_trips_through_display() {
    // The paper's spelling: mixed case, `2.`, fractional windows floored,
    // min/max with an integer literal as windows.
    let e = parse("(rank(Ts_ArgMax(SignedPower(((returns < 0) ? stddev(returns, 20) : close), 2.), 5)) - 0.5)").unwrap();
    assert_eq!(
        e.to_string(),
        "(rank(ts_argmax(signedpower(((returns < 0.0) ? ts_stddev(returns, 20) : close), 2.0), 5)) - 0.5)"
    );
    assert_eq!(
        parse("ts_rank(close, 9.91)").unwrap(),
        Expr::Ts(TsFn::Rank, Box::new(Expr::Input(Input::Close)), 9)
    );
    assert_eq!(
        parse("min(close, 5)").unwrap().to_string(),
        "ts_min(close, 5)"
    );
    assert_eq!(
        parse("min(close, 5.0)").unwrap().to_string(),
        "min(close, 5.0)"
    );
    assert_eq!(
        parse("-1 * rank(adv20)").unwrap().to_string(),
        "((-1.0) * rank(adv20))"
    );
    assert_eq!(
        parse("a1 ^ 2".replace("a1", "close").as_str())
            .unwrap()
            .to_string(),
        "(close ^ 2.0)"
    );
    assert_eq!(
        parse("1 - 2 - 3").unwrap().to_string(),
        "((1.0 - 2.0) - 3.0)"
    );
    assert_eq!(
        parse("2 ^ 3 ^ 2").unwrap().to_string(),
        "(2.0 ^ (3.0 ^ 2.0))"
    );
    assert_eq!(
        parse("close < open || high > low && volume == 1")
            .unwrap()
            .to_string(),
        "((close < open) || ((high > low) && (volume == 1.0)))"
    );
    assert_eq!(
        parse("close > 1 ? 2 : open > 1 ? 3 : 4")
            .unwrap()
            .to_string(),
        "((close > 1.0) ? 2.0 : ((open > 1.0) ? 3.0 : 4.0))"
    );
    for src in [
        "(-1 * correlation(rank(delta(log(volume), 2)), rank(((close - open) / open)), 6))",
        "((rank((vwap - close)) / rank((vwap + close))))",
        "(-1 * Ts_Rank(rank(low), 9))",
        "((((sum(close, 8) / 8) + stddev(close, 8)) < (sum(close, 2) / 2)) ? (-1 * 1) : (((sum(close, 2) / 2) < ((sum(close, 8) / 8) - stddev(close, 8))) ? 1 : (((1 < (volume / adv20)) || ((volume / adv20) == 1)) ? 1 : (-1 * 1))))",
        "(scale(((((close - low) - (high - close)) / (high - low)) * volume), -2) + decay_linear(covariance(close, volume, 5), 7.2))",
        "IndNeutralize(ts_product(open, 5) ^ 0.5, IndClass.subindustry)",
        "max(rank(vwap), abs(sign(delta(close, 1)))) * 1e-3",
        "(ts_min(close, 3) <= delay(close, 1)) != (ts_argmin(returns, 4) >= 1.5e-7)",
    ] {
        let e = parse(src).unwrap_or_else(|e| panic!("{e}"));
        let again = parse(&e.to_string()).unwrap_or_else(|x| panic!("{}\n{x}", e));
        assert_eq!(again, e, "{src}");
    }
}

#[test]
fn lookback_counts_the_history_an_expression_reads() {
    assert_eq!(parse("close").unwrap().lookback(), 0);
    assert_eq!(parse("returns").unwrap().lookback(), 1);
    assert_eq!(parse("adv20").unwrap().lookback(), 19);
    assert_eq!(
        parse("ts_rank(delay(close, 5), 10) + rank(close)")
            .unwrap()
            .lookback(),
        14
    );
    assert_eq!(
        parse("correlation(ts_sum(returns, 3), volume, 4)")
            .unwrap()
            .lookback(),
        6
    );
}

#[test]
fn groups_files_read_with_errors_naming_lines() {
    let g =
        Groups::parse("# sectors\n\"AAPL\", Tech\n\nmsft,Tech\nXOM,Energy\nAAPL,Tech\n").unwrap();
    assert_eq!(g.len(), 2);
    assert_eq!(g.group_of("MSFT"), g.group_of("aapl"));
    assert_ne!(g.group_of("XOM"), g.group_of("AAPL"));
    assert_eq!(g.group_of("IBM"), None);
    let headed = Groups::parse("Ticker,Sector\nIBM,Tech\n").unwrap();
    assert_eq!((headed.len(), headed.group_of("TICKER")), (1, None));
    let e = |t: &str| Groups::parse(t).unwrap_err();
    assert_eq!(
        e("symbol,group\nAAPL,Tech\nMSFT\n").to_string(),
        "groups file, line 3: expected `symbol,group`, found no comma"
    );
    assert_eq!(
        e("AAPL,Tech,x\n").to_string(),
        "groups file, line 1: expected `symbol,group`, found 3 fields"
    );
    assert_eq!(
        e("AAPL,\n").to_string(),
        "groups file, line 1: AAPL has an empty group"
    );
    assert_eq!(
        e("AAPL,Tech\n\nAAPL,Energy").to_string(),
        "groups file, line 3: AAPL is in group `Energy` here but `Tech` on line 1"
    );
    assert_eq!(e("symbol,group\n# none\n"), GroupsError::Empty);
    assert!(matches!(
        e(",Tech"),
        GroupsError::Line {
            line: 1,
            problem: LineProblem::EmptySymbol
        }
    ));
}

#[test]
fn indneutralize_needs_groups_that_cover_the_panel() {
    let e = parse("indneutralize(close, IndClass.sector)").unwrap();
    let no = evaluate(std::slice::from_ref(&e), &tiny(), None).unwrap_err();
    assert_eq!(no, ExprError::NeedsGroups);
    assert!(no.to_string().contains("pass a groups file"), "{no}");
    let partial = Groups::parse("A,x\nB,y\n").unwrap();
    let missing = evaluate(std::slice::from_ref(&e), &tiny(), Some(&partial)).unwrap_err();
    assert_eq!(
        missing.to_string(),
        "C has no group in the groups file; add a `C,<group>` line"
    );
    // Without indneutralize, the groups file need not cover the panel.
    assert!(evaluate(&[parse("rank(close)").unwrap()], &tiny(), Some(&partial)).is_ok());
}

#[test]
fn an_interrupt_stops_evaluation() {
    let stop = Interrupt::new();
    stop.interrupt();
    let e = parse("rank(close)").unwrap();
    let got = stop.within(|| evaluate(&[e], &tiny(), None));
    assert!(matches!(got, Err(ExprError::Interrupted(_))), "{got:?}");
}

#[test]
fn from_bars_aligns_symbols_on_the_union_of_dates() {
    let d = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap();
    let mut a = Bars::default();
    a.push(d("2020-01-02"), 1., 2., 0.5, 1.5, 100.);
    a.push(d("2020-01-06"), 2., 3., 1.5, 2.5, 200.);
    let mut b = Bars::default();
    b.push(d("2020-01-03"), 10., 11., 9., 10.5, 7.);
    b.push(d("2020-01-06"), 11., 12., 10., 11.5, 8.);
    let p = OhlcvPanel::from_bars(&[("A", &a), ("B", &b)]).unwrap();
    assert_eq!(
        p.dates,
        vec![d("2020-01-02"), d("2020-01-03"), d("2020-01-06")]
    );
    let bits = |v: &[f64]| {
        v.iter()
            .map(|x| if x.is_nan() { -1.0 } else { *x })
            .collect::<Vec<_>>()
    };
    assert_eq!(bits(&p.close), vec![1.5, -1.0, -1.0, 10.5, 2.5, 11.5]);
    assert_eq!(bits(&p.volume), vec![100., -1.0, -1.0, 7., 200., 8.]);
    let mut ragged = a.clone();
    ragged.volume.pop();
    assert!(matches!(
        OhlcvPanel::from_bars(&[("A", &ragged)]),
        Err(ExprError::RaggedBars { .. })
    ));
    assert!(matches!(
        OhlcvPanel::from_bars(&[("A", &a), ("A", &b)]),
        Err(ExprError::DuplicateSymbol(_))
    ));
}

/// Window-heavy expressions over the offline market; rows up to `t` must be
/// bit-identical after every price and volume after `t` is changed.
#[test]
fn evaluation_never_looks_ahead_on_the_offline_market() {
    let tickers = ["AAPL", "MSFT", "XOM", "JPM", "PFE", "WMT", "KO", "GE"];
    let start = NaiveDate::from_ymd_opt(2009, 1, 1).unwrap();
    let end = NaiveDate::from_ymd_opt(2011, 12, 31).unwrap();
    let bars: Vec<Bars> = tickers
        .iter()
        .map(|t| {
            let mut b = embedded::bars(t).unwrap();
            let keep: Vec<bool> = b.dates.iter().map(|d| *d >= start && *d <= end).collect();
            for col in [
                &mut b.open,
                &mut b.high,
                &mut b.low,
                &mut b.close,
                &mut b.volume,
            ] {
                let mut k = keep.iter();
                col.retain(|_| *k.next().unwrap());
            }
            b.dates.retain(|d| *d >= start && *d <= end);
            b
        })
        .collect();
    let series: Vec<(&str, &Bars)> = tickers.iter().copied().zip(&bars).collect();
    let panel = OhlcvPanel::from_bars(&series).unwrap();
    let groups = Groups::parse("AAPL,tech\nMSFT,tech\nXOM,energy\nJPM,fin\nPFE,health\nWMT,staples\nKO,staples\nGE,industrial").unwrap();
    let exprs: Vec<Expr> = [
        "rank(ts_argmax(signedpower((returns < 0) ? stddev(returns, 20) : close, 2), 5)) - 0.5",
        "-1 * correlation(rank(delta(log(volume), 2)), rank((close - open) / open), 6)",
        "ts_rank(decay_linear(correlation(vwap, adv20, 10), 7), 5) * scale(sum(returns, 12))",
        "indneutralize(ts_product(returns + 1, 10) - ts_min(low, 15) / ts_max(high, 15), IndClass.industry)",
        "covariance(rank(close), rank(volume), 5) + ts_argmin(ts_mean(close, 3), 30) + delay(adv60, 3)",
    ]
    .iter()
    .map(|s| parse(s).unwrap())
    .collect();
    let base = evaluate(&exprs, &panel, Some(&groups)).unwrap();
    let t = panel.rows() / 2;
    let cut = (t + 1) * panel.width();
    let mut future = panel.clone();
    for (k, v) in [
        &mut future.open,
        &mut future.high,
        &mut future.low,
        &mut future.close,
        &mut future.volume,
    ]
    .into_iter()
    .flat_map(|c| c.iter_mut().enumerate().skip(cut))
    {
        *v *= 1.0 + 0.37 * ((k % 7) as f64 - 3.0) / 10.0;
    }
    let moved = evaluate(&exprs, &future, Some(&groups)).unwrap();
    for (e, (a, b)) in exprs.iter().zip(base.iter().zip(&moved)) {
        let past = |v: &[f64]| v[..cut].iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(past(a), past(b), "{e} changed on or before row {t}");
        let valid = a[..cut].iter().filter(|x| !x.is_nan()).count();
        assert!(
            valid > cut / 3,
            "{e}: only {valid} of {cut} values before the cut"
        );
        let changed = a[cut..]
            .iter()
            .zip(&b[cut..])
            .filter(|(x, y)| x.to_bits() != y.to_bits())
            .count();
        assert!(
            changed > 0,
            "{e}: the perturbation changed nothing after row {t}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Token soup never panics the parser; whatever parses round-trips and
    /// evaluates without panicking.
    #[test]
    fn token_soup_never_panics(parts in proptest::collection::vec(prop_oneof![
        Just("("), Just(")"), Just(","), Just("+"), Just("-"), Just("*"), Just("/"), Just("^"),
        Just("<"), Just("<="), Just("=="), Just("!="), Just("&&"), Just("||"), Just("?"), Just(":"),
        Just("close"), Just("volume"), Just("returns"), Just("vwap"), Just("adv3"), Just("cap"),
        Just("rank("), Just("ts_sum("), Just("min("), Just("correlation("), Just("scale("),
        Just("indneutralize("), Just("IndClass.sector"), Just("decay_linear("), Just("ts_argmax("),
        Just("signedpower("), Just("log("), Just("0"), Just("2"), Just("3.5"), Just("-1"),
        Just("1e400"), Just("é"), Just("\n"), Just("$"),
    ], 0..40), junk in "\\PC{0,12}") {
        let src = parts.concat() + &junk;
        if let Ok(e) = parse(&src) {
            let again = parse(&e.to_string());
            prop_assert_eq!(again.as_ref().ok(), Some(&e), "{}", e);
            let out = evaluate(&[e], &tiny(), Some(&groups()));
            prop_assert!(out.is_ok());
        } else if let Err(e) = parse(&src) {
            let shown = e.to_string();
            prop_assert!(shown.contains('^'));
        }
    }
}
