//! The tickers of the embedded offline market, for rooms that may not use
//! `research` (the offline planner): read from the same index file the
//! research room's loader reads (`assets/data/us_daily_index.csv`, written
//! by its generator), so there is one list. docs §7.3 describes the set.

use std::sync::LazyLock;

use chrono::NaiveDate;

const INDEX: &str = include_str!("../../assets/data/us_daily_index.csv");

/// One instrument: ticker, whether it is an ETF, and its first and last
/// date.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub ticker: &'static str,
    pub etf: bool,
    pub first: NaiveDate,
    pub last: NaiveDate,
}

/// Every line of the index that reads; a line that does not is skipped
/// (the research room's loader reports a broken index; its tests hold both
/// readings to the same 131 tickers).
static LISTED: LazyLock<Vec<Listed>> = LazyLock::new(|| {
    INDEX
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("ticker,"))
        .filter_map(|l| {
            let mut f = l.split(',');
            let (ticker, kind, first, last) = (f.next()?, f.next()?, f.next()?, f.next()?);
            let date = |s: &str| NaiveDate::parse_from_str(s, "%Y-%m-%d").ok();
            Some(Listed {
                ticker,
                etf: kind == "etf",
                first: date(first)?,
                last: date(last)?,
            })
        })
        .collect()
});

/// Every instrument, sorted by ticker.
pub fn all() -> &'static [Listed] {
    &LISTED
}

/// The instrument of an upper-case ticker (`AAPL`, `BRK-B`).
pub fn get(ticker: &str) -> Option<&'static Listed> {
    let i = LISTED.binary_search_by(|x| x.ticker.cmp(ticker)).ok()?;
    LISTED.get(i)
}

/// Whether the set holds this upper-case ticker.
pub fn has(ticker: &str) -> bool {
    get(ticker).is_some()
}

/// Tickers that are also everyday words ("low", "cost", "cat"): a text
/// names them only in capitals.
const WORDS: &[&str] = &[
    "CAT", "COP", "COST", "DIS", "GILD", "HON", "LOW", "MET", "MON", "PEP", "SHY", "UPS", "USB",
    "YUM",
];

/// Whether a word in any case names an instrument of the set: tickers of
/// three or more letters that are not everyday words ("aapl", "spy"); a
/// one- or two-letter ticker (C, F, T, V, GE, KO) only counts in capitals.
pub fn named_in_any_case(word_upper: &str) -> bool {
    word_upper.len() >= 3 && !WORDS.contains(&word_upper) && has(word_upper)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_reads_the_index() {
        assert_eq!(all().len(), 131);
        assert_eq!(all().iter().filter(|x| x.etf).count(), 25);
        let spy = get("SPY").unwrap();
        assert!(spy.etf);
        assert_eq!(spy.first.to_string(), "2005-02-25");
        assert!(has("BRK-B") && !has("aapl") && !has("NVDA"));
        assert!(named_in_any_case("AAPL") && named_in_any_case("SPY"));
        assert!(!named_in_any_case("LOW") && !named_in_any_case("GE"));
        assert!(all().windows(2).all(|w| w[0].ticker < w[1].ticker));
    }
}
