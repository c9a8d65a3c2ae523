//! Verdicts parsed strictly from the answer's `## Verdict` section
//! (docs §21.3): well-formed, missing, malformed and empty sections, and
//! which symbols changed.

use vibedesk::monitor::verdict::{Contract, Verdict, VerdictRow, Violation, changed, parse};

fn contract() -> Contract {
    Contract {
        states: vec!["BUY".into(), "HOLD".into(), "SELL".into()],
        symbols: vec!["AAPL".into(), "MSFT".into(), "BRK.B".into()],
    }
}

fn row(symbol: &str, state: &str, reason: &str) -> VerdictRow {
    VerdictRow {
        symbol: symbol.into(),
        state: state.into(),
        reason: reason.into(),
    }
}

#[test]
fn a_well_formed_section_gives_its_rows() {
    let answer = "# Screen\n\nMomentum is strong.\n\n## Verdict\n\n- AAPL: BUY - 12-1 momentum in the top decile\n- brk.b: hold – no edge either way\n- MSFT: sell — breaks its 200-day average\n";
    assert_eq!(
        parse(answer, &contract()),
        Verdict::Calls(vec![
            row("AAPL", "BUY", "12-1 momentum in the top decile"),
            row("BRK.B", "HOLD", "no edge either way"),
            row("MSFT", "SELL", "breaks its 200-day average"),
        ])
    );
}

#[test]
fn the_last_section_counts_and_ends_at_the_next_heading() {
    let answer = "## Verdict\n- AAPL: SELL - draft\n\n## Verdict\n- AAPL: BUY - final\n\n## Notes\nnot a row\n";
    assert_eq!(
        parse(answer, &contract()),
        Verdict::Calls(vec![row("AAPL", "BUY", "final")])
    );
    // A heading inside a code fence is not one.
    let fenced = "## Verdict\n- MSFT: HOLD - real\n```\n## Verdict\n```\n";
    let verdict = parse(fenced, &contract());
    assert!(
        matches!(verdict, Verdict::ContractViolation { line: 3, .. }),
        "{verdict:?}"
    );
}

#[test]
fn a_missing_section_is_no_verdict() {
    for answer in [
        "",
        "AAPL looks like a buy.",
        "### Verdict\n- AAPL: BUY - a level-3 heading is no section",
        "## Verdicts\n- AAPL: BUY - x",
        "```\n## Verdict\n- AAPL: BUY - fenced\n```",
    ] {
        assert_eq!(parse(answer, &contract()), Verdict::NoVerdict, "{answer:?}");
    }
}

#[test]
fn a_malformed_section_is_a_violation_at_its_line() {
    let c = contract();
    let cases: [(&str, usize, Violation); 7] = [
        (
            "intro\n## Verdict\nAAPL is a buy\n",
            3,
            Violation::MalformedRow,
        ),
        (
            "## Verdict\n- AAPL BUY - no colon\n",
            2,
            Violation::MalformedRow,
        ),
        (
            "## Verdict\n- AAPL: BUY because\n",
            2,
            Violation::MalformedRow,
        ),
        ("## Verdict\n- AAPL: BUY\n", 2, Violation::NoReason),
        (
            "## Verdict\n- AAPL: STRONG_BUY - very\n",
            2,
            Violation::UnknownState {
                state: "STRONG_BUY".into(),
                allowed: "BUY, HOLD, SELL".into(),
            },
        ),
        (
            "## Verdict\n- AAPL: BUY - a\n- TSLA: SELL - b\n",
            3,
            Violation::UntrackedSymbol {
                symbol: "TSLA".into(),
                tracked: "AAPL, MSFT, BRK.B".into(),
            },
        ),
        (
            "## Verdict\n- AAPL: BUY - a\n- aapl: SELL - b\n",
            3,
            Violation::DuplicateSymbol {
                symbol: "AAPL".into(),
            },
        ),
    ];
    for (answer, line, why) in cases {
        assert_eq!(
            parse(answer, &c),
            Verdict::ContractViolation { line, why },
            "{answer:?}"
        );
    }
    assert_eq!(
        parse("## Verdict\n- AAPL: BUY - a\nno calls\n", &c),
        Verdict::ContractViolation {
            line: 3,
            why: Violation::NoCallsWithRows
        }
    );
}

#[test]
fn an_empty_section_or_no_calls_is_an_explicit_no_calls() {
    let c = contract();
    for answer in [
        "## Verdict\n",
        "Nothing moved.\n\n## Verdict\n\n\n",
        "## Verdict\nNo calls.\n",
        "## Verdict\n- no calls\n",
        "## Verdict\n\n## Appendix\n- AAPL: BUY - outside the section\n",
    ] {
        assert_eq!(parse(answer, &c), Verdict::NoCalls, "{answer:?}");
    }
}

#[test]
fn an_open_contract_takes_any_symbol_and_state() {
    let open = Contract::default();
    assert_eq!(
        parse("## Verdict\n- TSLA: Watch - earnings next week\n", &open),
        Verdict::Calls(vec![row("TSLA", "Watch", "earnings next week")])
    );
    assert!(matches!(
        parse("## Verdict\n- TSLA: two words - x\n", &open),
        Verdict::ContractViolation { .. }
    ));
}

#[test]
fn changed_names_new_different_and_withdrawn_calls() {
    let c = contract();
    let monday = parse("## Verdict\n- AAPL: BUY - a\n- MSFT: HOLD - b\n", &c);
    // The first verdict: every call is a change.
    assert_eq!(changed(&Verdict::NoVerdict, &monday), ["AAPL", "MSFT"]);
    let tuesday = parse(
        "## Verdict\n- AAPL: BUY - other words\n- MSFT: HOLD - b\n",
        &c,
    );
    assert!(
        changed(&monday, &tuesday).is_empty(),
        "a reason is no state"
    );
    let wednesday = parse("## Verdict\n- MSFT: SELL - c\n- BRK.B: BUY - d\n", &c);
    assert_eq!(changed(&tuesday, &wednesday), ["AAPL", "BRK.B", "MSFT"]);
    assert_eq!(changed(&wednesday, &Verdict::NoCalls), ["BRK.B", "MSFT"]);
    assert!(changed(&Verdict::NoCalls, &Verdict::NoCalls).is_empty());
    // A verdict that failed to parse changes nothing.
    let broken = parse("## Verdict\nbad\n", &c);
    assert!(changed(&wednesday, &broken).is_empty());
    assert!(changed(&wednesday, &Verdict::NoVerdict).is_empty());
}

#[test]
fn verdicts_round_trip_as_json() {
    let c = contract();
    for v in [
        Verdict::NoVerdict,
        Verdict::NoCalls,
        parse("## Verdict\n- AAPL: BUY - a\n", &c),
        parse("## Verdict\n- TSLA: BUY - a\n", &c),
    ] {
        let json = serde_json::to_string(&v).unwrap();
        assert_eq!(serde_json::from_str::<Verdict>(&json).unwrap(), v, "{json}");
    }
    let json = serde_json::to_value(parse("## Verdict\n- AAPL: BUY - a\n", &c)).unwrap();
    assert_eq!(json["outcome"], "calls");
    assert_eq!(json["detail"][0]["symbol"], "AAPL");
    let json = serde_json::to_value(parse("## Verdict\nbad\n", &c)).unwrap();
    assert_eq!(json["outcome"], "contract_violation");
    assert_eq!(json["detail"]["why"]["kind"], "malformed_row");
}
