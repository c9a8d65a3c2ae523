//! Dates by meaning (docs §2.13): the period a plain request names, read
//! from the words around each date rather than from the order the dates
//! appear in.
//!
//! A date is a day (`2009-03-01`, `1 March 2009`, `March 1, 2009`), a month
//! (`March 2009`, `2009-03`), a quarter (`Q1 2009`) or a year (`2009`), and
//! covers its first to its last day. Two dates joined by "to", "until",
//! "through", "and" or a dash are a range ("from X to Y", "between X and
//! Y", "range X to Y", "2005 - 2012"); a date after "since", "from",
//! "after" starts the period, one after "until", "through", "to", "before",
//! "by" ends it, and any other ("in 2010", "2010") is the whole of it.
//! Dates quoted rather than asked for are left out: after "latest", "as of",
//! "dated" (the planner's own answers write `Latest (2013-03-01)`), and in
//! code, table rows and `>` quotes.
//!
//! Invariant: a period with both ends has `start <= end`. Dates written
//! end first are put in order and [`Period::note`] says so; a date that
//! does not exist (`2009-02-30`) is not read.

use std::sync::LazyLock;

use chrono::NaiveDate;
use regex::{Captures, Regex};

const MONTHS: &str = r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?";

/// Every date form, longest first at a given position.
static DATE_FORMS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?ix)
        \b(?P<y>\d{{4}})[-/.](?P<m>\d{{1,2}})[-/.](?P<d>\d{{1,2}})\b
        | \b(?P<dd>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<mn>{MONTHS})\.?,?\s+(?P<dy>\d{{4}})\b
        | \b(?P<mn2>{MONTHS})\.?\s+(?P<dd2>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<dy2>\d{{4}})\b
        | \b(?P<mn3>{MONTHS})\.?,?\s+(?P<my>\d{{4}})\b
        | \b(?P<iy>\d{{4}})-(?P<im>0[1-9]|1[0-2])\b
        | \bq(?P<q>[1-4])\s*(?P<qy>\d{{4}})\b
        | \b(?P<year>19[5-9]\d|20\d\d)\b"
    ))
    .ok()
});

/// Words before a date that make it a quote, not the period.
const QUOTE_WORDS: [&str; 8] = [
    "latest",
    "as of",
    "as at",
    "as-of",
    "dated",
    "updated",
    "last close",
    "quoted",
];
/// Words before a date that start the period; `true`: the day after it.
const START_WORDS: [(&str, bool); 13] = [
    ("starting from", false),
    ("starting in", false),
    ("starting on", false),
    ("starting", false),
    ("start of", false),
    ("beginning of", false),
    ("beginning", false),
    ("start", false),
    ("from", false),
    ("since", false),
    ("on or after", false),
    ("after", true),
    ("later than", true),
];
/// Words before a date that end the period; `true`: the day before it.
const END_WORDS: [(&str, bool); 15] = [
    ("up to", false),
    ("up until", false),
    ("until", false),
    ("till", false),
    ("til", false),
    ("through", false),
    ("thru", false),
    ("to", false),
    ("by", false),
    ("end of", false),
    ("ending", false),
    ("end", false),
    ("on or before", false),
    ("before", true),
    ("earlier than", true),
];
/// What joins two dates into a range.
const CONNECTORS: [&str; 13] = [
    "to", "until", "till", "through", "thru", "and", "up to", "up until", "-", "–", "—", "..", "→",
];
/// Words right after a bare year that make it a number, not a year.
const NOT_A_YEAR_AFTER: [&str; 10] = [
    "%", "bp", "basis", "shares", "usd", "dollars", "day", "-day", "bars", "$",
];

/// A date as written: the first and last day it covers, and where it is.
#[derive(Clone, Debug, PartialEq)]
struct Point {
    first: NaiveDate,
    last: NaiveDate,
    from: usize,
    to: usize,
    text: String,
}

