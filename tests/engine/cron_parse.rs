//! Cron expressions that are not schedules, and the rules of docs §21.1
//! shown on single cases (the goldens in cron_goldens.rs check the many).

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use vibedesk::monitor::cron::{CronError, Field, FieldProblem, Schedule};

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn tz(name: &str) -> Tz {
    name.parse().unwrap()
}

fn field_error(expr: &str) -> (Field, String, FieldProblem) {
    match Schedule::parse(expr) {
        Err(CronError::Field {
            field,
            item,
            problem,
            ..
        }) => (field, item, problem),
        other => panic!("`{expr}`: {other:?}"),
    }
}

#[test]
fn a_schedule_has_five_fields() {
    for (expr, found) in [("", 0), ("* * * *", 4), ("0 * * * * *", 6)] {
        let err = Schedule::parse(expr).unwrap_err();
        assert_eq!(
            err,
            CronError::FieldCount {
                text: expr.into(),
                found
            }
        );
        assert!(err.to_string().contains("five"), "{err}");
    }
}

#[test]
fn errors_name_the_field_and_the_item() {
    let (field, item, problem) = field_error("60 * * * *");
    assert_eq!((field, item.as_str()), (Field::Minute, "60"));
    assert_eq!(
        problem,
        FieldProblem::OutOfRange {
            value: 60,
            min: 0,
            max: 59
        }
    );
    let (field, item, _) = field_error("0 24 * * *");
    assert_eq!((field, item.as_str()), (Field::Hour, "24"));
    let (field, _, _) = field_error("0 0 0 * *");
    assert_eq!(field, Field::DayOfMonth);
    let (field, item, problem) = field_error("0 0 * FOO *");
    assert_eq!((field, item.as_str()), (Field::Month, "FOO"));
    assert!(problem.to_string().contains("JAN-DEC"), "{problem}");
    let (field, item, problem) = field_error("0 0 * * MON-FUN");
    assert_eq!((field, item.as_str()), (Field::DayOfWeek, "MON-FUN"));
    assert!(problem.to_string().contains("SUN-SAT"), "{problem}");
    // A month name is no day name.
    assert_eq!(field_error("0 0 * * JAN").0, Field::DayOfWeek);
    assert_eq!(field_error("0 0 * * 8").0, Field::DayOfWeek);
    let (field, _, problem) = field_error("*/0 * * * *");
    assert_eq!(
        (field, problem),
        (Field::Minute, FieldProblem::BadStep("0".into()))
    );
    assert!(matches!(
        field_error("*/x * * * *").2,
        FieldProblem::BadStep(_)
    ));
    assert_eq!(field_error("1,,2 * * * *").2, FieldProblem::EmptyItem);
    assert!(matches!(
        field_error("-1 * * * *").2,
        FieldProblem::NotAValue(..)
    ));
    let err = Schedule::parse("0 0 * * MON-FUN").unwrap_err().to_string();
    assert!(
        err.contains("day-of-week (field 5)") && err.contains("MON-FUN"),
        "{err}"
    );
}

#[test]
fn extensions_of_other_crons_are_named_not_guessed() {
    for (expr, c) in [
        ("0 0 L * *", 'L'),
        ("0 0 15W * *", 'W'),
        ("0 0 * * 5#2", '#'),
        ("0 0 ? * *", '?'),
        ("H * * * *", 'H'),
        ("0 0 * * 5L", 'L'),
    ] {
        match field_error(expr).2 {
            FieldProblem::Unsupported(got, _) => assert_eq!(got, c, "{expr}"),
            other => panic!("`{expr}`: {other:?}"),
        }
    }
}

#[test]
fn a_schedule_that_never_fires_is_refused() {
    assert!(matches!(
        Schedule::parse("0 0 30 2 *"),
        Err(CronError::Never(_))
    ));
    assert!(matches!(
        Schedule::parse("0 0 31 4,6,9,11 *"),
        Err(CronError::Never(_))
    ));
    // 29 February comes; 30 February with a weekday fires on the weekday.
    assert!(Schedule::parse("0 0 29 2 *").is_ok());
    assert!(Schedule::parse("0 0 30 2 MON").is_ok());
}

