//! Five-field cron schedules evaluated in a time zone (docs §21.1).
//!
//! The semantics follow croniter 7.0 (the golden reference, tests/golden/cron)
//! with the differences §21.1 lists: a fixed-hour schedule fires once in the
//! repeated hour of an autumn change, an equal range `5-5` is the one value,
//! and a wrapped range with a step keeps its phase across the wrap.
//!
//! `next_after` never walks minute by minute: the wall-clock search jumps by
//! whole months, days and hours on bit masks, and the time zone is consulted
//! for a handful of candidates only.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc};
use chrono_tz::{GapInfo, Tz};
use serde::{Deserialize, Serialize};

/// How far ahead a wall-clock match is looked for. The longest honest wait
/// is 29 February on a fixed weekday-free schedule: eight years across a
/// skipped century leap year.
const SEARCH_YEARS: i32 = 12;

/// Wall-clock candidates a single `next_after` may reject (those inside a
/// repeated hour a fixed-hour schedule already fired in); an hour has 60.
const MAX_REJECTED: usize = 4_000;

/// The five fields, in the order they are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

impl Field {
    const ALL: [Field; 5] = [
        Field::Minute,
        Field::Hour,
        Field::DayOfMonth,
        Field::Month,
        Field::DayOfWeek,
    ];

    /// The field's values: what `*` spans, and `N/step` runs up to.
    fn bounds(self) -> (u32, u32) {
        match self {
            Field::Minute => (0, 59),
            Field::Hour => (0, 23),
            Field::DayOfMonth => (1, 31),
            Field::Month => (1, 12),
            Field::DayOfWeek => (0, 6),
        }
    }

    /// The largest value that may be written: 7 is Sunday again.
    fn written_max(self) -> u32 {
        match self {
            Field::DayOfWeek => 7,
            _ => self.bounds().1,
        }
    }

    fn position(self) -> usize {
        match self {
            Field::Minute => 1,
            Field::Hour => 2,
            Field::DayOfMonth => 3,
            Field::Month => 4,
            Field::DayOfWeek => 5,
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::DayOfMonth => "day-of-month",
            Field::Month => "month",
            Field::DayOfWeek => "day-of-week",
        };
        write!(f, "{name} (field {})", self.position())
    }
}

/// What is wrong with one field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldProblem {
    #[error("an empty item (two commas, or a comma at an end)")]
    EmptyItem,
    #[error("`{0}` is not a number{names}", names = names_hint(*.1))]
    NotAValue(String, Field),
    #[error("{value} is outside {min}-{max}")]
    OutOfRange { value: u32, min: u32, max: u32 },
    #[error("the step `{0}` is not a whole number of at least 1")]
    BadStep(String),
    #[error("`{0}` ({1}) is not supported: the five-field standard has no such syntax")]
    Unsupported(char, &'static str),
}

fn names_hint(field: Field) -> &'static str {
    match field {
        Field::Month => " or a month name (JAN-DEC)",
        Field::DayOfWeek => " or a day name (SUN-SAT)",
        _ => "",
    }
}

/// A cron expression that cannot be a schedule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    #[error(
        "`{text}` has {found} fields; a schedule has five: minute hour day-of-month month day-of-week"
    )]
    FieldCount { text: String, found: usize },
    #[error("`{text}`: the {field} `{item}`: {problem}")]
    Field {
        text: String,
        field: Field,
        item: String,
        problem: FieldProblem,
    },
    #[error("`{0}` never fires: no month it names has the days it names")]
    Never(String),
}

/// A parsed five-field schedule. Each field is a bit mask of the values it
/// allows (day-of-week bit 0 is Sunday).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Schedule {
    text: String,
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// Both day fields restricted: a day matches either (croniter's OR rule).
    day_or: bool,
    /// The hour field names some hours, not all: the schedule names
    /// wall-clock times, which the DST rules treat as appointments.
    fixed_hour: bool,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

