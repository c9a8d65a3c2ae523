//! Online loaders: Yahoo's chart API (JSON) and Stooq's CSV download
//! (docs §7.3 `yahoo`, `stooq`). Base URLs are configurable so tests serve
//! recorded answers from 127.0.0.1; nothing here caches (see [`super::cache`]).
//!
//! - Yahoo: `GET {base}/v8/finance/chart/{SYM}?period1=..&period2=..&interval=1d`.
//!   Its OHLC is split-adjusted but not dividend-adjusted; `adjclose` is
//!   both, so OHLC is scaled by `adjclose / close` like the embedded set.
//!   Timestamps are the session open in UTC; `meta.gmtoffset` turns them
//!   into exchange-local dates. `null` entries are counted as missing rows.
//! - Stooq: `GET {base}/q/d/l/?s={sym}&i=d[&d1=YYYYMMDD&d2=YYYYMMDD]`, a CSV
//!   of `Date,Open,High,Low,Close,Volume` already adjusted by Stooq; an
//!   unknown symbol answers the text `No data`.

use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use reqwest::Url;
use serde::Deserialize;

use super::clean;
use super::local::parse_csv;
use super::market::{Market, stooq_symbol, yahoo_symbol};
use super::table::ParsedCsv;
use super::{Bars, DataError, PriceSeries, Provenance, Source};

pub(crate) const DEFAULT_YAHOO_BASE: &str = "https://query1.finance.yahoo.com";
pub(crate) const DEFAULT_STOOQ_BASE: &str = "https://stooq.com";
/// Largest answer read; a daily history since 1962 is well under 2 MB.
const MAX_BODY: usize = 32 * 1024 * 1024;
/// Yahoo answers 429 to clients without a browser-like agent.
const USER_AGENT: &str = concat!(
    "Mozilla/5.0 (X11; Linux x86_64) vibedesk/",
    env!("CARGO_PKG_VERSION")
);
/// Yahoo's "max" period1 (1900-01-01), as the usual clients send it.
const YAHOO_EPOCH: i64 = -2_208_994_789;

fn is_loopback(url: &Url) -> bool {
    url.host_str().is_some_and(|h| {
        let h = h.trim_start_matches('[').trim_end_matches(']');
        h.eq_ignore_ascii_case("localhost")
            || h.parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    })
}

/// Checks a loader's base URL: it parses and is http or https.
pub(crate) fn base_url(loader: Source, base: &str) -> Result<Url, DataError> {
    let url = Url::parse(base.trim()).map_err(|e| DataError::Unavailable {
        loader,
        reason: format!("base URL '{base}' does not parse: {e}"),
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(DataError::Unavailable {
            loader,
            reason: format!("base URL '{base}' must be http or https"),
        });
    }
    Ok(url)
}

/// Checks a base URL and builds a client for it (no proxy for loopback, so
/// a local server keeps working with `HTTP_PROXY` set).
pub(crate) fn client_for(
    loader: Source,
    base: &str,
    timeout: Duration,
) -> Result<(Client, Url), DataError> {
    let url = base_url(loader, base)?;
    let mut b = reqwest::Client::builder()
        .user_agent(USER_AGENT)
        .connect_timeout(Duration::from_secs(10).min(timeout));
    if !timeout.is_zero() {
        b = b.timeout(timeout);
    }
    if is_loopback(&url) {
        b = b.no_proxy();
    }
    let client = b.build().map_err(|e| DataError::Unavailable {
        loader,
        reason: format!("cannot set up the HTTP client: {e}"),
    })?;
    Ok((Client { inner: client }, url))
}

/// An HTTP client for one loader.
#[derive(Clone, Debug)]
pub(crate) struct Client {
    inner: reqwest::Client,
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    s
}

fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    super::shorten(&one_line, 200)
}

