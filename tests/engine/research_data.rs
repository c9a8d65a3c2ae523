//! The research room's market data and indicators: the embedded dataset,
//! local CSV files, the online loaders over a loopback responder, the cache,
//! the fallback rules (spec §7.3), and every indicator against the pandas
//! reference in `tests/fixtures/indicators/`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{NaiveDate, Utc};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use vibedesk::research::data::{
    DataConfig, DataError, DataRequest, MarketData, PriceSeries, Source, SourceChoice, embedded,
    local,
};
use vibedesk::research::indicators;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn d(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

fn fixture(rel: &str) -> Vec<u8> {
    std::fs::read(Path::new(FIXTURES).join(rel)).unwrap()
}

// ---------------------------------------------------------------------------
// A tiny HTTP/1.1 responder on 127.0.0.1: routes by path prefix (first match
// wins), records every request target, answers with Connection: close.

pub(crate) struct Route {
    prefix: &'static str,
    status: u16,
    content_type: &'static str,
    body: Vec<u8>,
}

pub(crate) struct Server {
    pub(crate) base: String,
    hits: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    pub(crate) async fn start(routes: Vec<Route>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let hits = Arc::new(Mutex::new(Vec::new()));
        let routes = Arc::new(routes);
        let task = {
            let hits = hits.clone();
            tokio::spawn(async move {
                loop {
                    let Ok((mut sock, _)) = listener.accept().await else {
                        return;
                    };
                    let hits = hits.clone();
                    let routes = routes.clone();
                    tokio::spawn(async move {
                        let mut head = Vec::new();
                        let mut buf = [0u8; 4096];
                        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
                            match tokio::time::timeout(Duration::from_secs(10), sock.read(&mut buf))
                                .await
                            {
                                Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
                                _ => return,
                            }
                        }
                        let text = String::from_utf8_lossy(&head);
                        let target = text.split_whitespace().nth(1).unwrap_or("/").to_string();
                        hits.lock().unwrap().push(target.clone());
                        let path = target.split('?').next().unwrap_or("");
                        let (status, ctype, body) = routes
                            .iter()
                            .find(|r| path.starts_with(r.prefix))
                            .map(|r| (r.status, r.content_type, r.body.clone()))
                            .unwrap_or((404, "text/plain", b"no route".to_vec()));
                        let reason = if status == 200 { "OK" } else { "Error" };
                        let mut resp = format!(
                            "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        )
                        .into_bytes();
                        resp.extend_from_slice(&body);
                        let _ = sock.write_all(&resp).await;
                        let _ = sock.shutdown().await;
                    });
                }
            })
        };
        Server { base, hits, task }
    }

    pub(crate) fn hits(&self) -> Vec<String> {
        self.hits.lock().unwrap().clone()
    }
}

pub(crate) fn yahoo_routes() -> Vec<Route> {
    vec![
        Route {
            prefix: "/v8/finance/chart/AAPL",
            status: 200,
            content_type: "application/json;charset=utf-8",
            body: fixture("market/yahoo_aapl_2024-01-02_2024-02-29.json"),
        },
        Route {
            prefix: "/v8/finance/chart/",
            status: 404,
            content_type: "application/json;charset=utf-8",
            body: fixture("market/yahoo_not_found.json"),
        },
        Route {
            prefix: "/q/d/l/",
            status: 200,
            content_type: "text/csv",
            body: fixture("market/stooq_msft_us.csv"),
        },
    ]
}

fn online_config(server: &Server, cache: &Path) -> DataConfig {
    DataConfig {
        parsed_cache: None,
        keep_parsed: false,
        cache_dir: Some(cache.to_path_buf()),
        local_dirs: Vec::new(),
        online: true,
        yahoo_base_url: server.base.clone(),
        stooq_base_url: server.base.clone(),
        timeout: Duration::from_secs(10),
    }
}

fn ret_on(s: &PriceSeries, date: &str) -> f64 {
    let i = s.bars.index_of(d(date)).unwrap();
    s.bars.close[i] / s.bars.close[i - 1] - 1.0
}

// ---------------------------------------------------------------------------
// Embedded dataset

/// The 25 ETFs of the set, as its README lists them.
const ETFS: [&str; 25] = [
    "AGG", "DIA", "EEM", "EFA", "GLD", "HYG", "IEF", "IWM", "LQD", "QQQ", "SHY", "SLV", "SPY",
    "TLT", "USO", "VNQ", "XLB", "XLE", "XLF", "XLI", "XLK", "XLP", "XLU", "XLV", "XLY",
];

#[test]
fn embedded_set_holds_131_instruments_with_their_documented_facts() {
    let all = embedded::universe().unwrap();
    assert_eq!(all.len(), 131);
    let etfs: Vec<&str> = all
        .iter()
        .filter(|x| x.kind == embedded::Kind::Etf)
        .map(|x| x.ticker.as_str())
        .collect();
    assert_eq!(etfs, ETFS, "25 ETFs, sorted");
    assert_eq!(all.len() - etfs.len(), 106, "106 stocks");
    let mut total = 0;
    for x in all {
        let s = embedded::load(&x.ticker, None, None).unwrap();
        let b = &s.bars;
        let t = &x.ticker;
        assert_eq!(b.len(), x.rows, "{t}");
        assert_eq!(
            (b.first_date(), b.last_date()),
            (Some(x.first), Some(x.last)),
            "{t}"
        );
        assert_eq!(s.provenance.dropped.total(), 0, "{t}: the set is clean");
        assert!(
            b.dates.windows(2).all(|w| w[0] < w[1]),
            "{t}: dates ascend, none twice"
        );
        for i in 0..b.len() {
            let (o, h, l, c) = (b.open[i], b.high[i], b.low[i], b.close[i]);
            assert!(l > 0.0 && h >= l, "{t} {}", b.dates[i]);
            assert!(
                (l..=h).contains(&o) && (l..=h).contains(&c),
                "{t} {}",
                b.dates[i]
            );
            assert!(
                b.volume[i] >= 0.0 && b.volume[i].fract() == 0.0,
                "{t} {}",
                b.dates[i]
            );
        }
        assert!(
            x.first >= d("2000-01-03") && x.last == d("2017-11-10"),
            "{t}"
        );
        total += b.len();
    }
    assert_eq!(total, 540_808);
    let mut sorted = embedded::symbols();
    sorted.sort_unstable();
    assert_eq!(embedded::symbols(), sorted);
    // Dates the README states.
    let first = |t: &str| embedded::coverage(t).unwrap().unwrap().0;
    assert_eq!(first("SPY"), d("2005-02-25"));
    assert_eq!(first("GOOG"), d("2014-03-27"), "class C");
    assert_eq!(first("GOOGL"), d("2004-08-19"), "the older Google line");
    assert_eq!(first("FB"), d("2012-05-18"));
    assert_eq!(first("HYG"), d("2007-04-11"));
    let aapl = embedded::load("AAPL", Some(d("2017-11-08")), Some(d("2017-11-08"))).unwrap();
    assert_eq!(
        aapl.bars.close,
        [175.61],
        "the last bars are nominal prices"
    );
    assert_eq!(aapl.provenance.location, embedded::LOCATION);
    assert!(aapl.provenance.adjustments[0].contains("split- and dividend-adjusted"));
}

#[test]
fn embedded_prices_have_no_split_gaps_and_keep_the_real_crash() {
    let aapl = embedded::load("AAPL", None, None).unwrap();
    let msft = embedded::load("MSFT", None, None).unwrap();
    // Split days (AAPL 2:1 twice and 7:1, MSFT 2:1): no gap in the data.
    for (series, t, date) in [
        (&aapl, "AAPL", "2000-06-21"),
        (&aapl, "AAPL", "2005-02-28"),
        (&aapl, "AAPL", "2014-06-09"),
        (&msft, "MSFT", "2003-02-18"),
    ] {
        let adj = ret_on(series, date);
        assert!(adj.abs() < 0.12, "{t} {date}: adjusted return {adj}");
    }
    let crash = ret_on(&aapl, "2000-09-29");
    assert!(
        (-0.55..-0.50).contains(&crash),
        "the 2000-09-29 drop is real: {crash}"
    );
    // No adjusted daily move anywhere looks like a split.
    let worst = indicators::simple_returns(&aapl.bars.close)
        .into_iter()
        .filter(|r| !r.is_nan())
        .fold(0.0f64, f64::min);
    assert!(
        (worst - crash).abs() < 1e-12,
        "the crash is the worst day: {worst}"
    );
    // Dividends are in the adjustment too: AAPL closed at 111.94 on
    // 2000-01-03, 3.998 after its three splits (2 x 2 x 7); the dividends
    // it paid from 2012 on lower the old prices further.
    let split_only = 111.94 / 28.0;
    let first = aapl.bars.close[0];
    assert!(
        first < split_only * 0.95 && first > split_only * 0.8,
        "{first}"
    );
}

// ---------------------------------------------------------------------------
// Local CSV files

#[test]
fn sanity_filter_drops_and_reports_bad_rows_in_a_crafted_csv() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("BAD.csv");
    std::fs::write(
        &path,
        "date,open,high,low,close,volume\n\
         2024-01-02,10,11,9,10.5,100\n\
         2024-01-03,10.5,11,9.5,-1,100\n\
         2024-01-04,10,9,11,10,100\n\
         2024-01-05,12,11.5,10,11,100\n\
         2024-01-08,10,11,9,12,100\n\
         2024-01-03,10.5,11,9.5,10.8,100\n\
         2024-01-02,10,11,9,10.6,100\n\
         2024-01-09,,11,9,10,100\n\
         2024-01-10,10,11,9,10.2,100\n",
    )
    .unwrap();
    let s = local::load_file(&path, "BAD", None, None, None, false).unwrap();
    let r = s.provenance.dropped;
    assert_eq!(r.non_positive_price, 1);
    assert_eq!(r.high_below_low, 1);
    assert_eq!(r.open_close_outside_range, 2);
    assert_eq!(r.duplicate_date, 1, "the second 2024-01-02");
    assert_eq!(r.missing_value, 1);
    assert_eq!(r.total(), 6);
    assert_eq!(
        s.bars.dates,
        vec![d("2024-01-02"), d("2024-01-03"), d("2024-01-10")],
        "sorted; the good late 2024-01-03 row survives its bad twin"
    );
    assert_eq!(s.bars.close[0], 10.5, "first bar of a date wins");
    assert_eq!(s.provenance.rows, 3);
    assert!(
        s.provenance
            .notes
            .iter()
            .any(|n| n.contains("6 rows dropped")),
        "{:?}",
        s.provenance.notes
    );
}

