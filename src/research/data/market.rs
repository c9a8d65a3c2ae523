//! Market detection by symbol shape, the fallback chains, and how each
//! source spells a symbol (docs §7.3).
//!
//! The patterns are the spec's, first match wins, default `a_share`; they are
//! matched by hand (no regex to compile at run time). Two additions, marked
//! below: share classes such as `BRK-B`, and Yahoo's own spellings `ES=F`
//! (futures) and `EURUSD=X` (forex).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Source;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Market {
    AShare,
    UsEquity,
    HkEquity,
    IndiaEquity,
    KrEquity,
    CaEquity,
    VietnamEquity,
    Crypto,
    Futures,
    Forex,
}

impl Market {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Market::AShare => "a_share",
            Market::UsEquity => "us_equity",
            Market::HkEquity => "hk_equity",
            Market::IndiaEquity => "india_equity",
            Market::KrEquity => "kr_equity",
            Market::CaEquity => "ca_equity",
            Market::VietnamEquity => "vietnam_equity",
            Market::Crypto => "crypto",
            Market::Futures => "futures",
            Market::Forex => "forex",
        }
    }

    /// The sources to try, in order: the spec's chain for this market
    /// restricted to the loaders vibedesk has, with the embedded set first
    /// for US equities (it is offline, deterministic and real).
    pub(crate) fn chain(self) -> &'static [Source] {
        match self {
            Market::UsEquity => &[
                Source::Embedded,
                Source::Local,
                Source::Yahoo,
                Source::Stooq,
            ],
            Market::HkEquity
            | Market::IndiaEquity
            | Market::KrEquity
            | Market::CaEquity
            | Market::VietnamEquity
            | Market::Crypto
            | Market::Forex => &[Source::Local, Source::Yahoo],
            Market::AShare | Market::Futures => &[Source::Local],
        }
    }
}

impl fmt::Display for Market {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn all_upper(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_uppercase())
}