impl Schedule {
    /// Parses the five-field standard: `*`, values, names, ranges (a range
    /// written high-low wraps), steps and lists.
    pub fn parse(text: &str) -> Result<Schedule, CronError> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [minute, hour, dom, month, dow] = fields.as_slice() else {
            return Err(CronError::FieldCount {
                text: text.to_string(),
                found: fields.len(),
            });
        };
        let texts = [*minute, *hour, *dom, *month, *dow];
        let mut masks = [0u64; 5];
        for ((field, raw), mask) in Field::ALL.iter().zip(texts).zip(masks.iter_mut()) {
            *mask = parse_field(raw, *field).map_err(|(item, problem)| CronError::Field {
                text: text.to_string(),
                field: *field,
                item,
                problem,
            })?;
        }
        let [minutes, hours, days, months, weekdays] = masks;
        // croniter's rule for "restricted": a field written `*` is not; a
        // field that lists every value is not either, but only when the other
        // day field is written with a `*` (so `0 0 1 * 1-7` fires daily).
        let dom_full = days == range_mask(1, 31);
        let dow_full = weekdays == range_mask(0, 6);
        let dom_free = *dom == "*" || (dom_full && dow.contains('*'));
        let dow_free = *dow == "*" || (dow_full && dom.contains('*'));
        let schedule = Schedule {
            text: texts.join(" "),
            minutes,
            hours: u32::try_from(hours).unwrap_or(u32::MAX),
            days: u32::try_from(days).unwrap_or(u32::MAX),
            months: u16::try_from(months).unwrap_or(u16::MAX),
            weekdays: u8::try_from(weekdays).unwrap_or(u8::MAX),
            day_or: !dom_free && !dow_free,
            fixed_hour: hours != range_mask(0, 23),
        };
        if !schedule.day_or && !schedule.some_month_has_a_day() {
            return Err(CronError::Never(schedule.text));
        }
        Ok(schedule)
    }

    /// The first fire strictly after `after`, evaluated on the wall clock of
    /// `tz` with the DST rules of docs §21.1; `None` when no fire lies within
    /// the search horizon (or the calendar's end).
    pub fn next_after(&self, after: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&tz).naive_local();
        // An interval schedule (every hour) fires in both passes of a
        // repeated hour: walls at or before `local` may still fire later,
        // in the second pass, when `after` lies in the first.
        let second_pass = if self.fixed_hour {
            None
        } else {
            self.second_pass_fire(after, local, tz)
        };
        let mut wall = self.next_wall(local)?;
        for _ in 0..MAX_REJECTED {
            if let Some(fire) = self.fire_of(wall, after, tz) {
                return Some(match second_pass {
                    Some(early) if early < fire => early,
                    _ => fire,
                });
            }
            wall = self.next_wall(wall)?;
        }
        second_pass
    }

    /// The first instant showing `wall` that is a fire after `after`: the
    /// earlier of a repeated wall time (and the later one too for interval
    /// schedules), or the end of a skipped hour for fixed-hour schedules.
    fn fire_of(&self, wall: NaiveDateTime, after: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        match tz.from_local_datetime(&wall) {
            chrono::LocalResult::Single(at) => Some(at.with_timezone(&Utc)).filter(|t| *t > after),
            chrono::LocalResult::Ambiguous(a, b) => {
                let (a, b) = (a.with_timezone(&Utc), b.with_timezone(&Utc));
                let (early, late) = if a <= b { (a, b) } else { (b, a) };
                if early > after {
                    Some(early)
                } else if !self.fixed_hour && late > after {
                    Some(late)
                } else {
                    None
                }
            }
            chrono::LocalResult::None if self.fixed_hour => GapInfo::new(&wall, &tz)
                .and_then(|gap| gap.end)
                .map(|end| end.with_timezone(&Utc))
                .filter(|t| *t > after),
            chrono::LocalResult::None => None,
        }
    }

    /// When `after` lies in the first pass of a repeated hour, the first
    /// matching wall time of that hour at or before `after`'s, in its second
    /// pass.
    fn second_pass_fire(
        &self,
        after: DateTime<Utc>,
        local: NaiveDateTime,
        tz: Tz,
    ) -> Option<DateTime<Utc>> {
        let chrono::LocalResult::Ambiguous(a, b) = tz.from_local_datetime(&local) else {
            return None;
        };
        let (a, b) = (a.with_timezone(&Utc), b.with_timezone(&Utc));
        let (early, late) = if a <= b { (a, b) } else { (b, a) };
        if after != early {
            return None;
        }
        let width = late.signed_duration_since(early).num_minutes();
        let floor = floor_minute(local)?;
        // The repeated walls are (floor - width, floor]'s ambiguous tail:
        // find its first minute by bisection.
        let (mut lo, mut hi) = (0i64, width);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let wall = floor.checked_sub_signed(Duration::minutes(width - mid))?;
            if matches!(
                tz.from_local_datetime(&wall),
                chrono::LocalResult::Ambiguous(..)
            ) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        let start = floor.checked_sub_signed(Duration::minutes(width - lo + 1))?;
        let wall = self.next_wall(start)?;
        if wall > floor {
            return None;
        }
        match tz.from_local_datetime(&wall) {
            chrono::LocalResult::Ambiguous(a, b) => {
                let late = a.max(b).with_timezone(&Utc);
                Some(late).filter(|t| *t > after)
            }
            _ => None,
        }
    }

    /// The first matching wall-clock minute strictly after `after`'s minute.
    fn next_wall(&self, after: NaiveDateTime) -> Option<NaiveDateTime> {
        let start = floor_minute(after)?.checked_add_signed(Duration::minutes(1))?;
        let (mut y, mut mo, mut d) = (start.year(), start.month(), start.day());
        let (mut h, mut mi) = (start.hour(), start.minute());
        let limit = y.checked_add(SEARCH_YEARS)?;
        while y <= limit {
            match next_bit(u64::from(self.months), mo) {
                Some(m) if m == mo => {}
                Some(m) => (mo, d, h, mi) = (m, 1, 0, 0),
                None => {
                    (y, mo, d, h, mi) = (y.checked_add(1)?, 1, 1, 0, 0);
                    continue;
                }
            }
            match self.next_day(y, mo, d) {
                Some(day) if day == d => {}
                Some(day) => (d, h, mi) = (day, 0, 0),
                None => {
                    (y, mo) = next_month(y, mo)?;
                    (d, h, mi) = (1, 0, 0);
                    continue;
                }
            }
            match next_bit(u64::from(self.hours), h) {
                Some(hour) if hour == h => {}
                Some(hour) => (h, mi) = (hour, 0),
                None => {
                    (y, mo, d) = next_day(y, mo, d)?;
                    (h, mi) = (0, 0);
                    continue;
                }
            }
            match next_bit(self.minutes, mi) {
                Some(minute) => {
                    return NaiveDate::from_ymd_opt(y, mo, d)?.and_hms_opt(h, minute, 0);
                }
                None if h < 23 => (h, mi) = (h + 1, 0),
                None => {
                    (y, mo, d) = next_day(y, mo, d)?;
                    (h, mi) = (0, 0);
                }
            }
        }
        None
    }

    /// The first day of `y-mo` at or after `from` the day fields allow.
    fn next_day(&self, y: i32, mo: u32, from: u32) -> Option<u32> {
        let last = days_in_month(y, mo);
        let in_month = range_mask(from, last);
        let by_date = u64::from(self.days) & in_month;
        if !self.day_or && self.weekdays == 0x7f {
            return next_bit(by_date, from);
        }
        let first = NaiveDate::from_ymd_opt(y, mo, from)?;
        let mut weekday = first.weekday().num_days_from_sunday();
        for day in from..=last {
            let date_ok = self.days & (1 << day) != 0;
            let weekday_ok = self.weekdays & (1 << weekday) != 0;
            let ok = if self.day_or {
                date_ok || weekday_ok
            } else {
                date_ok && weekday_ok
            };
            if ok {
                return Some(day);
            }
            weekday = (weekday + 1) % 7;
        }
        None
    }

    /// Whether some allowed month has some allowed day-of-month (29
    /// February counts: leap years come).
    fn some_month_has_a_day(&self) -> bool {
        (1..=12u32).any(|mo| {
            let last = if mo == 2 { 29 } else { days_in_month(2001, mo) };
            self.months & (1 << mo) != 0 && u64::from(self.days) & range_mask(1, last) != 0
        })
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Schedule {
    type Err = CronError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Schedule::parse(text)
    }
}