#[test]
fn local_csv_header_variants_load() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, usize); 6] = [
        // Yahoo's download format, with an adjusted close.
        (
            "Y.csv",
            "Date,Open,High,Low,Close,Adj Close,Volume\n2024-01-02,100,110,90,100,50,10\n2024-01-03,52,54,50,51,51,20\n",
            2,
        ),
        (
            "T.csv",
            "timestamp,open,high,low,close,volume\n1704205800,1,2,0.5,1.5,10\n1704292200,1.5,2,1,1.8,11\n",
            2,
        ),
        (
            "S.csv",
            "DATE;OPEN;HIGH;LOW;CLOSE\n2024-01-02;1;2;0.5;1.5\n",
            1,
        ),
        (
            "TAB.csv",
            "trade_date\topen\thigh\tlow\tclose\tvol\n20240102\t1\t2\t0.5\t1.5\t7\n",
            1,
        ),
        (
            "M.csv",
            "\u{feff}Ticker,Date,Open,High,Low,Close,Volume\nM,2024-01-02,1,2,0.5,1.5,1\nOTHER,2024-01-02,1,2,0.5,1.5,1\nM,2024-01-03,1,2,0.5,1.5,1\n",
            2,
        ),
        (
            "DT.csv",
            "# exported by a terminal\nDatetime,Open,High,Low,Close,Volume\n2024-01-02 00:00:00,1,2,0.5,1.5,1\n2024-01-03T00:00:00Z,1,2,0.5,1.5,1\n",
            2,
        ),
    ];
    for (name, body, rows) in cases {
        std::fs::write(dir.path().join(name), body).unwrap();
        let sym = name.trim_end_matches(".csv");
        let s = local::load(sym, &[dir.path().to_path_buf()], None, None, None, false)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(s.bars.len(), rows, "{name}");
        assert_eq!(s.provenance.source, Source::Local);
    }
    // The adjusted close scales OHLC and volume.
    let y = local::load("y", &[dir.path().to_path_buf()], None, None, None, false).unwrap();
    assert_eq!(y.bars.close, vec![50.0, 51.0]);
    assert_eq!((y.bars.high[0], y.bars.volume[0]), (55.0, 20.0));
    assert!(!y.provenance.adjustments.is_empty());
    let t = local::load("T", &[dir.path().to_path_buf()], None, None, None, false).unwrap();
    assert_eq!(t.bars.dates, vec![d("2024-01-02"), d("2024-01-03")]);
    let s = local::load("S", &[dir.path().to_path_buf()], None, None, None, false).unwrap();
    assert!(s.bars.volume[0].is_nan());
    assert!(s.provenance.notes.iter().any(|n| n.contains("no volume")));
}