/// What the words before a date make of it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Role {
    /// Starts the period (`after`: the day after the date).
    Start { after: bool },
    /// Ends the period (`before`: the day before the date).
    End { before: bool },
    /// The whole period ("in 2010").
    Whole,
    /// Quoted, not asked for.
    Quote,
}

/// The period a request names.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Period {
    pub start: Option<NaiveDate>,
    pub end: Option<NaiveDate>,
    /// The two dates as written, when they were written end first and
    /// were put in order.
    pub reordered: Option<(String, String)>,
    /// Dates left out as quotes ("Latest (2013-03-01)").
    pub quoted: Vec<String>,
}

impl Period {
    /// `YYYY-MM-DD` strings, as the tools take them.
    pub fn strings(&self) -> (Option<String>, Option<String>) {
        let s = |d: Option<NaiveDate>| d.map(|d| d.format("%Y-%m-%d").to_string());
        (s(self.start), s(self.end))
    }

    pub fn is_empty(&self) -> bool {
        self.start.is_none() && self.end.is_none()
    }

    /// One sentence on how the dates were read, when it was not as
    /// written: put in order, or quotes left out.
    pub fn note(&self) -> Option<String> {
        let (start, end) = self.strings();
        let span = format!(
            "{} to {}",
            start.as_deref().unwrap_or("the first bar"),
            end.as_deref().unwrap_or("the last bar")
        );
        let mut parts = Vec::new();
        if let Some((a, b)) = &self.reordered {
            parts.push(format!(
                "the request names {a} before {b}, so I read the period in date order: {span}"
            ));
        }
        if !self.quoted.is_empty() {
            if self.reordered.is_none() {
                parts.push(format!("the period is {span}"));
            }
            parts.push(format!(
                "{} {} quoted, not the period asked for",
                self.quoted.join(", "),
                if self.quoted.len() == 1 { "is" } else { "are" }
            ));
        }
        if parts.is_empty() {
            return None;
        }
        Some(format!("Dates: {}.", parts.join("; ")))
    }
}

/// The period `text` names (see the module doc).
pub fn read(text: &str) -> Period {
    let visible = without_quoted_blocks(text);
    let points = points(&visible);
    let mut out = Period::default();
    let (mut pairs, mut starts, mut ends, mut wholes) = (vec![], vec![], vec![], vec![]);
    let mut i = 0;
    while i < points.len() {
        let p = &points[i];
        let before_from = if i == 0 { 0 } else { points[i - 1].to };
        let role = role(&visible[before_from..p.from]);
        if role == Role::Quote {
            out.quoted.push(p.text.clone());
            i += 1;
            continue;
        }
        if let Some(next) = points.get(i + 1)
            && is_connector(&visible[p.to..next.from])
        {
            pairs.push((p, next));
            i += 2;
            continue;
        }
        match role {
            Role::Start { after } => starts.push((p, after)),
            Role::End { before } => ends.push((p, before)),
            _ => wholes.push(p),
        }
        i += 1;
    }
    let (start, end, reordered) = if let Some((a, b)) = pairs.first() {
        ordered(a, a.first, b, b.last)
    } else {
        match (starts.first(), ends.first()) {
            (Some(&(s, after)), Some(&(e, before))) => {
                ordered(s, start_bound(s, after), e, end_bound(e, before))
            }
            (Some(&(s, after)), None) => (Some(start_bound(s, after)), None, None),
            (None, Some(&(e, before))) => (None, Some(end_bound(e, before)), None),
            (None, None) => span_of(&wholes),
        }
    };
    out.start = start;
    out.end = end;
    out.reordered = reordered;
    out
}

fn start_bound(p: &Point, after: bool) -> NaiveDate {
    if after {
        p.last.succ_opt().unwrap_or(p.last)
    } else {
        p.first
    }
}

fn end_bound(p: &Point, before: bool) -> NaiveDate {
    if before {
        p.first.pred_opt().unwrap_or(p.first)
    } else {
        p.last
    }
}

type Ordered = (
    Option<NaiveDate>,
    Option<NaiveDate>,
    Option<(String, String)>,
);