#[test]
fn names_ranges_steps_and_lists() {
    let same = |a: &str, b: &str| {
        let (a, b) = (Schedule::parse(a).unwrap(), Schedule::parse(b).unwrap());
        let mut t = utc("2025-01-01T00:00:00Z");
        for _ in 0..200 {
            let (x, y) = (a.next_after(t, Tz::UTC), b.next_after(t, Tz::UTC));
            assert_eq!(x, y, "{a} / {b}");
            t = x.unwrap();
        }
    };
    same("0 9 * jan-MAR Mon-fri", "0 9 * 1-3 1-5");
    same("0 0 * * 7", "0 0 * * 0");
    same("0 0 * * SUN", "0 0 * * 0");
    same("*/15 * * * *", "0,15,30,45 * * * *");
    same("1-10/3 * * * *", "1,4,7,10 * * * *");
    same("50/4 * * * *", "50,54,58 * * * *");
    same("0 22-2 * * *", "0 22,23,0,1,2 * * *");
    same("0 0 * * FRI-MON", "0 0 * * 5,6,0,1");
    same("0 0 * * 0-7", "0 0 * * *");
    same("0 0 * * 0-7/3", "0 0 * * 0,3,6");
    // An equal range is its one value (croniter: the whole field).
    same("5-5 * * * *", "5 * * * *");
    same("0 0 * * 7-0", "0 0 * * 0");
    // A wrapped step keeps its phase: 22, then 1 (croniter: 22 then 2... not).
    same("0 22-2/3 * * *", "0 22,1 * * *");
    let s: Schedule = "30  16 * * 1-5".parse().unwrap();
    assert_eq!(s.to_string(), "30 16 * * 1-5");
    let json = serde_json::to_string(&s).unwrap();
    assert_eq!(json, "\"30 16 * * 1-5\"");
    assert_eq!(serde_json::from_str::<Schedule>(&json).unwrap(), s);
    assert!(serde_json::from_str::<Schedule>("\"61 * * * *\"").is_err());
}

#[test]
fn both_day_fields_restricted_means_either() {
    // The 13th, and every Friday (croniter's and Vixie cron's OR rule).
    let s = Schedule::parse("0 0 13 * 5").unwrap();
    let mut t = utc("2026-02-01T00:00:00Z");
    let mut got = Vec::new();
    for _ in 0..5 {
        t = s.next_after(t, Tz::UTC).unwrap();
        got.push(t.format("%d %a").to_string());
    }
    assert_eq!(got, ["06 Fri", "13 Fri", "20 Fri", "27 Fri", "06 Fri"]);
    // A `*` day field leaves the other alone.
    let s = Schedule::parse("0 0 13 * *").unwrap();
    assert_eq!(
        s.next_after(utc("2026-02-01T00:00:00Z"), Tz::UTC),
        Some(utc("2026-02-13T00:00:00Z"))
    );
}

#[test]
fn strictly_after_and_in_local_time() {
    let s = Schedule::parse("30 16 * * 1-5").unwrap();
    let ny = tz("America/New_York");
    // Friday 16:30 EST exactly: the next is Monday's, after DST began.
    let fri = utc("2026-03-06T21:30:00Z");
    assert_eq!(s.next_after(fri, ny), Some(utc("2026-03-09T20:30:00Z")));
    let just_before = utc("2026-03-06T21:29:59Z");
    assert_eq!(s.next_after(just_before, ny), Some(fri));
    assert_eq!(
        s.next_after(fri, tz("Asia/Kolkata")),
        Some(utc("2026-03-09T11:00:00Z"))
    );
}

#[test]
fn the_skipped_hour_fires_fixed_times_at_its_end_and_skips_intervals() {
    let ny = tz("America/New_York");
    // 8 March 2026: 02:00 EST is 03:00 EDT (07:00Z).
    let before = utc("2026-03-08T06:00:00Z"); // 01:00 EST
    let fixed = Schedule::parse("30 2 * * *").unwrap();
    assert_eq!(
        fixed.next_after(before, ny),
        Some(utc("2026-03-08T07:00:00Z"))
    );
    assert_eq!(
        fixed.next_after(utc("2026-03-08T07:00:00Z"), ny),
        Some(utc("2026-03-09T06:30:00Z"))
    );
    let every_hour = Schedule::parse("30 * * * *").unwrap();
    assert_eq!(
        every_hour.next_after(utc("2026-03-08T06:30:00Z"), ny),
        Some(utc("2026-03-08T07:30:00Z")) // 03:30 EDT
    );
}

#[test]
fn the_repeated_hour_fires_fixed_times_once_and_intervals_twice() {
    let ny = tz("America/New_York");
    // 1 November 2026: 02:00 EDT is 01:00 EST; 01:30 happens at 05:30Z and 06:30Z.
    let fixed = Schedule::parse("30 1 * * *").unwrap();
    let first = fixed.next_after(utc("2026-11-01T04:00:00Z"), ny).unwrap();
    assert_eq!(first, utc("2026-11-01T05:30:00Z"));
    // croniter would fire again at 06:30Z; vibedesk does not (docs §21.1).
    assert_eq!(
        fixed.next_after(first, ny),
        Some(utc("2026-11-02T06:30:00Z"))
    );
    let every_hour = Schedule::parse("30 * * * *").unwrap();
    let first = every_hour
        .next_after(utc("2026-11-01T05:00:00Z"), ny)
        .unwrap();
    assert_eq!(first, utc("2026-11-01T05:30:00Z"));
    assert_eq!(
        every_hour.next_after(first, ny),
        Some(utc("2026-11-01T06:30:00Z"))
    );
    // From 01:45 EDT the second pass's 01:30 EST comes before 02:30 EST.
    assert_eq!(
        every_hour.next_after(utc("2026-11-01T05:45:00Z"), ny),
        Some(utc("2026-11-01T06:30:00Z"))
    );
}