#[test]
fn local_csv_errors_name_the_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = [dir.path().to_path_buf()];
    let write = |name: &str, body: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        p
    };
    let p = write(
        "NUM.csv",
        "date,open,high,low,close\n2024-01-02,1,2,0.5,1.5\n2024-01-03,1,2,0.5,abc\n",
    );
    let e = local::load("NUM", &dirs, None, None, None, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains(&p.display().to_string()), "{e}");
    assert!(
        e.contains("line 3") && e.contains("column 'close'") && e.contains("'abc' is not a number"),
        "{e}"
    );

    write(
        "DATE.csv",
        "Date,Open,High,Low,Close\n02/01/2024,1,2,0.5,1.5\n",
    );
    let e = local::load("DATE", &dirs, None, None, None, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 2") && e.contains("column 'Date'") && e.contains("not a date"),
        "{e}"
    );

    write(
        "HDR.csv",
        "Date,Open,High,Low,Price\n2024-01-02,1,2,0.5,1.5\n",
    );
    let e = local::load("HDR", &dirs, None, None, None, false).unwrap_err();
    assert!(
        matches!(
            e,
            DataError::CsvHeader {
                missing: "close",
                ..
            }
        ),
        "{e}"
    );
    let e = e.to_string();
    assert!(
        e.contains("HDR.csv") && e.contains("found: Date, Open, High, Low, Price"),
        "{e}"
    );

    write("NOHDR.csv", "2024-01-02,1,2,0.5,1.5\n");
    let e = local::load("NOHDR", &dirs, None, None, None, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("looks like data, not a header"), "{e}");

    let pq = write("PQ.parquet", "PAR1....PAR1");
    let e = local::load("PQ", &dirs, None, None, None, false).unwrap_err();
    assert_eq!(e.code(), "parquet_error");
    assert!(e.is_fatal(), "a broken file of the user's stops the chain");
    let e = e.to_string();
    assert!(
        e.contains(&pq.display().to_string()) && e.contains("not a readable Parquet file"),
        "{e}"
    );

    let e = local::load("NOPE", &dirs, None, None, None, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("NOPE.csv") && e.contains(&dir.path().display().to_string()),
        "{e}"
    );
}

// ---------------------------------------------------------------------------
// Sources and fallback

// ---------------------------------------------------------------------------
// Parquet files (tests/fixtures/parquet, written by pandas and pyarrow; see
// the README there) load to the same bars as their CSV twins.

fn assert_same_bars(a: &PriceSeries, b: &PriceSeries, rel: f64) {
    assert_eq!(a.bars.dates, b.bars.dates);
    for (name, x, y) in [
        ("open", &a.bars.open, &b.bars.open),
        ("high", &a.bars.high, &b.bars.high),
        ("low", &a.bars.low, &b.bars.low),
        ("close", &a.bars.close, &b.bars.close),
    ] {
        for (i, (p, q)) in x.iter().zip(y.iter()).enumerate() {
            assert!((p - q).abs() <= rel * q.abs(), "{name}[{i}]: {p} vs {q}");
        }
    }
}