impl TryFrom<String> for Schedule {
    type Error = CronError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        Schedule::parse(&text)
    }
}

impl From<Schedule> for String {
    fn from(schedule: Schedule) -> String {
        schedule.text
    }
}

fn floor_minute(t: NaiveDateTime) -> Option<NaiveDateTime> {
    t.with_second(0)?.with_nanosecond(0)
}

/// Bits `lo..=hi` set (empty when `lo > hi`).
fn range_mask(lo: u32, hi: u32) -> u64 {
    if lo > hi || hi > 63 {
        return 0;
    }
    let upper = if hi == 63 {
        u64::MAX
    } else {
        (1u64 << (hi + 1)) - 1
    };
    upper & !((1u64 << lo) - 1)
}

/// The smallest set bit at or above `from`.
fn next_bit(mask: u64, from: u32) -> Option<u32> {
    let above = mask.checked_shr(from)?.checked_shl(from)?;
    (above != 0).then(|| above.trailing_zeros())
}

fn is_leap(y: i32) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i32, mo: u32) -> u32 {
    match mo {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn next_month(y: i32, mo: u32) -> Option<(i32, u32)> {
    if mo >= 12 {
        Some((y.checked_add(1)?, 1))
    } else {
        Some((y, mo + 1))
    }
}

fn next_day(y: i32, mo: u32, d: u32) -> Option<(i32, u32, u32)> {
    if d >= days_in_month(y, mo) {
        let (y, mo) = next_month(y, mo)?;
        Some((y, mo, 1))
    } else {
        Some((y, mo, d + 1))
    }
}

/// One field's mask, or the item at fault and why.
fn parse_field(text: &str, field: Field) -> Result<u64, (String, FieldProblem)> {
    let mut mask = 0u64;
    for item in text.split(',') {
        mask |= parse_item(item, field).map_err(|problem| (item.to_string(), problem))?;
    }
    Ok(mask)
}

fn parse_item(item: &str, field: Field) -> Result<u64, FieldProblem> {
    if item.is_empty() {
        return Err(FieldProblem::EmptyItem);
    }
    let (min, max) = field.bounds();
    let (base, step) = match item.split_once('/') {
        Some((base, step)) => (base, Some(parse_step(step)?)),
        None => (item, None),
    };
    let (lo, hi) = if base == "*" {
        (min, max)
    } else if let Some((a, b)) = base.split_once('-') {
        (value(a, field)?, value(b, field)?)
    } else {
        let v = value(base, field)?;
        (v, if step.is_some() { max } else { v })
    };
    Ok(expand(lo, hi, step.unwrap_or(1), field, base.contains('-')))
}

/// The values of `lo-hi/step`. A wrapped range (`FRI-MON`, `22-2`) runs to
/// the field's end and on from its start, keeping the step's phase across
/// the wrap; an equal range is its one value (docs §21.1).
fn expand(lo: u32, hi: u32, step: u32, field: Field, written_range: bool) -> u64 {
    let (min, max) = field.bounds();
    let (mut lo, mut hi) = (lo, hi);
    if field == Field::DayOfWeek {
        // 7 is Sunday again; `0-7` is the whole week, not the equal `0-0`.
        (lo, hi) = if written_range && lo == 0 && hi == 7 {
            (0, 6)
        } else {
            (lo % 7, hi % 7)
        };
    }
    let width = max - min + 1;
    let span = if hi >= lo {
        hi - lo
    } else {
        max - lo + 1 + hi - min
    };
    let mut mask = 0u64;
    let mut offset = 0;
    while offset <= span {
        let v = lo + offset;
        mask |= 1u64 << if v > max { v - width } else { v };
        offset = offset.saturating_add(step);
    }
    mask
}

/// Names the non-standard syntax (Quartz's and croniter's extensions) a
/// value is written in, so the error says why rather than just "not a
/// number".
fn extension(text: &str) -> Option<FieldProblem> {
    let upper = text.to_ascii_uppercase();
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let problem = if upper.contains('#') {
        FieldProblem::Unsupported('#', "nth weekday")
    } else if upper == "?" {
        FieldProblem::Unsupported('?', "no specific value")
    } else if upper == "LW"
        || upper
            .strip_suffix('W')
            .is_some_and(|d| !d.is_empty() && digits(d))
    {
        FieldProblem::Unsupported('W', "nearest weekday")
    } else if upper.strip_suffix('L').is_some_and(digits) {
        FieldProblem::Unsupported('L', "last")
    } else if upper == "H" || upper.starts_with("H(") {
        FieldProblem::Unsupported('H', "hashed value")
    } else {
        return None;
    };
    Some(problem)
}

fn parse_step(text: &str) -> Result<u32, FieldProblem> {
    match text.parse::<u32>() {
        Ok(step) if step >= 1 && text.bytes().all(|b| b.is_ascii_digit()) => Ok(step),
        _ => Err(FieldProblem::BadStep(text.to_string())),
    }
}

fn value(text: &str, field: Field) -> Result<u32, FieldProblem> {
    let (min, max) = (field.bounds().0, field.written_max());
    let names: &[&str] = match field {
        Field::Month => &MONTHS,
        Field::DayOfWeek => &WEEKDAYS,
        _ => &[],
    };
    let first = match field {
        Field::Month => 1,
        _ => 0,
    };
    if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(text)) {
        return u32::try_from(i)
            .map(|i| i + first)
            .map_err(|_| FieldProblem::NotAValue(text.to_string(), field));
    }
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(extension(text).unwrap_or(FieldProblem::NotAValue(text.to_string(), field)));
    }
    let v: u32 = text.parse().map_err(|_| FieldProblem::OutOfRange {
        value: u32::MAX,
        min,
        max,
    })?;
    if v < min || v > max {
        return Err(FieldProblem::OutOfRange { value: v, min, max });
    }
    Ok(v)
}
