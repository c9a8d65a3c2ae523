//! Choosing a source and falling back (docs §7.3 "Rules").
//!
//! `auto`: the symbol's market gives the chain ([`Market::chain`]); the first
//! available loader that serves rows wins, the others are tried in order
//! and recorded in the provenance's `attempts`. In `auto` the embedded set
//! must cover the whole requested range (it ends in 2013); when nothing else
//! serves, its partial coverage is returned as a last resort, with a note.
//! An explicit source is tried first, then the rest of its market's chain —
//! except `local`, which fails loudly with its own error. Errors in the
//! user's own input (a malformed CSV, a Parquet file, a bad range) stop the
//! chain instead of being hidden by a fallback.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use chrono::{NaiveDate, Utc};
use futures_util::StreamExt;
use reqwest::Url;

use super::cache::{Cache, is_cacheable};
use super::market::{Market, detect_market};
use super::online::{self, Client, DEFAULT_STOOQ_BASE, DEFAULT_YAHOO_BASE};
use super::{Attempt, DataError, Interval, PriceSeries, Source, SourceChoice, embedded, local};

/// Days of slack when judging whether a stored range covers a request
/// (weekends and holidays: a range may start or end on a closed day).
const COVER_SLACK_DAYS: i64 = 4;
/// Symbols fetched at once by [`MarketData::fetch_all`] (Yahoo rate-limits).
const FETCH_CONCURRENCY: usize = 4;

/// One loader of a plan and whether it can be used (`Err` says why not).
pub type PlanStep = (Source, Result<(), Unavailable>);

/// Why a loader cannot be used at all.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Unavailable {
    #[error("online sources are switched off")]
    Offline,
    #[error("no local data folder is configured")]
    NoLocalFolder,
    /// The loader could not be set up (a bad base URL, no HTTP client): its
    /// own reason, kept as text because every later call is told the same.
    #[error("{0}")]
    Setup(String),
}

/// Where data may come from.
#[derive(Clone, Debug)]
pub struct DataConfig {
    /// Online answers are cached under `<cache_dir>/market/`; `None` disables
    /// the cache.
    pub cache_dir: Option<PathBuf>,
    /// Folders the `local` loader searches for `<SYMBOL>.csv`; empty makes
    /// `local` unavailable.
    pub local_dirs: Vec<PathBuf>,
    /// Where parsed local files are kept for reruns (see
    /// [`super::bars_cache`]); `None` parses every time.
    pub parsed_cache: Option<PathBuf>,
    /// Whether a parse is also stored in `parsed_cache` (valid entries are
    /// read either way). Off for a load nothing is known to follow: an
    /// entry costs about as many bytes written as the file it spares.
    pub keep_parsed: bool,
    /// Whether the online loaders may be used at all.
    pub online: bool,
    pub yahoo_base_url: String,
    pub stooq_base_url: String,
    /// Whole-request deadline for one online fetch (0 = none).
    pub timeout: Duration,
}

impl Default for DataConfig {
    fn default() -> Self {
        DataConfig {
            cache_dir: None,
            local_dirs: Vec::new(),
            parsed_cache: None,
            keep_parsed: true,
            online: true,
            yahoo_base_url: DEFAULT_YAHOO_BASE.to_string(),
            stooq_base_url: DEFAULT_STOOQ_BASE.to_string(),
            timeout: Duration::from_secs(30),
        }
    }
}

impl DataConfig {
    /// Embedded data only (plus local folders if added): no network.
    pub fn offline() -> Self {
        DataConfig {
            online: false,
            ..DataConfig::default()
        }
    }
}

/// One symbol over a date range (both ends inclusive and optional: no start
/// means all history, no end means up to today).
#[derive(Clone, Debug, PartialEq)]
pub struct DataRequest {
    pub symbol: String,
    pub start: Option<NaiveDate>,
    pub end: Option<NaiveDate>,
    pub source: SourceChoice,
    pub interval: Interval,
    /// Bars wanted before `start` as well (warm-up, docs §7.4.1; 0: none,
    /// `usize::MAX`: all). The series served then begins earlier, and its
    /// caller cuts it: see [`DataRequest::load_start`].
    pub history: usize,
}

/// Calendar days that hold at least `bars` trading days: 1.6 a bar
/// (365/252 ≈ 1.45 on a US exchange, more where holidays are many), plus
/// two weeks for a long closure.
pub fn history_days(bars: usize) -> i64 {
    i64::try_from(bars).map_or(i64::MAX, |b| b.saturating_mul(8) / 5 + 14)
}