#[test]
fn parquet_written_by_pandas_loads_like_its_csv_twin() {
    let dir = Path::new(FIXTURES).join("parquet");
    let pq = local::load_file(&dir.join("IBM.parquet"), "IBM", None, None, None, false).unwrap();
    let csv = local::load_file(&dir.join("IBM.csv"), "IBM", None, None, None, false).unwrap();
    assert_eq!(pq.bars.len(), 252, "IBM traded 252 days in 2010");
    assert_eq!(pq.bars.first_date(), Some(d("2010-01-04")));
    assert_eq!(pq.bars.last_date(), Some(d("2010-12-31")));
    assert_same_bars(&pq, &csv, 0.0);
    assert_eq!(pq.bars.volume, csv.bars.volume);
    // `Adj Close` is applied as for a CSV file.
    assert_eq!(pq.provenance.adjustments, csv.provenance.adjustments);
    // Through the parsed-bars cache, cold then warm: the same bars, with
    // `Adj Close` applied after the cache as before.
    let cache = tempfile::tempdir().unwrap();
    for pass in ["cold", "warm"] {
        let c = local::load_file(
            &dir.join("IBM.parquet"),
            "IBM",
            None,
            None,
            Some(cache.path()),
            true,
        )
        .unwrap();
        assert_same_bars(&c, &pq, 0.0);
        assert_eq!(c.bars.volume, pq.bars.volume, "{pass}");
        assert_eq!(
            c.provenance.adjustments, pq.provenance.adjustments,
            "{pass}"
        );
    }
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 1);
    assert!(!pq.provenance.adjustments.is_empty());
    // Found by symbol (`<SYMBOL>.parquet`) and cut to a range the same way.
    let only = tempfile::tempdir().unwrap();
    std::fs::copy(dir.join("IBM.parquet"), only.path().join("IBM.parquet")).unwrap();
    let march = local::load(
        "ibm",
        &[only.path().to_path_buf()],
        Some(d("2010-03-01")),
        Some(d("2010-03-31")),
        None,
        false,
    )
    .unwrap();
    assert!(march.provenance.location.ends_with("IBM.parquet"));
    assert_eq!(march.bars.len(), 23);
}

#[test]
fn parquet_with_a_ticker_column_date32_and_zstd_selects_the_symbol() {
    let dir = Path::new(FIXTURES).join("parquet");
    let file = dir.join("two_tickers_zstd.parquet");
    for sym in ["MSFT", "AAPL"] {
        let pq = local::load_file(&file, sym, None, None, None, false).unwrap();
        let csv =
            local::load_file(&dir.join("two_tickers.csv"), sym, None, None, None, false).unwrap();
        assert!(pq.bars.len() > 60, "{sym}: {}", pq.bars.len());
        assert_same_bars(&pq, &csv, 0.0);
        assert_eq!(pq.bars.volume, csv.bars.volume);
    }
    let e = local::load_file(&file, "GOOG", None, None, None, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("AAPL, MSFT"), "{e}");
}

#[test]
fn parquet_in_a_codec_left_out_says_how_to_resave_it() {
    let file = Path::new(FIXTURES).join("parquet/brotli.parquet");
    let e = local::load_file(&file, "BRO", None, None, None, false).unwrap_err();
    assert_eq!(e.code(), "parquet_error");
    let e = e.to_string();
    assert!(
        e.contains("brotli.parquet") && e.contains("compressed with brotli") && e.contains("zstd"),
        "{e}"
    );
}

#[test]
fn parquet_with_millisecond_timestamps_float32_and_gzip_loads() {
    let dir = Path::new(FIXTURES).join("parquet");
    let pq = local::load_file(
        &dir.join("MSFT_gzip.parquet"),
        "MSFT",
        None,
        None,
        None,
        false,
    )
    .unwrap();
    // The rows the Parquet file was written from, as CSV (read by the CSV
    // loader, another path): the same values, the volume to float32.
    let reference = local::load_file(
        &dir.join("MSFT_2012q1.csv"),
        "MSFT",
        None,
        None,
        None,
        false,
    )
    .unwrap();
    assert_eq!(pq.bars.dates.len(), 62);
    assert_eq!(pq.bars.dates, reference.bars.dates);
    let b = (&pq.bars, &reference.bars);
    assert_eq!(
        (&b.0.open, &b.0.high, &b.0.low, &b.0.close),
        (&b.1.open, &b.1.high, &b.1.low, &b.1.close)
    );
    for i in 0..b.0.len() {
        let (p, q) = (b.0.volume[i], b.1.volume[i]);
        assert!(
            (p - q).abs() <= 1e-7 * q,
            "row {i}: float32 volume {p} vs {q}"
        );
    }
    assert!(pq.provenance.adjustments.is_empty(), "no adjusted close");
}

#[test]
fn sources_parse_and_unknown_ones_are_refused_with_the_valid_list() {
    assert_eq!("auto".parse::<SourceChoice>().unwrap(), SourceChoice::Auto);
    assert_eq!(
        "YFinance".parse::<SourceChoice>().unwrap(),
        SourceChoice::Explicit(Source::Yahoo)
    );
    let e = "quandl".parse::<SourceChoice>().unwrap_err().to_string();
    assert!(
        e.contains("unknown data source 'quandl'") && e.contains("auto, embedded, local, yahoo"),
        "{e}"
    );
    let e = "tushare".parse::<SourceChoice>().unwrap_err().to_string();
    assert!(
        e.contains("does not implement") && e.contains("stooq"),
        "{e}"
    );
}

#[test]
fn fallback_order_follows_the_market_chains() {
    let md = MarketData::new(DataConfig {
        local_dirs: vec![PathBuf::from("/nonexistent")],
        online: false,
        ..DataConfig::default()
    });
    let order = |sym: &str, choice: SourceChoice| -> Vec<Source> {
        md.plan(sym, choice).1.into_iter().map(|(s, _)| s).collect()
    };
    use Source::*;
    assert_eq!(
        order("AAPL", SourceChoice::Auto),
        vec![Embedded, Local, Yahoo, Stooq]
    );
    assert_eq!(
        order("MSFT", SourceChoice::Explicit(Stooq)),
        vec![Stooq, Embedded, Local, Yahoo]
    );
    assert_eq!(order("AAPL", SourceChoice::Explicit(Local)), vec![Local]);
    assert_eq!(order("0700.HK", SourceChoice::Auto), vec![Local, Yahoo]);
    assert_eq!(order("BTC-USD", SourceChoice::Auto), vec![Local, Yahoo]);
    assert_eq!(order("600519.SH", SourceChoice::Auto), vec![Local]);
    let (_, plan) = md.plan("AAPL", SourceChoice::Auto);
    assert!(plan[0].1.is_ok() && plan[1].1.is_ok());
    assert!(
        plan[2]
            .1
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("switched off")
    );
}