/// `start` from `a` and `end` from `b`, or, when `b` comes before `a`, the
/// span of both with the order noted.
fn ordered(a: &Point, start: NaiveDate, b: &Point, end: NaiveDate) -> Ordered {
    if start <= end {
        return (Some(start), Some(end), None);
    }
    (
        Some(a.first.min(b.first)),
        Some(a.last.max(b.last)),
        Some((a.text.clone(), b.text.clone())),
    )
}

/// Dates with no word of range: one is the period; several span from the
/// earliest to the latest (noted when written latest first).
fn span_of(wholes: &[&Point]) -> Ordered {
    let (Some(first), Some(last)) = (
        wholes.iter().map(|p| p.first).min(),
        wholes.iter().map(|p| p.last).max(),
    ) else {
        return (None, None, None);
    };
    let descending = wholes.windows(2).find(|w| w[0].first > w[1].first);
    (
        Some(first),
        Some(last),
        descending.map(|w| (w[0].text.clone(), w[1].text.clone())),
    )
}

/// `text` with fenced and inline code, table rows and `>` quotes blanked
/// byte for byte (so positions hold): what a request quotes of a tool's
/// output is not its period.
fn without_quoted_blocks(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| {
        if c == '\n' {
            out.push('\n');
        } else {
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        }
    };
    let mut fenced = false;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        let fence = t.starts_with("```") || t.starts_with("~~~");
        if fence || fenced || t.starts_with('|') || t.starts_with('>') {
            line.chars().for_each(|c| blank(&mut out, c));
            fenced ^= fence;
            continue;
        }
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            }
            if in_code || c == '`' {
                blank(&mut out, c);
            } else {
                out.push(c);
            }
        }
    }
    out
}

/// Every date in `text`, in order.
fn points(text: &str) -> Vec<Point> {
    let Some(re) = DATE_FORMS.as_ref() else {
        return Vec::new();
    };
    re.captures_iter(text)
        .filter_map(|c| {
            let m = c.get(0)?;
            let (first, last) = covered(&c)?;
            if c.name("year").is_some() && !reads_as_year(text, m.start(), m.end()) {
                return None;
            }
            Some(Point {
                first,
                last,
                from: m.start(),
                to: m.end(),
                text: m.as_str().to_string(),
            })
        })
        .collect()
}

/// A bare four-digit number is a year unless money or a count: "$2000",
/// "2000 shares", "2000 bp".
fn reads_as_year(text: &str, from: usize, to: usize) -> bool {
    let before = text[..from].trim_end();
    let after = text[to..].trim_start().to_lowercase();
    !before.ends_with('$') && !NOT_A_YEAR_AFTER.iter().any(|w| after.starts_with(w))
}

/// The first and last day a matched date covers; `None` if no such day.
fn covered(c: &Captures<'_>) -> Option<(NaiveDate, NaiveDate)> {
    let n = |name: &str| c.name(name)?.as_str().parse::<u32>().ok();
    let year = |name: &str| c.name(name)?.as_str().parse::<i32>().ok();
    let day = |y: i32, m: u32, d: u32| {
        let d = NaiveDate::from_ymd_opt(y, m, d)?;
        Some((d, d))
    };
    if let (Some(y), Some(m), Some(d)) = (year("y"), n("m"), n("d")) {
        return day(y, m, d);
    }
    if let (Some(d), Some(m), Some(y)) = (n("dd"), month(c, "mn"), year("dy")) {
        return day(y, m, d);
    }
    if let (Some(m), Some(d), Some(y)) = (month(c, "mn2"), n("dd2"), year("dy2")) {
        return day(y, m, d);
    }
    if let (Some(m), Some(y)) = (month(c, "mn3"), year("my")) {
        return months(y, m, 1);
    }
    if let (Some(y), Some(m)) = (year("iy"), n("im")) {
        return months(y, m, 1);
    }
    if let (Some(q), Some(y)) = (n("q"), year("qy")) {
        return months(y, q * 3 - 2, 3);
    }
    months(year("year")?, 1, 12)
}