/// `start` less [`history_days`] of `bars`: `None` past the calendar's
/// first date (checked: a user's count may be any size, issue 35).
fn history_start(start: NaiveDate, bars: usize) -> Option<NaiveDate> {
    chrono::TimeDelta::try_days(history_days(bars)).and_then(|d| start.checked_sub_signed(d))
}

impl DataRequest {
    pub fn new(symbol: impl Into<String>) -> Self {
        DataRequest {
            symbol: symbol.into(),
            start: None,
            end: None,
            source: SourceChoice::Auto,
            interval: Interval::D1,
            history: 0,
        }
    }

    /// Also load `bars` bars before `start` (see [`DataRequest::history`]).
    pub(crate) fn history(mut self, bars: usize) -> Self {
        self.history = bars;
        self
    }

    /// The first date a loader is asked for: the start, or with warm-up
    /// history all of it from the local and embedded sources (reading it
    /// costs nothing more) and [`history_days`] more from the online ones.
    pub(crate) fn load_start(&self, source: Source) -> Option<NaiveDate> {
        let start = self.start?;
        if self.history == 0 {
            return Some(start);
        }
        if !source.is_online() || self.history == usize::MAX {
            return None;
        }
        history_start(start, self.history)
    }

    pub fn range(mut self, start: Option<NaiveDate>, end: Option<NaiveDate>) -> Self {
        self.start = start;
        self.end = end;
        self
    }

    pub fn source(mut self, source: SourceChoice) -> Self {
        self.source = source;
        self
    }

    fn range_text(&self) -> String {
        let s = self
            .start
            .map_or_else(|| "start of history".into(), |d| d.to_string());
        let e = self.end.map_or_else(|| "today".into(), |d| d.to_string());
        format!("{s} to {e}")
    }
}

/// Several symbols over one range: every requested symbol is present.
#[derive(Clone, Debug)]
pub struct Universe {
    pub series: Vec<PriceSeries>,
    /// The loaders that actually served rows, sorted (docs §7.3).
    pub effective_sources: Vec<Source>,
}

/// The data service: loaders, fallback, cache. Cloning is cheap (the HTTP
/// clients share their connection pools).
#[derive(Clone, Debug)]
pub struct MarketData {
    config: DataConfig,
    yahoo: OnlineLoader,
    stooq: OnlineLoader,
    cache: Option<Cache>,
    today: Option<NaiveDate>,
}

/// An online loader whose HTTP client is built on first use: building one
/// loads the system's root certificates (milliseconds), which a run that
/// stays on the embedded data never needs.
#[derive(Clone, Debug)]
struct OnlineLoader {
    loader: Source,
    base: String,
    timeout: Duration,
    /// Why the loader cannot be used at all (switched off, a bad base URL).
    refused: Option<Unavailable>,
    client: Arc<OnceLock<Result<(Client, Url), Unavailable>>>,
}

fn reason_of(e: DataError) -> Unavailable {
    Unavailable::Setup(match e {
        DataError::Unavailable { reason, .. } => reason,
        other => other.to_string(),
    })
}

impl OnlineLoader {
    fn new(online: bool, loader: Source, base: &str, timeout: Duration) -> Self {
        let refused = if online {
            online::base_url(loader, base).err().map(reason_of)
        } else {
            Some(Unavailable::Offline)
        };
        OnlineLoader {
            loader,
            base: base.to_string(),
            timeout,
            refused,
            client: Arc::new(OnceLock::new()),
        }
    }

    fn availability(&self) -> Result<(), Unavailable> {
        self.refused.clone().map_or(Ok(()), Err)
    }