#[tokio::test]
async fn offline_auto_serves_the_embedded_set_and_local_files_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let md = MarketData::new(DataConfig {
        local_dirs: vec![dir.path().to_path_buf()],
        ..DataConfig::offline()
    });
    let s = md
        .fetch(&DataRequest::new("aapl").range(Some(d("2001-01-01")), Some(d("2001-12-31"))))
        .await
        .unwrap();
    assert_eq!(s.provenance.source, Source::Embedded);
    assert_eq!(s.provenance.requested_source, "auto");
    assert_eq!(s.symbol, "aapl");
    assert!(s.provenance.attempts.is_empty());

    // Not in the embedded set: the local file serves it.
    std::fs::write(
        dir.path().join("NVDA.csv"),
        "Date,Open,High,Low,Close,Volume\n2024-01-02,49,49.3,47.6,48.1,411254000\n",
    )
    .unwrap();
    let s = md.fetch(&DataRequest::new("NVDA")).await.unwrap();
    assert_eq!(s.provenance.source, Source::Local);
    assert_eq!(s.provenance.attempts[0].source, Source::Embedded);

    // A range past 2017 with nothing else available: the embedded part, noted.
    let s = md
        .fetch(&DataRequest::new("MSFT").range(Some(d("2012-01-01")), Some(d("2020-12-31"))))
        .await
        .unwrap();
    assert_eq!(s.provenance.source, Source::Embedded);
    let last = embedded::coverage("MSFT").unwrap().unwrap().1;
    assert_eq!(s.bars.last_date(), Some(last));
    assert!(
        s.provenance.notes.iter().any(|n| n.contains(&format!(
            "partial coverage: the embedded set holds MSFT from 2012-01-03 to {last}"
        ))),
        "{:?}",
        s.provenance.notes
    );
    // And one that starts before an ETF's first bar.
    let s = md
        .fetch(&DataRequest::new("SPY").range(Some(d("2004-01-01")), Some(d("2005-12-31"))))
        .await
        .unwrap();
    assert_eq!(s.bars.first_date(), Some(d("2005-02-25")));
    assert!(
        s.provenance
            .notes
            .iter()
            .any(|n| n.contains("from 2005-02-25"))
    );

    // Nothing anywhere: one error naming every source tried.
    let e = md
        .fetch(&DataRequest::new("ZZZZ"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no source could serve ZZZZ")
            && e.contains("embedded")
            && e.contains("yahoo: unavailable"),
        "{e}"
    );

    // A malformed local file stops the chain instead of being skipped.
    std::fs::write(
        dir.path().join("BROKEN.csv"),
        "Date,Open,High,Low,Close\n2024-01-02,x,1,1,1\n",
    )
    .unwrap();
    let e = md.fetch(&DataRequest::new("BROKEN")).await.unwrap_err();
    assert_eq!(e.code(), "bad_csv", "{e}");

    // Explicit local fails loudly with its own error.
    let e = md
        .fetch(&DataRequest::new("AAPL").source(SourceChoice::Explicit(Source::Local)))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            DataError::NotFound {
                loader: Source::Local,
                ..
            }
        ),
        "{e}"
    );

    // Bad ranges and intervals are refused up front.
    let e = md
        .fetch(&DataRequest::new("AAPL").range(Some(d("2005-01-01")), Some(d("2004-01-01"))))
        .await
        .unwrap_err();
    assert_eq!(e.code(), "invalid_range");

    // Several symbols: all or an error naming the missing ones.
    let u = md
        .fetch_all(
            &["AAPL".into(), "NVDA".into()],
            Some(d("2000-01-01")),
            None,
            SourceChoice::Auto,
        )
        .await;
    let u = u.unwrap();
    assert_eq!(u.effective_sources, vec![Source::Embedded, Source::Local]);
    let e = md
        .fetch_all(
            &["AAPL".into(), "ZZZZ".into()],
            None,
            Some(d("2010-01-01")),
            SourceChoice::Auto,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("1 of 2 symbols") && e.contains("ZZZZ"), "{e}");

    // Explicit local, several files: loaded as one batch over the cores,
    // in the order asked, each series as a single fetch gives it.
    let mut codes: Vec<String> = Vec::new();
    for i in 0..7 {
        let code = format!("L{i}");
        std::fs::write(
            dir.path().join(format!("{code}.csv")),
            format!("date,open,high,low,close,volume\n2024-01-02,{i}.5,{i}.9,{i}.1,{i}.7,100\n2024-01-03,{i}.6,{i}.9,{i}.2,{i}.8,200\n"),
        )
        .unwrap();
        codes.push(code);
    }
    codes.push(" nvda ".into());
    let local = SourceChoice::Explicit(Source::Local);
    let u = md.fetch_all(&codes, None, None, local).await.unwrap();
    let symbols: Vec<&str> = u.series.iter().map(|s| s.symbol.as_str()).collect();
    assert_eq!(symbols, ["L0", "L1", "L2", "L3", "L4", "L5", "L6", "nvda"]);
    for (s, code) in u.series.iter().zip(&codes) {
        let one = md
            .fetch(&DataRequest::new(code.clone()).source(local))
            .await
            .unwrap();
        assert_eq!(s.bars, one.bars, "{code}");
        assert_eq!(s.source_rows, one.source_rows, "{code}");
        let mut p = s.provenance.clone();
        p.fetched_at = one.provenance.fetched_at;
        assert_eq!(p, one.provenance, "{code}");
    }
    // What the batch cannot serve gets the single load's own error: no
    // file, no rows in the range, a broken file.
    std::fs::write(
        dir.path().join("OLD.csv"),
        "date,open,high,low,close,volume\n2020-01-02,1,2,0.5,1.5,100\n",
    )
    .unwrap();
    for (code, want) in [
        ("ZZZZ", "not_found"),
        ("OLD", "no_data"),
        ("BROKEN", "bad_csv"),
    ] {
        let from = Some(d("2024-01-01"));
        let single = md
            .fetch(&DataRequest::new(code).range(from, None).source(local))
            .await
            .unwrap_err();
        assert_eq!(single.code(), want, "{single}");
        let e = md
            .fetch_all(&[codes[0].clone(), code.into()], from, None, local)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("1 of 2 symbols") && e.contains(&single.to_string()),
            "{e} / {single}"
        );
    }
}