/// `count` months from month `m` of `y`.
fn months(y: i32, m: u32, count: u32) -> Option<(NaiveDate, NaiveDate)> {
    let first = NaiveDate::from_ymd_opt(y, m, 1)?;
    let after_last = m + count;
    let next = if after_last > 12 {
        NaiveDate::from_ymd_opt(y + 1, after_last - 12, 1)?
    } else {
        NaiveDate::from_ymd_opt(y, after_last, 1)?
    };
    Some((first, next.pred_opt()?))
}

fn month(c: &Captures<'_>, name: &str) -> Option<u32> {
    let word = c.name(name)?.as_str().to_lowercase();
    let at = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ]
    .iter()
    .position(|m| word.starts_with(m))?;
    u32::try_from(at + 1).ok()
}

/// The words right before a date (after the previous one) and what they
/// make of it.
fn role(before: &str) -> Role {
    let lower = before.to_lowercase();
    let words = lower.trim_end_matches(|c: char| c.is_whitespace() || "([{:=\"'".contains(c));
    if QUOTE_WORDS.iter().any(|w| ends_with_word(words, w)) {
        return Role::Quote;
    }
    // Longer phrases first: "end of" before "of", "up to" before "to".
    if let Some(&(_, after)) = START_WORDS.iter().find(|(w, _)| ends_with_word(words, w)) {
        return Role::Start { after };
    }
    if let Some(&(_, before)) = END_WORDS.iter().find(|(w, _)| ends_with_word(words, w)) {
        return Role::End { before };
    }
    Role::Whole
}

/// Whether `text` ends with `phrase` as whole words.
fn ends_with_word(text: &str, phrase: &str) -> bool {
    text.strip_suffix(phrase).is_some_and(|head| {
        head.chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric())
    })
}