fn upper_alnum(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

/// `<1–2 letters><3–4 digits>`, a China futures contract code.
fn china_contract(s: &str) -> bool {
    let letters = s.bytes().take_while(u8::is_ascii_uppercase).count();
    let digits = &s[letters..];
    (1..=2).contains(&letters) && (3..=4).contains(&digits.len()) && all_digits(digits)
}

/// Month-code (`ESZ4`, `CLF25`) or YYMM (`CL2503`) global futures.
fn global_contract(s: &str) -> bool {
    let letters = s.bytes().take_while(u8::is_ascii_uppercase).count();
    let digits = &s[letters..];
    if !all_digits(digits) {
        return false;
    }
    let month_code = (2..=4).contains(&letters)
        && (1..=2).contains(&digits.len())
        && s.as_bytes()
            .get(letters - 1)
            .is_some_and(|m| b"FGHJKMNQUVXZ".contains(m));
    let yymm = (1..=3).contains(&letters) && digits.len() == 4;
    month_code || yymm
}

/// The market a symbol belongs to (case-insensitive).
pub fn detect_market(symbol: &str) -> Market {
    let s = symbol.trim().to_ascii_uppercase();
    let split = s.rsplit_once('.');
    let (base, suffix) = split.unwrap_or((s.as_str(), ""));

    if split.is_some() {
        match suffix {
            "SZ" | "SH" | "BJ" if base.len() == 6 && all_digits(base) => return Market::AShare,
            "US" if all_upper(base) => return Market::UsEquity,
            "HK" if (3..=5).contains(&base.len()) && all_digits(base) => return Market::HkEquity,
            "NS" | "BO" if !base.is_empty() => return Market::IndiaEquity,
            "KS" | "KQ" if base.len() == 6 && all_digits(base) => return Market::KrEquity,
            "TO" | "V" if !base.is_empty() => return Market::CaEquity,
            "VN" if !base.is_empty() => return Market::VietnamEquity,
            _ => {}
        }
    }
    if s.len() == 6 && all_digits(&s) && ["51", "15", "56"].iter().any(|p| s.starts_with(p)) {
        return Market::AShare; // exchange-traded funds
    }
    for quote in ["-USDT", "/USDT", "-USD"] {
        if let Some(b) = s.strip_suffix(quote)
            && upper_alnum(b)
        {
            return Market::Crypto;
        }
    }
    if split.is_some() {
        match suffix {
            "ZCE" | "DCE" | "SHFE" | "INE" | "CFFEX" | "GFEX" if china_contract(base) => {
                return Market::Futures;
            }
            "CME" | "CBOT" | "NYMEX" | "COMEX" | "ICE" | "EUREX" if !base.is_empty() => {
                return Market::Futures;
            }
            _ => {}
        }
    }
    if global_contract(&s) {
        return Market::Futures;
    }
    // Addition: Yahoo's continuous-futures spelling.
    if s.strip_suffix("=F").is_some_and(upper_alnum) {
        return Market::Futures;
    }
    if let Some((a, b)) = s.split_once('/')
        && a.len() == 3
        && b.len() == 3
        && all_upper(a)
        && all_upper(b)
    {
        return Market::Forex;
    }
    if suffix == "FX" && base.len() == 6 && all_upper(base) {
        return Market::Forex;
    }
    // Addition: Yahoo's forex spelling.
    if s.strip_suffix("=X")
        .is_some_and(|b| b.len() == 6 && all_upper(b))
    {
        return Market::Forex;
    }
    if (1..=5).contains(&s.len()) && all_upper(&s) {
        return Market::UsEquity;
    }
    // Addition: share classes (BRK-B, BF-B).
    if let Some((a, b)) = s.split_once('-')
        && (1..=5).contains(&a.len())
        && all_upper(a)
        && b.len() == 1
        && all_upper(b)
    {
        return Market::UsEquity;
    }
    Market::AShare
}

/// The ticker without a `.US` suffix, upper-cased: how the embedded set and
/// Yahoo name US equities.
pub(crate) fn us_base(symbol: &str) -> String {
    let s = symbol.trim().to_ascii_uppercase();
    match s.strip_suffix(".US") {
        Some(b) => b.to_string(),
        None => s,
    }
}

/// The symbol as Yahoo spells it.
pub(crate) fn yahoo_symbol(symbol: &str, market: Market) -> String {
    let s = symbol.trim().to_ascii_uppercase();
    match market {
        Market::UsEquity => us_base(&s),
        Market::HkEquity => match s.strip_suffix(".HK") {
            // Yahoo pads Hong Kong codes to four digits: 700.HK → 0700.HK.
            Some(code) => {
                let code = code.trim_start_matches('0');
                format!("{code:0>4}.HK")
            }
            None => s,
        },
        Market::AShare => match s.strip_suffix(".SH") {
            Some(code) => format!("{code}.SS"),
            None => s,
        },
        Market::Crypto => s.replace('/', "-"),
        Market::Forex => {
            if let Some((a, b)) = s.split_once('/') {
                format!("{a}{b}=X")
            } else if let Some(pair) = s.strip_suffix(".FX") {
                format!("{pair}=X")
            } else {
                s
            }
        }
        _ => s,
    }
}

/// The symbol as Stooq spells it (lower case, US tickers with `.us`).
pub(crate) fn stooq_symbol(symbol: &str, market: Market) -> String {
    let s = symbol.trim().to_ascii_lowercase();
    match market {
        Market::UsEquity if !s.ends_with(".us") => format!("{s}.us"),
        _ => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_follows_the_spec_patterns() {
        let cases = [
            ("600519.SH", Market::AShare),
            ("000001.SZ", Market::AShare),
            ("510300", Market::AShare),
            ("AAPL.US", Market::UsEquity),
            ("aapl", Market::UsEquity),
            ("BRK-B", Market::UsEquity),
            ("0700.HK", Market::HkEquity),
            ("RELIANCE.NS", Market::IndiaEquity),
            ("005930.KS", Market::KrEquity),
            ("SHOP.TO", Market::CaEquity),
            ("VNM.VN", Market::VietnamEquity),
            ("BTC-USDT", Market::Crypto),
            ("ETH/USDT", Market::Crypto),
            ("BTC-USD", Market::Crypto),
            ("RB2405.SHFE", Market::Futures),
            ("ESZ4", Market::Futures),
            ("CL2503", Market::Futures),
            ("GC.COMEX", Market::Futures),
            ("ES=F", Market::Futures),
            ("EUR/USD", Market::Forex),
            ("EURUSD.FX", Market::Forex),
            ("EURUSD=X", Market::Forex),
            ("TOOLONGNAME", Market::AShare),
        ];
        for (sym, want) in cases {
            assert_eq!(detect_market(sym), want, "{sym}");
        }
    }

    #[test]
    fn symbols_are_spelled_per_source() {
        assert_eq!(yahoo_symbol("aapl.us", Market::UsEquity), "AAPL");
        assert_eq!(yahoo_symbol("700.HK", Market::HkEquity), "0700.HK");
        assert_eq!(yahoo_symbol("00700.HK", Market::HkEquity), "0700.HK");
        assert_eq!(yahoo_symbol("EUR/USD", Market::Forex), "EURUSD=X");
        assert_eq!(yahoo_symbol("600519.SH", Market::AShare), "600519.SS");
        assert_eq!(stooq_symbol("AAPL", Market::UsEquity), "aapl.us");
        assert_eq!(stooq_symbol("AAPL.US", Market::UsEquity), "aapl.us");
    }

    #[test]
    fn chains_put_offline_sources_first() {
        assert_eq!(Market::UsEquity.chain()[0], Source::Embedded);
        assert_eq!(Market::HkEquity.chain(), &[Source::Local, Source::Yahoo]);
        assert_eq!(Market::AShare.chain(), &[Source::Local]);
    }
}