// ---------------------------------------------------------------------------
// Online loaders over loopback

#[tokio::test]
async fn yahoo_answers_parse_adjust_and_a_past_range_is_cached() {
    let server = Server::start(yahoo_routes()).await;
    let cache = tempfile::tempdir().unwrap();
    let md = MarketData::new(online_config(&server, cache.path()));
    let req = DataRequest::new("AAPL")
        .range(Some(d("2024-01-02")), Some(d("2024-02-29")))
        .source(SourceChoice::Explicit(Source::Yahoo));
    let s = md.fetch(&req).await.unwrap();
    assert_eq!(s.bars.len(), 41);
    assert_eq!(s.bars.first_date(), Some(d("2024-01-02")));
    assert_eq!(s.bars.last_date(), Some(d("2024-02-29")));
    // Dividend-adjusted before the 2024-02-09 ex-date, untouched after.
    let jan2 = s.bars.close[0];
    assert!(jan2 < 185.64 && jan2 > 185.3, "{jan2}");
    assert_eq!(*s.bars.close.last().unwrap(), 180.75);
    let p = &s.provenance;
    assert_eq!((p.source, p.from_cache, p.rows), (Source::Yahoo, false, 41));
    assert!(
        p.location
            .contains("/v8/finance/chart/AAPL?period1=1704153600&period2=1709251200&interval=1d"),
        "{}",
        p.location
    );
    assert!(p.adjustments[0].contains("adj_close/close"));
    assert!(Utc::now().signed_duration_since(p.fetched_at).num_seconds() < 60);
    assert_eq!(server.hits().len(), 1);

    let cached = cache
        .path()
        .join("market/yahoo/AAPL_2024-01-02_2024-02-29.csv");
    assert!(cached.is_file() && cached.with_extension("json").is_file());

    // Second call: from the cache, bit-identical, no request.
    let again = md.fetch(&req).await.unwrap();
    assert_eq!(server.hits().len(), 1, "served from cache");
    assert!(again.provenance.from_cache);
    assert_eq!(again.bars, s.bars);
    assert_eq!(again.provenance.fetched_at, s.provenance.fetched_at);

    // An unknown symbol is Yahoo's 404 with its message.
    let e = md
        .fetch(
            &DataRequest::new("0700.HK")
                .range(Some(d("2024-01-02")), Some(d("2024-02-29")))
                .source(SourceChoice::Explicit(Source::Yahoo)),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("may be delisted"), "{e}");
    assert!(
        server
            .hits()
            .iter()
            .any(|h| h.starts_with("/v8/finance/chart/0700.HK?"))
    );
}

#[tokio::test]
async fn a_range_ending_today_is_never_cached() {
    let server = Server::start(yahoo_routes()).await;
    let cache = tempfile::tempdir().unwrap();
    let md = MarketData::new(online_config(&server, cache.path()));
    let today = Utc::now().date_naive();
    for end in [Some(today), None] {
        let req = DataRequest::new("AAPL")
            .range(Some(d("2024-01-02")), end)
            .source(SourceChoice::Explicit(Source::Yahoo));
        let before = server.hits().len();
        md.fetch(&req).await.unwrap();
        md.fetch(&req).await.unwrap();
        assert_eq!(
            server.hits().len(),
            before + 2,
            "end {end:?}: fetched both times"
        );
    }
    assert!(!cache.path().join("market").join("yahoo").exists());
    // With "today" fixed later, the same end date is a past range and caches.
    let md = md.with_today(today + chrono::Duration::days(1));
    let req = DataRequest::new("AAPL")
        .range(Some(d("2024-01-02")), Some(today))
        .source(SourceChoice::Explicit(Source::Yahoo));
    md.fetch(&req).await.unwrap();
    let n = server.hits().len();
    assert!(md.fetch(&req).await.unwrap().provenance.from_cache);
    assert_eq!(server.hits().len(), n);
}

#[tokio::test]
async fn stooq_answers_parse_and_cache() {
    let server = Server::start(yahoo_routes()).await;
    let cache = tempfile::tempdir().unwrap();
    let md = MarketData::new(online_config(&server, cache.path()));
    let req = DataRequest::new("MSFT")
        .range(Some(d("2024-01-02")), Some(d("2024-02-09")))
        .source(SourceChoice::Explicit(Source::Stooq));
    let s = md.fetch(&req).await.unwrap();
    assert_eq!(s.bars.len(), 28);
    assert_eq!(s.bars.close[0], 368.348);
    assert_eq!(s.bars.volume[0], 39_842_064.0);
    assert!(s.provenance.adjustments[0].contains("already"));
    assert_eq!(
        server.hits(),
        vec!["/q/d/l/?s=msft.us&i=d&d1=20240102&d2=20240209".to_string()]
    );
    let again = md.fetch(&req).await.unwrap();
    assert!(again.provenance.from_cache);
    assert_eq!(server.hits().len(), 1);
    assert!(
        cache
            .path()
            .join("market/stooq/MSFT_2024-01-02_2024-02-09.csv")
            .is_file()
    );
}