/// Whether the text between two dates joins them into a range.
fn is_connector(gap: &str) -> bool {
    let g = gap.trim().to_lowercase();
    let g = g
        .strip_suffix("the end of")
        .or_else(|| g.strip_suffix("end of"))
        .map_or(g.as_str(), str::trim_end);
    CONNECTORS.contains(&g)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Ends = (Option<String>, Option<String>);

    fn period(text: &str) -> Ends {
        read(text).strings()
    }

    fn both(a: &str, b: &str) -> Ends {
        (Some(a.to_string()), Some(b.to_string()))
    }

    /// Each phrasing and the period it means.
    #[test]
    fn phrasings_are_read_by_their_meaning() {
        let none = || (None, None);
        let start = |a: &str| (Some(a.to_string()), None);
        let end = |b: &str| (None, Some(b.to_string()));
        let table: Vec<(&str, Ends)> = vec![
            (
                "Backtest buy and hold of IBM. Latest (2013-03-01) range 2000-03-01 to 2013-03-01",
                both("2000-03-01", "2013-03-01"),
            ),
            (
                "from 2005-01-03 to 2012-12-31",
                both("2005-01-03", "2012-12-31"),
            ),
            ("between 2005 and 2012", both("2005-01-01", "2012-12-31")),
            ("range 2001 to 2004", both("2001-01-01", "2004-12-31")),
            ("2005 to 2012", both("2005-01-01", "2012-12-31")),
            ("2006-2010", both("2006-01-01", "2010-12-31")),
            ("2006 - 2010", both("2006-01-01", "2010-12-31")),
            ("2006–2010", both("2006-01-01", "2010-12-31")),
            ("2008-09-01 - 2009-03-31", both("2008-09-01", "2009-03-31")),
            ("since 2008", start("2008-01-01")),
            ("from 2005", start("2005-01-01")),
            ("after 2007", start("2008-01-01")),
            ("until 2010", end("2010-12-31")),
            ("through 2010-06-30", end("2010-06-30")),
            ("before 2010", end("2009-12-31")),
            ("the last 60 trading days to 2012-12-31", end("2012-12-31")),
            ("in 2010", both("2010-01-01", "2010-12-31")),
            ("RSI of IBM 2011", both("2011-01-01", "2011-12-31")),
            ("in March 2009", both("2009-03-01", "2009-03-31")),
            ("in Feb 2008", both("2008-02-01", "2008-02-29")),
            ("in 2009-03", both("2009-03-01", "2009-03-31")),
            ("during Q4 2008", both("2008-10-01", "2008-12-31")),
            (
                "from March 2009 to June 2010",
                both("2009-03-01", "2010-06-30"),
            ),
            (
                "from 1 March 2009 to December 31, 2010",
                both("2009-03-01", "2010-12-31"),
            ),
            ("on 2008-01-25", both("2008-01-25", "2008-01-25")),
            ("since 2005 until 2008", both("2005-01-01", "2008-12-31")),
            (
                "since 2005, and until 2008",
                both("2005-01-01", "2008-12-31"),
            ),
            (
                "from 2005 to the end of 2008",
                both("2005-01-01", "2008-12-31"),
            ),
            ("as of 2013-03-01", none()),
            ("RSI of IBM", none()),
            ("a 20/50 SMA with 2000 shares and 10 bp fees", none()),
            ("$2000 in AAPL", none()),
            ("in 2009-02-30", none()),
            (
                "Backtest AAPL from 2005 to 2012. Here is what I saw:\n| 2013-03-01 | 150.0 |\n> as printed on 2014-01-01\n`2015-01-01`",
                both("2005-01-01", "2012-12-31"),
            ),
        ];
        for (text, want) in table {
            assert_eq!(period(text), want, "{text}");
        }
    }

    #[test]
    fn dates_written_end_first_are_put_in_order_and_said() {
        let p = read("from 2013-03-01 to 2000-03-01");
        assert_eq!(p.strings(), both("2000-03-01", "2013-03-01"));
        let note = p.note().unwrap();
        assert!(
            note.contains("2013-03-01 before 2000-03-01")
                && note.contains("2000-03-01 to 2013-03-01"),
            "{note}"
        );
        assert_eq!(
            period("between 2012 and 2005"),
            both("2005-01-01", "2012-12-31")
        );
        assert_eq!(
            period("until 2004, since 2010"),
            both("2004-01-01", "2010-12-31")
        );
        assert_eq!(period("2012, 2005"), both("2005-01-01", "2012-12-31"));
        assert!(read("2012, 2005").reordered.is_some());
        assert!(read("2005 to 2012").note().is_none());
    }

    #[test]
    fn quoted_dates_are_named_in_the_note() {
        let p = read("Latest (2013-03-01) range 2000-03-01 to 2013-03-01");
        assert_eq!(p.quoted, vec!["2013-03-01".to_string()]);
        let note = p.note().unwrap();
        assert_eq!(
            note,
            "Dates: the period is 2000-03-01 to 2013-03-01; 2013-03-01 is quoted, not the period asked for."
        );
    }

    #[test]
    fn blanking_keeps_byte_positions_with_wide_characters() {
        let text = "Prix `é€` — from 2005 to 2012";
        assert_eq!(without_quoted_blocks(text).len(), text.len());
        assert_eq!(period(text), both("2005-01-01", "2012-12-31"));
    }

    proptest::proptest! {
        /// Whatever the words, a period with both ends runs forward.
        #[test]
        fn a_period_never_starts_after_it_ends(
            words in proptest::collection::vec(
                proptest::sample::select(vec![
                    "from", "to", "since", "until", "between", "and", "in", "after", "before",
                    "-", "latest (", ")", "as of", "range", "2013-03-01", "2000-03-01", "2005",
                    "2012", "1999", "March 2009", "Q2 2011", "2010-06", "end of", "by", "AAPL",
                    "through", "on", "2008-12-31", "2009-01-01", "Feb 29, 2012",
                ]),
                0..12,
            ),
            noise in "[ -~]{0,40}",
        ) {
            let text = format!("{} {noise}", words.join(" "));
            let p = read(&text);
            if let (Some(s), Some(e)) = (p.start, p.end) {
                proptest::prop_assert!(s <= e, "{text}: {s} > {e}");
            }
        }
    }
}