    fn client(&self) -> Result<&(Client, Url), Unavailable> {
        self.availability()?;
        self.client
            .get_or_init(|| {
                online::client_for(self.loader, &self.base, self.timeout).map_err(reason_of)
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl MarketData {
    /// Sets up the loaders; one that cannot be set up (a bad base URL) is
    /// merely unavailable, as in the spec.
    pub fn new(config: DataConfig) -> Self {
        let yahoo = OnlineLoader::new(
            config.online,
            Source::Yahoo,
            &config.yahoo_base_url,
            config.timeout,
        );
        let stooq = OnlineLoader::new(
            config.online,
            Source::Stooq,
            &config.stooq_base_url,
            config.timeout,
        );
        let cache = config.cache_dir.as_deref().map(Cache::new);
        MarketData {
            config,
            yahoo,
            stooq,
            cache,
            today: None,
        }
    }

    /// Embedded data only.
    pub fn offline() -> Self {
        MarketData::new(DataConfig::offline())
    }

    /// Fixes "today" (which decides what may be cached); for tests and replays.
    pub fn with_today(mut self, today: NaiveDate) -> Self {
        self.today = Some(today);
        self
    }

    /// The same service searching other local folders (e.g. a session's
    /// workspace), sharing clients and cache.
    pub(crate) fn with_local_dirs(&self, dirs: Vec<PathBuf>) -> MarketData {
        let mut md = self.clone();
        md.config.local_dirs = dirs;
        md
    }

    pub fn config(&self) -> &DataConfig {
        &self.config
    }

    pub fn cache(&self) -> Option<&Cache> {
        self.cache.as_ref()
    }

    fn today(&self) -> NaiveDate {
        self.today.unwrap_or_else(|| Utc::now().date_naive())
    }

    /// Whether a loader can be used at all, or why not.
    pub(crate) fn availability(&self, source: Source) -> Result<(), Unavailable> {
        match source {
            Source::Embedded => Ok(()),
            Source::Local if self.config.local_dirs.is_empty() => Err(Unavailable::NoLocalFolder),
            Source::Local => Ok(()),
            Source::Yahoo => self.yahoo.availability(),
            Source::Stooq => self.stooq.availability(),
        }
    }

    /// The symbol's market and the loaders that would be tried, in order,
    /// each with its availability.
    pub fn plan(&self, symbol: &str, choice: SourceChoice) -> (Market, Vec<PlanStep>) {
        let market = detect_market(symbol);
        let order: Vec<Source> = match choice {
            SourceChoice::Auto => market.chain().to_vec(),
            SourceChoice::Explicit(Source::Local) => vec![Source::Local],
            SourceChoice::Explicit(s) => std::iter::once(s)
                .chain(market.chain().iter().copied().filter(|c| *c != s))
                .collect(),
        };
        let plan = order
            .into_iter()
            .map(|s| (s, self.availability(s)))
            .collect();
        (market, plan)
    }

    fn validate(&self, req: &DataRequest) -> Result<(), DataError> {
        let s = req.symbol.trim();
        if s.is_empty() || s.len() > 64 || s.chars().any(char::is_control) {
            return Err(DataError::InvalidSymbol(req.symbol.clone()));
        }
        if req.interval != Interval::D1 {
            return Err(DataError::UnsupportedInterval {
                given: req.interval.as_str().to_string(),
                detail: "the loaders serve daily bars only; use interval 1D".into(),
            });
        }
        if let (Some(a), Some(b)) = (req.start, req.end)
            && a > b
        {
            return Err(DataError::InvalidRange {
                symbol: s.to_string(),
                start: a,
                end: b,
            });
        }
        // usize::MAX is "all of it"; any other count must reach a date.
        if let Some(start) = req.start
            && req.history != usize::MAX
            && history_start(start, req.history).is_none()
        {
            return Err(DataError::HistoryTooLong {
                symbol: s.to_string(),
                bars: req.history,
                start,
            });
        }
        Ok(())
    }

    /// Whether a series spans the request (with slack for closed days).
    fn covers(&self, series: &PriceSeries, req: &DataRequest) -> bool {
        let (Some(first), Some(last)) = (series.bars.first_date(), series.bars.last_date()) else {
            return false;
        };
        let slack = chrono::Duration::days(COVER_SLACK_DAYS);
        let end = req.end.unwrap_or_else(|| self.today());
        // Checked: a requested date may sit at the calendar's edge.
        let plus = |d: NaiveDate| d.checked_add_signed(slack).unwrap_or(NaiveDate::MAX);
        req.start.is_none_or(|s| first <= plus(s)) && plus(last) >= end
    }

    /// Fetches one symbol, falling back along its chain.
    pub async fn fetch(&self, req: &DataRequest) -> Result<PriceSeries, DataError> {
        self.validate(req)?;
        let symbol = req.symbol.trim();
        let (market, plan) = self.plan(symbol, req.source);
        let strict_embedded = req.source == SourceChoice::Auto;
        let mut attempts: Vec<Attempt> = Vec::new();
        let mut partial: Option<PriceSeries> = None;
        for (source, available) in plan {
            if let Err(reason) = available {
                if req.source == SourceChoice::Explicit(Source::Local) {
                    return Err(DataError::Unavailable {
                        loader: source,
                        reason: reason.to_string(),
                    });
                }
                attempts.push(Attempt {
                    source,
                    outcome: format!("unavailable: {reason}"),
                });
                continue;
            }
            match self.load_from(source, symbol, market, req).await {
                Ok(series) if series.bars.is_empty() => attempts.push(Attempt {
                    source,
                    outcome: format!("no rows from {}", req.range_text()),
                }),
                Ok(series)
                    if source == Source::Embedded
                        && strict_embedded
                        && !self.covers(&series, req) =>
                {
                    attempts.push(Attempt {
                        source,
                        outcome: format!(
                            "covers only {} to {} of {}",
                            fmt_date(series.bars.first_date()),
                            fmt_date(series.bars.last_date()),
                            req.range_text()
                        ),
                    });
                    partial = Some(series);
                }
                Ok(series) => return Ok(finish(series, market, req, attempts, None)),
                Err(e) if req.source == SourceChoice::Explicit(Source::Local) || e.is_fatal() => {
                    return Err(e);
                }
                Err(e) => attempts.push(Attempt {
                    source,
                    outcome: e.to_string(),
                }),
            }
        }
        if let Some(series) = partial {
            let note = format!(
                "partial coverage: the embedded set holds {} from {} to {}; no other source served {}",
                series.symbol,
                fmt_date(series.bars.first_date()),
                fmt_date(series.bars.last_date()),
                req.range_text()
            );
            let attempts = attempts
                .into_iter()
                .filter(|a| a.source != Source::Embedded)
                .collect();
            return Ok(finish(series, market, req, attempts, Some(note)));
        }
        Err(DataError::NoData {
            symbol: symbol.to_string(),
            market,
            range: req.range_text(),
            tried: if attempts.is_empty() {
                "no source".into()
            } else {
                attempts
                    .iter()
                    .map(|a| format!("{}: {}", a.source, a.outcome))
                    .collect::<Vec<_>>()
                    .join("; ")
            },
        })
    }

    /// Fetches several symbols over one range. Any symbol that no source
    /// serves fails the whole call: the universe never shrinks silently.
    pub async fn fetch_all(
        &self,
        codes: &[String],
        start: Option<NaiveDate>,
        end: Option<NaiveDate>,
        source: SourceChoice,
    ) -> Result<Universe, DataError> {
        self.fetch_all_with_history(codes, start, end, source, 0)
            .await
    }

    /// [`Self::fetch_all`] with `history` bars before `start` as well
    /// ([`DataRequest::history`]).
    pub(crate) async fn fetch_all_with_history(
        &self,
        codes: &[String],
        start: Option<NaiveDate>,
        end: Option<NaiveDate>,
        source: SourceChoice,
        history: usize,
    ) -> Result<Universe, DataError> {
        let batch = match source {
            SourceChoice::Explicit(Source::Local) => {
                let from = if history > 0 { None } else { start };
                self.load_local_batch(codes, (start, from), end).await
            }
            _ => Vec::new(),
        };
        let served: std::collections::HashSet<usize> = batch.iter().map(|(i, _)| *i).collect();
        let mut indexed: Vec<(usize, Result<PriceSeries, DataError>)> =
            batch.into_iter().map(|(i, s)| (i, Ok(s))).collect();
        // The rest (all of them, but for local files) one by one.
        // Unordered, then put back in order: in order, one slow symbol at
        // the head of the window would hold back the loads behind it.
        let rest = codes
            .iter()
            .enumerate()
            .filter(|(i, _)| !served.contains(i));
        indexed.extend(
            futures_util::stream::iter(rest)
                .map(|(i, code)| {
                    let req = DataRequest::new(code.clone())
                        .range(start, end)
                        .source(source)
                        .history(history);
                    async move { (i, self.fetch(&req).await) }
                })
                .buffer_unordered(FETCH_CONCURRENCY)
                .collect::<Vec<_>>()
                .await,
        );
        indexed.sort_unstable_by_key(|(i, _)| *i);
        let results = indexed.into_iter().map(|(_, r)| r);
        let mut series = Vec::with_capacity(results.len());
        let mut failures = Vec::new();
        for (code, r) in codes.iter().zip(results) {
            match r {
                Ok(s) => series.push(s),
                Err(e) => failures.push(format!("{code}: {e}")),
            }
        }
        if !failures.is_empty() {
            return Err(DataError::Incomplete {
                missing: failures.len(),
                total: codes.len(),
                detail: failures.join(" | "),
            });
        }
        let mut effective_sources: Vec<Source> =
            series.iter().map(|s| s.provenance.source).collect();
        effective_sources.sort();
        effective_sources.dedup();
        Ok(Universe {
            series,
            effective_sources,
        })
    }

    /// The local files of `codes` loaded in one batch ([`local::load_many`]),
    /// as `(index, series)` for each symbol it served; the others (not
    /// found, no rows, an invalid request) are left to [`Self::fetch`],
    /// which reports them as a single load would.
    /// `(start, from)`: the requested start, and the first date to read
    /// (earlier with warm-up history).
    async fn load_local_batch(
        &self,
        codes: &[String],
        (start, from): (Option<NaiveDate>, Option<NaiveDate>),
        end: Option<NaiveDate>,
    ) -> Vec<(usize, PriceSeries)> {
        if self.availability(Source::Local).is_err() {
            return Vec::new();
        }
        let reqs: Vec<DataRequest> = codes
            .iter()
            .map(|c| {
                DataRequest::new(c.clone())
                    .range(start, end)
                    .source(SourceChoice::Explicit(Source::Local))
            })
            .collect();
        let symbols: Vec<String> = reqs.iter().map(|r| r.symbol.trim().to_string()).collect();
        let dirs = self.config.local_dirs.clone();
        let cache = self.config.parsed_cache.clone();
        let keep = self.config.keep_parsed;
        let Ok(loaded) = tokio::task::spawn_blocking(move || {
            local::load_many(&symbols, &dirs, from, end, cache.as_deref(), keep)
        })
        .await
        else {
            return Vec::new();
        };
        reqs.iter()
            .zip(loaded)
            .enumerate()
            .filter_map(|(i, (req, r))| match r {
                Ok(series) if !series.bars.is_empty() && self.validate(req).is_ok() => {
                    let (market, _) = self.plan(req.symbol.trim(), req.source);
                    Some((i, finish(series, market, req, Vec::new(), None)))
                }
                _ => None,
            })
            .collect()
    }

    async fn load_from(
        &self,
        source: Source,
        symbol: &str,
        market: Market,
        req: &DataRequest,
    ) -> Result<PriceSeries, DataError> {
        let (start, end) = (req.load_start(source), req.end);
        match source {
            // A symbol the set lacks is a NotFound that names `data --list`.
            Source::Embedded => embedded::load(symbol, start, end),
            Source::Local => {
                let dirs = self.config.local_dirs.clone();
                let cache = self.config.parsed_cache.clone();
                let keep = self.config.keep_parsed;
                let sym = symbol.to_string();
                tokio::task::spawn_blocking(move || {
                    local::load(&sym, &dirs, start, end, cache.as_deref(), keep)
                })
                .await
                .map_err(|e| DataError::Unavailable {
                    loader: Source::Local,
                    reason: format!("the loader task failed: {e}"),
                })?
            }
            Source::Yahoo | Source::Stooq => {
                self.load_online(source, symbol, market, start, end).await
            }
        }
    }

    async fn load_online(
        &self,
        source: Source,
        symbol: &str,
        market: Market,
        start: Option<NaiveDate>,
        end: Option<NaiveDate>,
    ) -> Result<PriceSeries, DataError> {
        let cacheable = self.cache.is_some() && is_cacheable(end, self.today());
        if let (true, Some(cache), Some(e)) = (cacheable, &self.cache, end)
            && let Some(hit) = cache.get(source, symbol, start, e).await
        {
            return Ok(hit);
        }
        let loader = match source {
            Source::Yahoo => &self.yahoo,
            _ => &self.stooq,
        };
        let (client, base) = loader.client().map_err(|reason| DataError::Unavailable {
            loader: source,
            reason: reason.to_string(),
        })?;
        let series = match source {
            Source::Yahoo => online::fetch_yahoo(client, base, symbol, market, start, end).await?,
            _ => online::fetch_stooq(client, base, symbol, market, start, end).await?,
        };
        if let (true, Some(cache), Some(e)) = (cacheable, &self.cache, end)
            && !series.bars.is_empty()
            && let Err(err) = cache.put(&series, start, e).await
        {
            // A cache that cannot be written costs a refetch, nothing more.
            tracing::warn!(%err, root = %cache.root().display(), "cannot write the market data cache");
        }
        Ok(series)
    }
}

fn fmt_date(d: Option<NaiveDate>) -> String {
    d.map_or_else(|| "-".into(), |d| d.to_string())
}

fn finish(
    mut series: PriceSeries,
    market: Market,
    req: &DataRequest,
    attempts: Vec<Attempt>,
    note: Option<String>,
) -> PriceSeries {
    let symbol = req.symbol.trim().to_string();
    let p = &mut series.provenance;
    p.symbol = symbol.clone();
    p.market = market;
    p.requested_source = req.source.as_str().to_string();
    p.attempts = attempts;
    p.rows = series.bars.len();
    p.first_date = series.bars.first_date();
    p.last_date = series.bars.last_date();
    if let Some(n) = note {
        p.notes.push(n);
    }
    // A named source that failed is said where the rows are shown, not
    // only in `attempts`.
    if let Some(n) = p.fallback() {
        p.notes.push(n);
    }
    series.symbol = symbol;
    series
}