#[tokio::test]
async fn stooq_no_data_and_broken_answers_are_clear_errors() {
    let server = Server::start(vec![Route {
        prefix: "/q/d/l/",
        status: 200,
        content_type: "text/plain",
        body: b"No data".to_vec(),
    }])
    .await;
    let md = MarketData::new(DataConfig {
        cache_dir: None,
        ..online_config(&server, Path::new("/unused"))
    });
    let e = md
        .fetch(&DataRequest::new("ZZZZ").source(SourceChoice::Explicit(Source::Stooq)))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("stooq: stooq has no data for ZZZZ: Stooq answered 'No data'"),
        "{e}"
    );
    // The explicit source was tried first, then the rest of the US chain.
    assert!(
        e.find("stooq:").unwrap() < e.find("embedded:").unwrap(),
        "{e}"
    );
    assert!(e.contains("yahoo: yahoo has no data"), "{e}");
}

#[tokio::test]
async fn auto_falls_back_down_the_chain_and_records_each_attempt() {
    let server = Server::start(yahoo_routes()).await;
    let cache = tempfile::tempdir().unwrap();
    let md = MarketData::new(online_config(&server, cache.path()));
    // MSFT in 2024: the embedded set stops in 2013, no local folder, Yahoo
    // does not know it (404 here), Stooq serves it.
    let s = md
        .fetch(&DataRequest::new("MSFT").range(Some(d("2024-01-02")), Some(d("2024-02-09"))))
        .await
        .unwrap();
    assert_eq!(s.provenance.source, Source::Stooq);
    let tried: Vec<Source> = s.provenance.attempts.iter().map(|a| a.source).collect();
    assert_eq!(tried, vec![Source::Embedded, Source::Local, Source::Yahoo]);
    assert!(
        s.provenance.attempts[0].outcome.contains("no rows"),
        "{:?}",
        s.provenance.attempts
    );
    assert!(s.provenance.attempts[1].outcome.contains("unavailable"));
    assert!(s.provenance.attempts[2].outcome.contains("delisted"));
    // Down the chain in `auto` is the normal case: no fallback note.
    assert_eq!(s.provenance.fallback(), None);
    assert!(s.provenance.notes.is_empty(), "{:?}", s.provenance.notes);
    let hits = server.hits();
    assert!(
        hits[0].starts_with("/v8/finance/chart/MSFT?") && hits[1].starts_with("/q/d/l/"),
        "{hits:?}"
    );

    // AAPL in 2024: Yahoo serves, Stooq is never asked.
    let before = server.hits().len();
    let s = md
        .fetch(&DataRequest::new("AAPL.US").range(Some(d("2024-01-02")), Some(d("2024-02-29"))))
        .await
        .unwrap();
    assert_eq!(s.provenance.source, Source::Yahoo);
    assert_eq!(s.symbol, "AAPL.US");
    assert_eq!(server.hits().len(), before + 1);

    // A range the embedded set covers never touches the network.
    let before = server.hits().len();
    let s = md
        .fetch(&DataRequest::new("MSFT").range(Some(d("2003-01-01")), Some(d("2003-12-31"))))
        .await
        .unwrap();
    assert_eq!(s.provenance.source, Source::Embedded);
    assert_eq!(server.hits().len(), before);
}

