//! Cron schedules against croniter 7.0 (docs §21.1): the goldens in
//! tests/golden/cron/cron.json were written by `make_goldens.py` there with
//! croniter and tzdata at pinned versions (IANA 2025b, as chrono-tz embeds),
//! on seeded expressions and start instants around the daylight-saving
//! changes of 2024-2026; this test reads the JSON and needs no Python.
//!
//! Where vibedesk differs from croniter on purpose (a fixed-hour schedule
//! fires once in a repeated hour), a case keeps croniter's own fires under
//! `croniter` beside the expected ones, and the test checks both: vibedesk
//! gives the expected fires, which are not croniter's.

use std::collections::BTreeSet;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::Value;
use vibedesk::monitor::cron::Schedule;

fn golden() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/cron/cron.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn instant(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap())
        .unwrap()
        .with_timezone(&Utc)
}

fn fires(schedule: &Schedule, start: DateTime<Utc>, tz: Tz, n: usize) -> Vec<DateTime<Utc>> {
    let mut out = Vec::new();
    let mut at = start;
    for _ in 0..n {
        let Some(next) = schedule.next_after(at, tz) else {
            break;
        };
        out.push(next);
        at = next;
    }
    out
}

#[test]
fn next_fires_equal_croniters_across_zones_and_dst() {
    let golden = golden();
    let cases = golden["cases"].as_array().unwrap();
    let expressions: BTreeSet<&str> = cases.iter().map(|c| c["expr"].as_str().unwrap()).collect();
    assert!(
        expressions.len() >= 1000,
        "{} expressions",
        expressions.len()
    );
    let mut failures = Vec::new();
    // Cases whose expected fires are not croniter's: by the fixed-hour rule
    // alone, and by reading a range differently (`read_as`).
    let (mut by_repeat, mut by_reading) = (0, 0);
    for case in cases {
        let expr = case["expr"].as_str().unwrap();
        let tz: Tz = case["tz"].as_str().unwrap().parse().unwrap();
        let start = instant(&case["start"]);
        let expected: Vec<DateTime<Utc>> = case["fires"]
            .as_array()
            .unwrap()
            .iter()
            .map(instant)
            .collect();
        let schedule = match Schedule::parse(expr) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{expr}: {e}"));
                continue;
            }
        };
        let got = fires(&schedule, start, tz, expected.len());
        if got != expected {
            failures.push(format!(
                "`{expr}` in {tz} after {start}:\n  got      {got:?}\n  expected {expected:?}"
            ));
        }
        if let Some(theirs) = case.get("croniter") {
            let theirs: Vec<DateTime<Utc>> =
                theirs.as_array().unwrap().iter().map(instant).collect();
            assert_ne!(theirs, expected, "`{expr}`: a difference that is none");
            if case.get("read_as").is_some() {
                by_reading += 1;
            } else {
                by_repeat += 1;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures
            .iter()
            .take(15)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The documented differences are exercised, not merely allowed.
    assert!(by_repeat > 0 && by_reading > 0, "{by_repeat} {by_reading}");
}