impl Client {
    /// GETs `url`; the status and the body (bounded).
    async fn get(&self, loader: Source, url: &Url) -> Result<(u16, Vec<u8>), DataError> {
        let transport = |e: reqwest::Error| DataError::Transport {
            loader,
            url: url.to_string(),
            // The message names the URL already: reqwest's own copy of it
            // would push the cause (DNS, refused, timeout) out of any
            // shortened form of the message.
            detail: error_chain(&e.without_url()),
        };
        let mut resp = self
            .inner
            .get(url.clone())
            .send()
            .await
            .map_err(transport)?;
        let status = resp.status().as_u16();
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(transport)? {
            if body.len() + chunk.len() > MAX_BODY {
                return Err(DataError::Decode {
                    loader,
                    url: url.to_string(),
                    detail: format!("the answer is larger than {MAX_BODY} bytes"),
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok((status, body))
    }
}

fn midnight_ts(d: NaiveDate) -> i64 {
    d.and_hms_opt(0, 0, 0)
        .map_or(0, |t| t.and_utc().timestamp())
}

/// The Yahoo chart URL for a symbol and range (end inclusive).
pub(crate) fn yahoo_url(
    base: &Url,
    yahoo_sym: &str,
    start: Option<NaiveDate>,
    end: Option<NaiveDate>,
) -> Result<Url, DataError> {
    let mut url = base.clone();
    url.path_segments_mut()
        .map_err(|()| DataError::Unavailable {
            loader: Source::Yahoo,
            reason: format!("base URL '{base}' cannot take a path"),
        })?
        .pop_if_empty()
        .extend(["v8", "finance", "chart", yahoo_sym]);
    let p1 = start.map_or(YAHOO_EPOCH, midnight_ts);
    // period2 is exclusive: the day after `end`, or now.
    let p2 = end
        .and_then(|e| e.succ_opt())
        .map_or_else(|| Utc::now().timestamp(), midnight_ts);
    url.query_pairs_mut()
        .clear()
        .append_pair("period1", &p1.to_string())
        .append_pair("period2", &p2.to_string())
        .append_pair("interval", "1d")
        .append_pair("events", "history")
        .append_pair("includeAdjustedClose", "true");
    Ok(url)
}

/// The Stooq download URL for a symbol and range.
pub(crate) fn stooq_url(
    base: &Url,
    stooq_sym: &str,
    start: Option<NaiveDate>,
    end: Option<NaiveDate>,
) -> Result<Url, DataError> {
    let mut url = base.clone();
    url.path_segments_mut()
        .map_err(|()| DataError::Unavailable {
            loader: Source::Stooq,
            reason: format!("base URL '{base}' cannot take a path"),
        })?
        .pop_if_empty()
        .extend(["q", "d", "l", ""]);
    {
        let mut q = url.query_pairs_mut();
        q.clear().append_pair("s", stooq_sym).append_pair("i", "d");
        if let Some(s) = start {
            q.append_pair("d1", &s.format("%Y%m%d").to_string());
        }
        if let Some(e) = end {
            q.append_pair("d2", &e.format("%Y%m%d").to_string());
        }
    }
    Ok(url)
}

#[derive(Deserialize)]
struct YChart {
    chart: YChartBody,
}

#[derive(Deserialize)]
struct YChartBody {
    result: Option<Vec<YResult>>,
    error: Option<YError>,
}

#[derive(Deserialize)]
struct YError {
    code: Option<String>,
    description: Option<String>,
}

#[derive(Deserialize)]
struct YResult {
    meta: Option<YMeta>,
    timestamp: Option<Vec<i64>>,
    indicators: Option<YIndicators>,
}

#[derive(Deserialize)]
struct YMeta {
    gmtoffset: Option<i64>,
}

#[derive(Deserialize)]
struct YIndicators {
    #[serde(default)]
    quote: Vec<YQuote>,
    adjclose: Option<Vec<YAdj>>,
}

#[derive(Deserialize, Default)]
struct YQuote {
    open: Option<Vec<Option<f64>>>,
    high: Option<Vec<Option<f64>>>,
    low: Option<Vec<Option<f64>>>,
    close: Option<Vec<Option<f64>>>,
    volume: Option<Vec<Option<f64>>>,
}

#[derive(Deserialize)]
struct YAdj {
    adjclose: Option<Vec<Option<f64>>>,
}

/// Yahoo's own word that it has no data for a symbol.
#[derive(Debug, thiserror::Error)]
pub enum YahooNoData {
    #[error("{code}: {description}")]
    ChartError { code: String, description: String },
    #[error("the answer has no result")]
    NoResult,
}

/// Parses a Yahoo chart answer into unadjusted bars plus the adjusted close.
/// `Ok(Err(_))` is Yahoo saying it has no data for the symbol.
pub fn parse_yahoo(body: &[u8], url: &str) -> Result<Result<ParsedCsv, YahooNoData>, DataError> {
    let decode = |detail: String| DataError::Decode {
        loader: Source::Yahoo,
        url: url.to_string(),
        detail,
    };
    let chart: YChart = serde_json::from_slice(body)
        .map_err(|e| decode(format!("{e} (answer: {})", snippet(body))))?;
    if let Some(err) = chart.chart.error {
        return Ok(Err(YahooNoData::ChartError {
            code: err.code.unwrap_or_else(|| "error".into()),
            description: err.description.unwrap_or_default(),
        }));
    }
    let Some(result) = chart.chart.result.and_then(|r| r.into_iter().next()) else {
        return Ok(Err(YahooNoData::NoResult));
    };
    let offset = result.meta.and_then(|m| m.gmtoffset).unwrap_or(0);
    let ts = result.timestamp.unwrap_or_default();
    let ind = result.indicators;
    let (quote, adj) = match ind {
        Some(i) => (
            i.quote.into_iter().next().unwrap_or_default(),
            i.adjclose
                .and_then(|a| a.into_iter().next())
                .and_then(|a| a.adjclose),
        ),
        None => (YQuote::default(), None),
    };
    let n = ts.len();
    let col = |c: Option<Vec<Option<f64>>>, name: &str| -> Result<Vec<f64>, DataError> {
        let v = c.unwrap_or_default();
        if v.len() != n && !(n == 0 && v.is_empty()) {
            return Err(decode(format!(
                "'{name}' has {} values for {n} timestamps",
                v.len()
            )));
        }
        Ok(v.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect())
    };
    let open = col(quote.open, "open")?;
    let high = col(quote.high, "high")?;
    let low = col(quote.low, "low")?;
    let close = col(quote.close, "close")?;
    let volume = match quote.volume {
        Some(v) if v.len() == n => v.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect(),
        _ => vec![f64::NAN; n],
    };
    let adj_close = adj.map(|a| col(Some(a), "adjclose")).transpose()?;
    let mut bars = Bars::with_capacity(n);
    for (i, t) in ts.iter().enumerate() {
        let date = DateTime::<Utc>::from_timestamp(t + offset, 0)
            .ok_or_else(|| decode(format!("timestamp {t} is out of range")))?
            .date_naive();
        bars.push(date, open[i], high[i], low[i], close[i], volume[i]);
    }
    Ok(Ok(ParsedCsv {
        bars,
        adj_close,
        has_volume: true,
        row_starts: None,
        quick: false,
    }))
}

type Finished = (Bars, Vec<String>, clean::DropReport, Vec<String>);

fn series(symbol: &str, market: Market, loader: Source, url: &Url, done: Finished) -> PriceSeries {
    let (bars, adjustments, dropped, notes) = done;
    PriceSeries {
        symbol: symbol.trim().to_string(),
        provenance: Provenance {
            symbol: symbol.trim().to_string(),
            market,
            source: loader,
            requested_source: loader.as_str().to_string(),
            location: url.to_string(),
            fetched_at: Utc::now(),
            from_cache: false,
            rows: bars.len(),
            first_date: bars.first_date(),
            last_date: bars.last_date(),
            adjustments,
            dropped,
            notes,
            attempts: Vec::new(),
        },
        bars,
        source_rows: None,
    }
}

fn http_error(loader: Source, url: &Url, status: u16, body: &[u8]) -> DataError {
    let mut text = snippet(body);
    if status == 429 {
        text = format!("rate limited; wait a minute or use another source ({text})");
    }
    DataError::Http {
        loader,
        url: url.to_string(),
        status,
        snippet: text,
    }
}

/// Fetches daily bars from Yahoo.
pub(crate) async fn fetch_yahoo(
    client: &Client,
    base: &Url,
    symbol: &str,
    market: Market,
    start: Option<NaiveDate>,
    end: Option<NaiveDate>,
) -> Result<PriceSeries, DataError> {
    let url = yahoo_url(base, &yahoo_symbol(symbol, market), start, end)?;
    let (status, body) = client.get(Source::Yahoo, &url).await?;
    let not_found = |detail: String| DataError::NotFound {
        loader: Source::Yahoo,
        symbol: symbol.to_string(),
        detail,
    };
    if !(200..300).contains(&status) {
        // Yahoo answers an unknown symbol with 404 and a chart error body.
        if status == 404 {
            let detail = match parse_yahoo(&body, url.as_str()) {
                Ok(Err(no_data)) => no_data.to_string(),
                _ => snippet(&body),
            };
            return Err(not_found(detail));
        }
        return Err(http_error(Source::Yahoo, &url, status, &body));
    }
    let parsed = parse_yahoo(&body, url.as_str())?.map_err(|e| not_found(e.to_string()))?;
    let had_adj = parsed.adj_close.is_some();
    let mut done = parsed.finish(start, end);
    if !had_adj {
        done.3.push(
            "Yahoo sent no adjusted close: prices are split-adjusted by Yahoo, not dividend-adjusted"
                .into(),
        );
    }
    Ok(series(symbol, market, Source::Yahoo, &url, done))
}

/// Fetches daily bars from Stooq.
pub(crate) async fn fetch_stooq(
    client: &Client,
    base: &Url,
    symbol: &str,
    market: Market,
    start: Option<NaiveDate>,
    end: Option<NaiveDate>,
) -> Result<PriceSeries, DataError> {
    let url = stooq_url(base, &stooq_symbol(symbol, market), start, end)?;
    let (status, body) = client.get(Source::Stooq, &url).await?;
    if !(200..300).contains(&status) {
        return Err(http_error(Source::Stooq, &url, status, &body));
    }
    let text = String::from_utf8_lossy(&body);
    let trimmed = text.trim();
    if trimmed.is_empty() || trimmed.eq_ignore_ascii_case("no data") {
        return Err(DataError::NotFound {
            loader: Source::Stooq,
            symbol: symbol.to_string(),
            detail: "Stooq answered 'No data'".into(),
        });
    }
    if trimmed
        .to_ascii_lowercase()
        .contains("exceeded the daily hits limit")
    {
        return Err(DataError::Http {
            loader: Source::Stooq,
            url: url.to_string(),
            status,
            snippet: "Stooq's daily download limit is exhausted; try tomorrow or another source"
                .into(),
        });
    }
    if trimmed.starts_with('<') {
        return Err(DataError::Decode {
            loader: Source::Stooq,
            url: url.to_string(),
            detail: format!("expected CSV, got HTML ({})", snippet(&body)),
        });
    }
    let parsed = parse_csv(&body, url.as_str(), None).map_err(|e| DataError::Decode {
        loader: Source::Stooq,
        url: url.to_string(),
        detail: e.to_string(),
    })?;
    let mut done = parsed.finish(start, end);
    if done.1.is_empty() {
        done.1.push(
            "none applied: Stooq prices are already split- and dividend-adjusted by Stooq".into(),
        );
    }
    Ok(series(symbol, market, Source::Stooq, &url, done))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn urls_carry_the_range_and_encode_the_symbol() {
        let base = Url::parse("http://127.0.0.1:9/prefix/").unwrap();
        let u = yahoo_url(
            &base,
            "EURUSD=X",
            Some(d("2024-01-02")),
            Some(d("2024-01-31")),
        )
        .unwrap();
        assert_eq!(
            u.as_str(),
            "http://127.0.0.1:9/prefix/v8/finance/chart/EURUSD=X?period1=1704153600&period2=1706745600&interval=1d&events=history&includeAdjustedClose=true"
        );
        let s = stooq_url(&base, "aapl.us", Some(d("2024-01-02")), None).unwrap();
        assert_eq!(
            s.as_str(),
            "http://127.0.0.1:9/prefix/q/d/l/?s=aapl.us&i=d&d1=20240102"
        );
    }

    #[test]
    fn yahoo_errors_and_nulls() {
        let nf = br#"{"chart":{"result":null,"error":{"code":"Not Found","description":"No data found, symbol may be delisted"}}}"#;
        assert!(
            parse_yahoo(nf, "u")
                .unwrap()
                .unwrap_err()
                .to_string()
                .contains("delisted")
        );
        let ok = br#"{"chart":{"result":[{"meta":{"gmtoffset":-18000},"timestamp":[1704205800,1704292200],
            "indicators":{"quote":[{"open":[1.0,null],"high":[2.0,2.0],"low":[0.5,0.5],"close":[1.5,1.5],"volume":[10,null]}],
            "adjclose":[{"adjclose":[1.5,1.5]}]}}],"error":null}}"#;
        let p = parse_yahoo(ok, "u").unwrap().unwrap();
        assert_eq!(p.bars.dates, vec![d("2024-01-02"), d("2024-01-03")]);
        assert!(p.bars.open[1].is_nan() && p.bars.volume[1].is_nan());
        let bad = br#"{"chart":{"result":[{"timestamp":[1],"indicators":{"quote":[{"open":[],"high":[],"low":[],"close":[]}]}}]}}"#;
        assert!(matches!(
            parse_yahoo(bad, "u"),
            Err(DataError::Decode { .. })
        ));
        assert!(matches!(
            parse_yahoo(b"<html>", "u"),
            Err(DataError::Decode { .. })
        ));
    }
}