/// `symbol` over `[from, to]`, asked of `source` by name.
async fn fetch_named(
    md: &MarketData,
    symbol: &str,
    (from, to): (&str, &str),
    source: Source,
) -> PriceSeries {
    md.fetch(
        &DataRequest::new(symbol)
            .range(Some(d(from)), Some(d(to)))
            .source(SourceChoice::Explicit(source)),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn a_named_source_that_fails_is_noted_where_the_rows_are_shown() {
    let server = Server::start(yahoo_routes()).await;
    let cache = tempfile::tempdir().unwrap();
    let md = MarketData::new(online_config(&server, cache.path()));
    // Yahoo named, Yahoo answers 404 for MSFT, Stooq (its market's chain) serves.
    let s = fetch_named(&md, "MSFT", ("2024-01-02", "2024-02-09"), Source::Yahoo).await;
    assert_eq!(s.provenance.source, Source::Stooq);
    assert_eq!(s.provenance.requested_source, "yahoo");
    let note = s.provenance.fallback().unwrap();
    assert!(
        note.starts_with("yahoo did not serve MSFT (") && note.contains("delisted"),
        "{note}"
    );
    assert!(note.ends_with("; the rows come from stooq"), "{note}");
    assert_eq!(s.provenance.notes, vec![note]);
    // The source it named, served: nothing to say.
    let s = fetch_named(&md, "AAPL", ("2024-01-02", "2024-02-29"), Source::Yahoo).await;
    assert_eq!(s.provenance.source, Source::Yahoo);
    assert_eq!(s.provenance.fallback(), None);
    assert!(s.provenance.notes.is_empty(), "{:?}", s.provenance.notes);
}

#[tokio::test]
async fn a_refused_connection_names_the_url_once_and_its_cause() {
    // A port nothing listens on.
    let base = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let md = MarketData::new(DataConfig {
        parsed_cache: None,
        keep_parsed: false,
        cache_dir: None,
        local_dirs: Vec::new(),
        online: true,
        yahoo_base_url: base.clone(),
        stooq_base_url: base.clone(),
        timeout: Duration::from_secs(10),
    });
    let s = fetch_named(&md, "AAPL", ("2010-01-04", "2010-01-08"), Source::Yahoo).await;
    assert_eq!(s.provenance.source, Source::Embedded);
    let outcome = &s.provenance.attempts[0].outcome;
    assert_eq!(outcome.matches(base.as_str()).count(), 1, "{outcome}");
    assert!(outcome.to_lowercase().contains("connect"), "{outcome}");
    // The note keeps the cause in view.
    let note = s.provenance.fallback().unwrap();
    assert!(note.to_lowercase().contains("connect"), "{note}");
}

// ---------------------------------------------------------------------------
// Indicators against the pandas reference

struct Reference {
    dates: Vec<NaiveDate>,
    cols: Vec<(String, Vec<f64>)>,
}

impl Reference {
    fn load() -> Reference {
        let text = String::from_utf8(fixture("indicators/aapl_reference.csv")).unwrap();
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let mut cols: Vec<(String, Vec<f64>)> = header[1..]
            .iter()
            .map(|h| (h.to_string(), Vec::new()))
            .collect();
        let mut dates = Vec::new();
        for line in lines {
            let mut f = line.split(',');
            dates.push(d(f.next().unwrap()));
            for (c, v) in cols.iter_mut().zip(f) {
                c.1.push(v.parse::<f64>().unwrap());
            }
        }
        Reference { dates, cols }
    }

    fn col(&self, name: &str) -> &[f64] {
        &self.cols.iter().find(|c| c.0 == name).unwrap().1
    }
}

/// Equal within 1e-9 relative (an absolute floor of 1e-12 for values that
/// cross zero, e.g. MACD and returns), NaN exactly where pandas has NaN.
fn assert_matches(name: &str, ours: &[f64], reference: &[f64]) {
    assert_eq!(ours.len(), reference.len(), "{name}: length");
    for (i, (a, b)) in ours.iter().zip(reference).enumerate() {
        assert_eq!(a.is_nan(), b.is_nan(), "{name}[{i}]: ours {a}, pandas {b}");
        if a.is_nan() {
            continue;
        }
        let tol = 1e-9 * a.abs().max(b.abs());
        assert!(
            (a - b).abs() <= tol.max(1e-12),
            "{name}[{i}]: ours {a}, pandas {b}"
        );
    }
}

fn aapl() -> (PriceSeries, Reference) {
    let s = embedded::load("AAPL", None, None).unwrap();
    let r = Reference::load();
    assert_eq!(s.bars.dates, r.dates, "same calendar as the reference");
    (s, r)
}

#[test]
fn adjusted_prices_match_the_pandas_adjustment() {
    let (s, r) = aapl();
    assert_matches("open", &s.bars.open, r.col("open"));
    assert_matches("high", &s.bars.high, r.col("high"));
    assert_matches("low", &s.bars.low, r.col("low"));
    assert_matches("close", &s.bars.close, r.col("close"));
    assert_matches("volume", &s.bars.volume, r.col("volume"));
}

#[test]
fn sma_matches_pandas() {
    let (s, r) = aapl();
    assert_matches(
        "sma_20",
        &indicators::sma(&s.bars.close, 20).unwrap(),
        r.col("sma_20"),
    );
    assert_matches(
        "sma_50",
        &indicators::sma(&s.bars.close, 50).unwrap(),
        r.col("sma_50"),
    );
}

#[test]
fn ema_matches_pandas() {
    let (s, r) = aapl();
    assert_matches(
        "ema_12",
        &indicators::ema(&s.bars.close, 12).unwrap(),
        r.col("ema_12"),
    );
    assert_matches(
        "ema_26",
        &indicators::ema(&s.bars.close, 26).unwrap(),
        r.col("ema_26"),
    );
}

#[test]
fn rsi_matches_pandas() {
    let (s, r) = aapl();
    assert_matches(
        "rsi_14",
        &indicators::rsi(&s.bars.close, 14).unwrap(),
        r.col("rsi_14"),
    );
}

#[test]
fn macd_matches_pandas() {
    let (s, r) = aapl();
    let m = indicators::macd(&s.bars.close, 12, 26, 9).unwrap();
    assert_matches("macd_line", &m.line, r.col("macd_line"));
    assert_matches("macd_signal", &m.signal, r.col("macd_signal"));
    assert_matches("macd_hist", &m.histogram, r.col("macd_hist"));
}

#[test]
fn bollinger_matches_pandas() {
    let (s, r) = aapl();
    let b = indicators::bollinger(&s.bars.close, 20, 2.0).unwrap();
    assert_matches("bb_mid", &b.middle, r.col("bb_mid"));
    assert_matches("bb_upper", &b.upper, r.col("bb_upper"));
    assert_matches("bb_lower", &b.lower, r.col("bb_lower"));
}

#[test]
fn atr_matches_pandas() {
    let (s, r) = aapl();
    let b = &s.bars;
    assert_matches(
        "atr_14",
        &indicators::atr(&b.high, &b.low, &b.close, 14).unwrap(),
        r.col("atr_14"),
    );
}

#[test]
fn returns_and_volatility_match_pandas() {
    let (s, r) = aapl();
    let c = &s.bars.close;
    assert_matches("ret", &indicators::simple_returns(c), r.col("ret"));
    assert_matches("log_ret", &indicators::log_returns(c), r.col("log_ret"));
    assert_matches(
        "vol_20",
        &indicators::rolling_volatility(c, 20, 252.0).unwrap(),
        r.col("vol_20"),
    );
}

#[test]
fn drawdown_matches_pandas() {
    let (s, r) = aapl();
    assert_matches(
        "drawdown",
        &indicators::drawdown(&s.bars.close),
        r.col("drawdown"),
    );
}

#[test]
fn rolling_correlation_matches_pandas() {
    let (s, r) = aapl();
    let msft = embedded::load("MSFT", None, None).unwrap();
    let a = indicators::simple_returns(&s.bars.close);
    let b = indicators::simple_returns(&s.bars.aligned_close(&msft.bars));
    assert_matches(
        "corr_msft_20",
        &indicators::rolling_correlation(&a, &b, 20).unwrap(),
        r.col("corr_msft_20"),
    );
}
