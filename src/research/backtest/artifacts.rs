//! The §7.6 outputs under `<run_dir>/artifacts/`.
//!
//! | file | content |
//! |---|---|
//! | `ohlcv_<code>.csv` | timestamp, open, high, low, close, volume (the bars used) |
//! | `equity.csv` | timestamp, ret, equity, drawdown, benchmark_equity, active_ret |
//! | `positions.csv` | timestamp, one column per code: executed weights at the close |
//! | `target_positions.csv` | the same for the requested (aligned, scaled) weights |
//! | `trades.csv` | timestamp, code, side, price, qty, reason, pnl, holding_days, holding_bars, return_pct: two rows per round trip (entry with reason `signal` and zero P&L; exit with its reason and the trip's numbers) |
//! | `fills.jsonl` | symbol, timestamp, bar_idx, action, signed_quantity, notional, execution_price, fee, margin, reason, holding_bars |
//! | `metrics.csv` | one row of every scalar metric (text cells allowed, §12.12) |
//! | `metrics.json` | every metric, nested ones included (an addition) |
//! | `rebalance_notes.json/.md`, `risk_xray.json/.md` | engine notes, exposure |
//! | `validation.json` | when configured; NaN → null |
//! | `equity_chart.svg/.png` | the chart (issue 9) |
//!
//! Files are written whole to a temp name and renamed (readers never see a
//! torn file) but not fsynced: artifacts are reproducible from the run dir,
//! and a hundred fsyncs would cost more than the backtest itself. Numbers
//! use the shortest representation that round-trips (the `zmij` formatter
//! behind `serde_json`); NaN is an empty cell. An OHLCV file whose source
//! lines were read exactly as written copies those lines instead
//! ([`SourceRows`]): the same values, spelled as the source spells them.
//! The other files are shared out over the cores, largest first, while two
//! more threads write the OHLCV files.
//!
//! [`SourceRows`]: crate::research::data::SourceRows

use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{Datelike, NaiveDate};
use serde_json::{Value, json};

use super::engine::Fill;
use super::metrics;
use super::{BacktestError, Outcome, chart};
use crate::research::data::{Bars, PriceSeries};

/// Writes `bytes` to `path` via a temp file and a rename (no fsync).
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), BacktestError> {
    write_with(path, |f| f.write_all(bytes))
}

/// Lets `fill` write `path`'s content through a 128 KB buffer into a temp
/// file, then renames it into place (no fsync); a failed write leaves no
/// temp file behind.
fn write_with<F>(path: &Path, fill: F) -> Result<(), BacktestError>
where
    F: FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
{
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::File::create(&tmp).and_then(|f| {
        let mut w = std::io::BufWriter::with_capacity(128 << 10, f);
        fill(&mut w)?;
        w.flush()
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(BacktestError::io("write", &tmp)(e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        BacktestError::io("rename into place", path)(e)
    })
}

/// A code as a file-name part: letters, digits, `.`, `-`, `_`.
pub(crate) fn file_safe(code: &str) -> String {
    let s: String = code
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("_{s}")
    } else {
        s
    }
}

#[inline]
pub fn push_f64(buf: &mut Vec<u8>, x: f64) {
    if x.is_finite() {
        // Writing to a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *buf, &x);
    }
}

#[inline]
pub fn push_date(buf: &mut Vec<u8>, d: NaiveDate) {
    let (y, m, day) = (d.year(), d.month(), d.day());
    if (0..=9999).contains(&y) {
        let y = y as u32;
        buf.extend_from_slice(&[
            b'0' + (y / 1000) as u8,
            b'0' + (y / 100 % 10) as u8,
            b'0' + (y / 10 % 10) as u8,
            b'0' + (y % 10) as u8,
            b'-',
            b'0' + (m / 10) as u8,
            b'0' + (m % 10) as u8,
            b'-',
            b'0' + (day / 10) as u8,
            b'0' + (day % 10) as u8,
        ]);
    } else {
        let _ = write!(buf, "{d}");
    }
}

/// A CSV cell with quoting when needed.
fn push_cell(buf: &mut Vec<u8>, s: &str) {
    if s.contains([',', '"', '\n', '\r']) {
        buf.push(b'"');
        buf.extend_from_slice(s.replace('"', "\"\"").as_bytes());
        buf.push(b'"');
    } else {
        buf.extend_from_slice(s.as_bytes());
    }
}

/// The previous set's OHLCV fingerprints, kept inside the set (and so
/// replaced with it) but outside the artifact list.
pub const OHLCV_FINGERPRINTS: &str = ".ohlcv-fingerprints";
/// Bumped whenever the OHLCV file layout changes.
const OHLCV_FORMAT: u64 = 1;

/// Writes `ohlcv_<code>.csv` per series. A file the previous set (`previous`,
/// moved aside by the run) holds with the same fingerprint and size is hard
/// linked instead of formatted again: a rerun on the same data (a parameter
/// sweep) then writes none of the ~26 MB of text. Any doubt (no entry, a
/// changed size, a link the file system refuses) formats the file.
///
/// Two threads take the files one at a time from a shared counter: this
/// runs beside the simulation and the other tables, and whichever thread is
/// free when they finish keeps formatting (one thread left a first run
/// waiting ~5 ms on the last files of 100 x 2,520).
pub fn write_ohlcv(
    art_dir: &Path,
    series: &[PriceSeries],
    previous: Option<&Path>,
) -> Result<Vec<PathBuf>, BacktestError> {
    let earlier = previous.map(read_fingerprints).unwrap_or_default();
    let next = std::sync::atomic::AtomicUsize::new(0);
    // Each worker's files as (index, manifest line); the first error stops
    // both (the run fails as a whole).
    let failed = std::sync::atomic::AtomicBool::new(false);
    let work = || -> Result<Vec<(usize, String)>, BacktestError> {
        use std::sync::atomic::Ordering::Relaxed;
        let mut done = Vec::new();
        let mut buf = Vec::new();
        while !failed.load(Relaxed) {
            let i = next.fetch_add(1, Relaxed);
            let Some(s) = series.get(i) else { break };
            match write_one_ohlcv(art_dir, s, previous, &earlier, &mut buf) {
                Ok(line) => done.push((i, line)),
                Err(e) => {
                    failed.store(true, Relaxed);
                    return Err(e);
                }
            }
        }
        Ok(done)
    };
    let mut lines = std::thread::scope(|scope| {
        // A second thread only where there are cores and files for it; one
        // the process limit refuses leaves the work to this thread.
        let helper = (series.len() > 1
            && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
        .then(|| std::thread::Builder::new().spawn_scoped(scope, work).ok())
        .flatten();
        let mine = work();
        let theirs = match helper {
            // A helper's panic is this call's error, not a second panic.
            Some(h) => h
                .join()
                .unwrap_or(Err(BacktestError::Chart(chart::ChartError::Panicked(
                    "a price file writer",
                )))),
            None => Ok(Vec::new()),
        };
        let mut all = mine?;
        all.extend(theirs?);
        Ok::<_, BacktestError>(all)
    })?;
    lines.sort_unstable_by_key(|(i, _)| *i);
    let mut manifest = String::new();
    let mut paths = Vec::with_capacity(series.len());
    for (i, line) in &lines {
        manifest.push_str(line);
        if let Some(s) = series.get(*i) {
            paths.push(art_dir.join(ohlcv_name(&s.symbol)));
        }
    }
    write_file(&art_dir.join(OHLCV_FINGERPRINTS), manifest.as_bytes())?;
    Ok(paths)
}

fn ohlcv_name(symbol: &str) -> String {
    format!("ohlcv_{}.csv", file_safe(symbol))
}

/// One series' OHLCV file (linked from `previous`, else copied from the
/// source lines or formatted in `buf`); returns its fingerprint manifest
/// line.
fn write_one_ohlcv(
    art_dir: &Path,
    s: &PriceSeries,
    previous: Option<&Path>,
    earlier: &std::collections::HashMap<String, (u128, u64)>,
    buf: &mut Vec<u8>,
) -> Result<String, BacktestError> {
    let b = &s.bars;
    let name = ohlcv_name(&s.symbol);
    let p = art_dir.join(&name);
    let fingerprint = bars_fingerprint(b);
    let reused = match (previous, earlier.get(&name)) {
        (Some(prev), Some(&(f, size))) if f == fingerprint => {
            link_if_same(&prev.join(&name), &p, size).then_some(size)
        }
        _ => None,
    };
    const HEADER: &[u8] = b"timestamp,open,high,low,close,volume\n";
    // The source's own lines, which parse to these bars exactly, copied
    // in the kernel; any failure (the file changed since) formats instead.
    let copied = || {
        let rows = s.source_rows.as_deref().filter(|r| r.serves(b))?;
        write_with(&p, |w| {
            let f = w.get_mut();
            f.write_all(HEADER)?;
            match rows.copy_to(f)? {
                true => Ok(()),
                false => Err(std::io::ErrorKind::InvalidData.into()),
            }
        })
        .ok()
        .map(|()| HEADER.len() as u64 + rows.len())
    };
    let size = match reused.or_else(copied) {
        Some(size) => size,
        None => {
            // A row of five shortest-form doubles runs to ~100 bytes; the
            // buffer is reused from file to file.
            buf.clear();
            buf.reserve(b.len() * 112 + HEADER.len());
            buf.extend_from_slice(HEADER);
            push_ohlcv_rows(buf, b);
            write_file(&p, buf)?;
            buf.len() as u64
        }
    };
    Ok(format!("{name}\t{fingerprint:032x}\t{size}\n"))
}

/// `name → (fingerprint, size)` from a set's fingerprint file; unreadable
/// lines are skipped (their files are simply formatted again).
fn read_fingerprints(set: &Path) -> std::collections::HashMap<String, (u128, u64)> {
    let text = std::fs::read_to_string(set.join(OHLCV_FINGERPRINTS)).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            let name = f.next()?.to_string();
            let fingerprint = u128::from_str_radix(f.next()?, 16).ok()?;
            let size = f.next()?.parse().ok()?;
            Some((name, (fingerprint, size)))
        })
        .collect()
}

/// Hard links `from` to `to` when `from` is a regular file of `size` bytes.
fn link_if_same(from: &Path, to: &Path, size: u64) -> bool {
    std::fs::symlink_metadata(from).is_ok_and(|m| m.is_file() && m.len() == size)
        && std::fs::hard_link(from, to).is_ok()
}

/// One `date,open,high,low,close,volume` row per bar (the OHLCV artifact's
/// body; `vibedesk data` prints the same rows).
pub fn push_ohlcv_rows(buf: &mut Vec<u8>, b: &Bars) {
    for i in 0..b.len() {
        push_date(buf, b.dates[i]);
        for col in [&b.open, &b.high, &b.low, &b.close, &b.volume] {
            buf.push(b',');
            push_f64(buf, col[i]);
        }
        buf.push(b'\n');
    }
}

/// 128 bits over everything an OHLCV file is written from: the layout
/// version, the dates and every value's bits. Four multiply-rotate lanes
/// take four words at a time (independent chains: a single one made this
/// the OHLCV writers' largest cost on a 100-symbol run); each column ends
/// with a padded block. A change detector for our own files, not a defence
/// against forgery (whoever can write the run dir can write the artifacts
/// anyway).
fn bars_fingerprint(b: &Bars) -> u128 {
    const K: [u64; 4] = [
        0xFF51_AFD7_ED55_8CCD,
        0xC4CE_B9FE_1A85_EC53,
        0x9E37_79B9_7F4A_7C15,
        0xD6E8_FEB8_6659_FD93,
    ];
    fn mix(h: &mut [u64; 4], w: [u64; 4]) {
        for i in 0..4 {
            h[i] = (h[i] ^ w[i]).wrapping_mul(K[i]).rotate_left(27 + i as u32);
        }
    }
    fn feed<T: Copy>(h: &mut [u64; 4], xs: &[T], word: impl Fn(T) -> u64) {
        let mut blocks = xs.chunks_exact(4);
        for c in &mut blocks {
            mix(h, [word(c[0]), word(c[1]), word(c[2]), word(c[3])]);
        }
        let mut last = [u64::MAX; 4];
        for (slot, x) in last.iter_mut().zip(blocks.remainder()) {
            *slot = word(*x);
        }
        mix(h, last);
    }
    let mut h = [
        0x9E37_79B9_7F4A_7C15u64,
        0xC2B2_AE3D_27D4_EB4F,
        0x1656_67B1_9E37_79F9,
        0x27D4_EB2F_1656_67C5,
    ];
    mix(&mut h, [OHLCV_FORMAT, b.len() as u64, 0, 0]);
    feed(&mut h, &b.dates, |d| d.num_days_from_ce() as u64);
    for col in [&b.open, &b.high, &b.low, &b.close, &b.volume] {
        feed(&mut h, col, f64::to_bits);
    }
    let fin = |mut x: u64| {
        x ^= x >> 33;
        x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        x ^ (x >> 33)
    };
    let lo = fin(h[0].wrapping_add(fin(h[2])));
    let hi = fin(h[1].wrapping_add(fin(h[3])));
    (u128::from(hi) << 64) | u128::from(lo)
}

/// A weights matrix as CSV, row by row into `out`: the two matrices are the
/// largest tables (3 MB each on 100 × 2,520), and building them whole cost
/// a fresh page per 4 KB, more than formatting them.
fn matrix_csv<W: Write>(o: &Outcome, values: &[f64], out: &mut W) -> std::io::Result<()> {
    let p = &o.panel;
    let k = p.k();
    let mut row = Vec::with_capacity(12 + k * 24);
    row.extend_from_slice(b"timestamp");
    for c in &p.codes {
        row.push(b',');
        push_cell(&mut row, c);
    }
    row.push(b'\n');
    out.write_all(&row)?;
    for (t, d) in p.dates.iter().enumerate() {
        row.clear();
        push_date(&mut row, *d);
        // Weight rows are mostly zeros and repeats of one value (equal
        // targets): those are copied, not formatted again.
        let mut last: Option<(u64, std::ops::Range<usize>)> = None;
        for s in 0..k {
            row.push(b',');
            let x = values.get(t * k + s).copied().unwrap_or(f64::NAN);
            let bits = x.to_bits();
            if bits == 0 {
                row.extend_from_slice(b"0.0");
            } else if let Some((_, r)) = last.as_ref().filter(|(b, _)| *b == bits) {
                row.extend_from_within(r.clone());
            } else {
                let start = row.len();
                push_f64(&mut row, x);
                last = Some((bits, start..row.len()));
            }
        }
        row.push(b'\n');
        out.write_all(&row)?;
    }
    Ok(())
}

/// [`matrix_csv`] to `path` as [`write_file`] writes, with only the
/// buffer in memory.
fn write_matrix(path: &Path, o: &Outcome, values: &[f64]) -> Result<(), BacktestError> {
    write_with(path, |w| matrix_csv(o, values, w))
}

fn equity_csv(o: &Outcome) -> Vec<u8> {
    let eq = &o.sim.equity;
    let r = metrics::returns(eq);
    let dd = metrics::drawdown_series(eq, o.config.initial_cash);
    let mut buf = Vec::with_capacity(eq.len() * 112 + 64);
    buf.extend_from_slice(b"timestamp,ret,equity,drawdown,benchmark_equity,active_ret\n");
    let mut bench = o.config.initial_cash;
    for (t, d) in o.panel.dates.iter().enumerate().take(eq.len()) {
        let b = o.bench_returns.get(t).copied().unwrap_or(0.0);
        bench *= 1.0 + b;
        push_date(&mut buf, *d);
        for x in [r[t], eq[t], dd[t], bench, r[t] - b] {
            buf.push(b',');
            push_f64(&mut buf, x);
        }
        buf.push(b'\n');
    }
    buf
}

/// The benchmark's equity (C·Π(1 + b)), for the chart.
pub fn benchmark_equity(o: &Outcome) -> Vec<f64> {
    let mut e = o.config.initial_cash;
    o.bench_returns
        .iter()
        .take(o.sim.equity.len())
        .map(|b| {
            e *= 1.0 + b;
            e
        })
        .collect()
}

fn trades_csv(o: &Outcome) -> Vec<u8> {
    let p = &o.panel;
    let mut buf = Vec::with_capacity(o.sim.trades.len() * 160 + 96);
    buf.extend_from_slice(
        b"timestamp,code,side,price,qty,reason,pnl,holding_days,holding_bars,return_pct\n",
    );
    for t in &o.sim.trades {
        let code = p.codes.get(t.symbol).map_or("", String::as_str);
        let (entry_side, exit_side) = if t.side > 0 {
            ("buy", "sell")
        } else {
            ("sell", "buy")
        };
        let days = match (p.dates.get(t.exit_bar), p.dates.get(t.entry_bar)) {
            (Some(a), Some(b)) => (*a - *b).num_days(),
            _ => 0,
        };
        if let Some(d) = p.dates.get(t.entry_bar) {
            push_date(&mut buf, *d);
        }
        buf.push(b',');
        push_cell(&mut buf, code);
        let _ = write!(buf, ",{entry_side},");
        push_f64(&mut buf, t.entry_price);
        buf.push(b',');
        push_f64(&mut buf, t.qty);
        buf.extend_from_slice(b",signal,0,0,0,0\n");
        if let Some(d) = p.dates.get(t.exit_bar) {
            push_date(&mut buf, *d);
        }
        buf.push(b',');
        push_cell(&mut buf, code);
        let _ = write!(buf, ",{exit_side},");
        push_f64(&mut buf, t.exit_price);
        buf.push(b',');
        push_f64(&mut buf, t.qty);
        let _ = write!(buf, ",{},", t.exit_reason.as_str());
        push_f64(&mut buf, t.pnl);
        let _ = write!(buf, ",{days},{},", t.holding_bars());
        push_f64(&mut buf, t.return_pct);
        buf.push(b'\n');
    }
    buf
}

fn fills_jsonl(o: &Outcome) -> Vec<u8> {
    let p = &o.panel;
    let mut buf = Vec::with_capacity(o.sim.fills.len() * 256);
    for f in &o.sim.fills {
        push_fill(
            &mut buf,
            p.codes.get(f.symbol).map(String::as_str),
            p.dates.get(f.bar).copied(),
            f,
        );
    }
    buf
}

/// One `fills.jsonl` line, byte for byte what serde_json writes for the
/// record as a map (compact, keys in order, NaN and ±inf as null), without
/// building the map: thousands of fills made it the slowest table.
fn push_fill(buf: &mut Vec<u8>, code: Option<&str>, date: Option<NaiveDate>, f: &Fill) {
    let mut itoa = itoa::Buffer::new();
    let number = |buf: &mut Vec<u8>, x: f64| {
        if x.is_finite() {
            push_f64(buf, x);
        } else {
            buf.extend_from_slice(b"null");
        }
    };
    buf.extend_from_slice(b"{\"symbol\":");
    match code {
        // Writing a string to a Vec cannot fail.
        Some(c) => drop(serde_json::to_writer(&mut *buf, c)),
        None => buf.extend_from_slice(b"null"),
    }
    buf.extend_from_slice(b",\"timestamp\":");
    match date {
        Some(d) => {
            buf.push(b'"');
            push_date(buf, d);
            buf.push(b'"');
        }
        None => buf.extend_from_slice(b"null"),
    }
    buf.extend_from_slice(b",\"bar_idx\":");
    buf.extend_from_slice(itoa.format(f.bar).as_bytes());
    buf.extend_from_slice(b",\"action\":\"");
    buf.extend_from_slice(f.action.as_bytes());
    buf.extend_from_slice(b"\",\"signed_quantity\":");
    number(buf, f.signed_quantity);
    buf.extend_from_slice(b",\"notional\":");
    number(buf, f.notional);
    buf.extend_from_slice(b",\"execution_price\":");
    number(buf, f.execution_price);
    buf.extend_from_slice(b",\"fee\":");
    number(buf, f.fee);
    buf.extend_from_slice(b",\"margin\":");
    number(buf, f.margin);
    buf.extend_from_slice(b",\"reason\":\"");
    buf.extend_from_slice(f.reason.as_str().as_bytes());
    buf.extend_from_slice(b"\",\"holding_bars\":");
    buf.extend_from_slice(itoa.format(f.holding_bars).as_bytes());
    buf.extend_from_slice(b"}\n");
}

/// One header row and one value row; text cells for non-numbers.
fn metrics_csv(o: &Outcome) -> Vec<u8> {
    let mut head = Vec::new();
    let mut row = Vec::new();
    for (i, (k, v)) in o.scalars.iter().enumerate() {
        if i > 0 {
            head.push(b',');
            row.push(b',');
        }
        push_cell(&mut head, k);
        match v {
            Value::Number(n) => row.extend_from_slice(n.to_string().as_bytes()),
            Value::String(s) => push_cell(&mut row, s),
            Value::Bool(b) => row.extend_from_slice(if *b { b"True" } else { b"False" }),
            _ => {}
        }
    }
    head.push(b'\n');
    head.extend_from_slice(&row);
    head.push(b'\n');
    head
}

fn pretty(v: &Value) -> Vec<u8> {
    let mut s = serde_json::to_vec_pretty(v).unwrap_or_default();
    s.push(b'\n');
    s
}

fn rebalance_notes(o: &Outcome) -> (Value, String) {
    let s = &o.scalars;
    let dropped = o
        .nested
        .get("dropped_target_adjustments")
        .cloned()
        .unwrap_or(Value::Null);
    let v = json!({
        "position_adjustment": o.config.position_adjustment.as_str(),
        "rebalance_tolerance": o.config.rebalance_tolerance,
        "trade_bars": o.sim.trade_bars,
        "rebalance_turnover_mean": s.get("rebalance_turnover_mean"),
        "rebalance_turnover_max": s.get("rebalance_turnover_max"),
        "dropped_target_adjustment_count": o.sim.dropped_count,
        "dropped_target_adjustments": dropped,
        "cash_scaled_order_count": o.sim.scaled_count,
    });
    let mut md = format!(
        "# Rebalance notes\n\n- mode: `{}` (tolerance {})\n- bars with fills: {}\n- dropped target adjustments: {}\n- bars whose opens were scaled down for cash: {}\n",
        o.config.position_adjustment.as_str(),
        o.config.rebalance_tolerance,
        o.sim.trade_bars,
        o.sim.dropped_count,
        o.sim.scaled_count
    );
    if o.sim.dropped_count > 0 {
        md.push_str("\nFirst dropped adjustments (hold mode acts only on flips and zero targets):\n\n| date | code | why | target | held qty |\n|---|---|---|---|---|\n");
        for d in &o.sim.dropped {
            md.push_str(&format!(
                "| {} | {} | {} | {:.4} | {} |\n",
                o.panel
                    .dates
                    .get(d.bar)
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                o.panel.codes.get(d.symbol).map_or("", String::as_str),
                d.why,
                d.target_weight,
                d.held_quantity
            ));
        }
    }
    (v, md)
}

fn risk_xray(o: &Outcome) -> (Value, String) {
    let keys = [
        "risk_xray_hhi",
        "risk_xray_effective_n",
        "risk_xray_annualized_vol",
        "risk_xray_max_drawdown",
        "risk_xray_avg_invested",
    ];
    let mut m = serde_json::Map::new();
    let mut md = String::from("# Risk x-ray\n\n| measure | value |\n|---|---|\n");
    for k in keys {
        let v = o.scalars.get(k).cloned().unwrap_or(Value::Null);
        md.push_str(&format!(
            "| {} | {} |\n",
            k.trim_start_matches("risk_xray_"),
            v
        ));
        m.insert(k.trim_start_matches("risk_xray_").to_string(), v);
    }
    m.insert(
        "by_symbol".into(),
        o.nested.get("by_symbol").cloned().unwrap_or(Value::Null),
    );
    (Value::Object(m), md)
}

/// One file to write, for [`run_jobs`].
type Job<'a> = Box<dyn FnOnce() -> Result<(), BacktestError> + Send + 'a>;

/// Runs `jobs` on this thread and one helper per other core, each taking
/// the next job when it is free (so list the largest first); returns the
/// first error once all are done. A helper the process limit refuses
/// leaves its share to the others.
fn run_jobs(jobs: Vec<Job<'_>>) -> Result<(), BacktestError> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let queue: Vec<Mutex<Option<Job<'_>>>> =
        jobs.into_iter().map(|j| Mutex::new(Some(j))).collect();
    let next = AtomicUsize::new(0);
    let first_error: Mutex<Option<BacktestError>> = Mutex::new(None);
    let fail = |e: BacktestError| {
        if let Ok(mut slot) = first_error.lock() {
            slot.get_or_insert(e);
        }
    };
    let work = || {
        while let Some(slot) = queue.get(next.fetch_add(1, Relaxed)) {
            let job = slot.lock().ok().and_then(|mut j| j.take());
            if let Some(Err(e)) = job.map(|job| job()) {
                fail(e);
            }
        }
    };
    let helpers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(queue.len())
        .saturating_sub(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..helpers)
            .filter_map(|_| std::thread::Builder::new().spawn_scoped(scope, work).ok())
            .collect();
        work();
        for h in handles {
            if h.join().is_err() {
                fail(BacktestError::Chart(chart::ChartError::Panicked(
                    "an artifact writer",
                )));
            }
        }
    });
    match first_error.into_inner() {
        Ok(Some(e)) => Err(e),
        _ => Ok(()),
    }
}

/// Writes every artifact and the chart into `dir`, the files shared out
/// over the cores ([`run_jobs`]) while `ohlcv_files` writes (or waits
/// for, see [`run_in_dir`]) the `ohlcv_<code>.csv` files; returns (name,
/// path) of each. `ohlcv_files` returns their paths in series order, or
/// `None` when they were written before the signals (the Python path).
///
/// [`run_in_dir`]: super::run_in_dir
pub fn write_all<F>(
    dir: &Path,
    o: &Outcome,
    series: &[PriceSeries],
    ohlcv_files: F,
) -> Result<Vec<(String, PathBuf)>, BacktestError>
where
    F: FnOnce() -> Result<Option<Vec<PathBuf>>, BacktestError> + Send,
{
    std::fs::create_dir_all(dir).map_err(BacktestError::io("create", dir))?;
    let codes = if o.panel.k() > 6 {
        format!("{} symbols", o.panel.k())
    } else {
        o.panel.codes.join(", ")
    };
    let title = format!(
        "{codes} · {} · {} to {}",
        o.config.strategy.short_name(),
        o.config.start_date,
        o.config.end_date
    );
    let bench_eq = benchmark_equity(o);
    let dd = metrics::drawdown_series(&o.sim.equity, o.config.initial_cash);
    let data = chart::ChartData {
        title,
        dates: &o.panel.dates,
        equity: &o.sim.equity,
        benchmark: Some(&bench_eq),
        benchmark_label: &o.benchmark_label,
        drawdown: &dd,
    };
    // Every file under its artifact name, in the order the run card lists
    // them; the OHLCV files go after `risk_xray_md` (or `validation`).
    let mut named: Vec<(&str, &str)> = vec![
        ("equity", "equity.csv"),
        ("metrics", "metrics.csv"),
        ("trades", "trades.csv"),
        ("positions", "positions.csv"),
        ("target_positions", "target_positions.csv"),
        ("fills", "fills.jsonl"),
        ("metrics_json", "metrics.json"),
        ("rebalance_notes", "rebalance_notes.json"),
        ("rebalance_notes_md", "rebalance_notes.md"),
        ("risk_xray", "risk_xray.json"),
        ("risk_xray_md", "risk_xray.md"),
    ];
    if o.validation.is_some() {
        named.push(("validation", "validation.json"));
    }
    let at = |file: &str| dir.join(file);
    let data = &data;
    let table = move |file: &'static str, bytes: fn(&Outcome) -> Vec<u8>| -> Job<'_> {
        Box::new(move || write_file(&at(file), &bytes(o)))
    };
    // The largest first: the PNG and the two weight matrices (3 MB each on
    // 100 x 2,520) take most of the time.
    let jobs: Vec<Job<'_>> = vec![
        Box::new(move || {
            let png = chart::png(data).map_err(BacktestError::Chart)?;
            write_file(&at("equity_chart.png"), &png)
        }),
        Box::new(move || write_matrix(&at("positions.csv"), o, &o.sim.weights)),
        Box::new(move || write_matrix(&at("target_positions.csv"), o, &o.targets)),
        table("fills.jsonl", fills_jsonl),
        Box::new(move || {
            let svg = chart::svg(data).map_err(BacktestError::Chart)?;
            write_file(&at("equity_chart.svg"), svg.as_bytes())
        }),
        table("trades.csv", trades_csv),
        table("equity.csv", equity_csv),
        table("metrics.csv", metrics_csv),
        Box::new(move || {
            let mut all = o.scalars.clone();
            for (k, v) in &o.nested {
                all.insert(k.clone(), v.clone());
            }
            all.insert("warnings".into(), json!(o.warnings));
            write_file(&at("metrics.json"), &pretty(&Value::Object(all)))?;
            let (rj, rm) = rebalance_notes(o);
            write_file(&at("rebalance_notes.json"), &pretty(&rj))?;
            write_file(&at("rebalance_notes.md"), rm.as_bytes())?;
            let (xj, xm) = risk_xray(o);
            write_file(&at("risk_xray.json"), &pretty(&xj))?;
            write_file(&at("risk_xray.md"), xm.as_bytes())?;
            match &o.validation {
                Some(v) => write_file(&at("validation.json"), &pretty(v)),
                None => Ok(()),
            }
        }),
    ];
    let (written, files) = std::thread::scope(|scope| {
        let ohlcv = scope.spawn(ohlcv_files);
        let written = run_jobs(jobs);
        let files = ohlcv
            .join()
            .unwrap_or(Err(BacktestError::Chart(chart::ChartError::Panicked(
                "the OHLCV writer",
            ))));
        (written, files)
    });
    written?;
    let files = files?;
    let mut out: Vec<(String, PathBuf)> = named
        .into_iter()
        .map(|(name, file)| (name.to_string(), dir.join(file)))
        .collect();
    match files {
        Some(paths) => {
            for (s, p) in series.iter().zip(paths) {
                out.push((format!("ohlcv_{}", s.symbol), p));
            }
        }
        None => {
            for s in series {
                out.push((
                    format!("ohlcv_{}", s.symbol),
                    dir.join(format!("ohlcv_{}.csv", file_safe(&s.symbol))),
                ));
            }
        }
    }
    out.push(("chart_svg".into(), dir.join("equity_chart.svg")));
    out.push(("chart_png".into(), dir.join("equity_chart.png")));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The direct fill writer matches serde_json on the same record.
    #[test]
    fn fill_lines_match_serde_json() {
        use super::super::engine::Reason;
        use super::super::metrics::num;
        let d = NaiveDate::from_ymd_opt(2010, 3, 4).unwrap();
        for (code, date, x) in [
            (Some("AAPL"), Some(d), 1.5),
            (Some("BTC/\"USDT\\"), None, f64::NAN),
            (None, Some(d), f64::INFINITY),
            (Some("中文"), Some(d), -0.0),
            (Some("X"), Some(d), 1e-300),
        ] {
            let f = Fill {
                symbol: 0,
                bar: 17,
                action: "close_long",
                signed_quantity: -x,
                notional: x * 3.0,
                execution_price: 101.25,
                fee: x / 7.0,
                margin: 0.0,
                reason: Reason::EndOfBacktest,
                holding_bars: 42,
            };
            let mut ours = Vec::new();
            push_fill(&mut ours, code, date, &f);
            let mut want = serde_json::to_vec(&json!({
                "symbol": code, "timestamp": date.map(|d| d.to_string()),
                "bar_idx": f.bar, "action": f.action, "signed_quantity": num(f.signed_quantity),
                "notional": num(f.notional), "execution_price": num(f.execution_price), "fee": num(f.fee),
                "margin": num(f.margin), "reason": f.reason.as_str(), "holding_bars": f.holding_bars,
            }))
            .unwrap();
            want.push(b'\n');
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                String::from_utf8(want).unwrap()
            );
        }
    }

    /// `matrix_csv` writes a zero as "0.0" without formatting it.
    #[test]
    fn push_f64_writes_zero_as_the_matrix_fast_path_does() {
        let mut b = Vec::new();
        push_f64(&mut b, 0.0);
        assert_eq!(b, b"0.0");
    }

    /// A series' source lines are copied while its file is the one read;
    /// once the file changes, its bars are formatted instead.
    #[test]
    fn ohlcv_files_copy_source_lines_only_from_an_unchanged_file() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("X.csv");
        let body = "2024-01-02,1.10,2,0.5,1.5,100\n2024-01-03,1,2,0.5,1.5,200\n";
        std::fs::write(&src, format!("date,open,high,low,close,volume\n{body}")).unwrap();
        let series =
            crate::research::data::local::load_file(&src, "X", None, None, None, false).unwrap();
        assert!(series.source_rows.is_some());
        let write = |name: &str| {
            let art = dir.path().join(name);
            std::fs::create_dir_all(&art).unwrap();
            write_ohlcv(&art, std::slice::from_ref(&series), None).unwrap();
            std::fs::read_to_string(art.join("ohlcv_X.csv")).unwrap()
        };
        let header = "timestamp,open,high,low,close,volume\n";
        assert_eq!(write("copied"), format!("{header}{body}"));
        std::thread::sleep(std::time::Duration::from_millis(5));
        std::fs::write(
            &src,
            "date,open,high,low,close,volume\n2024-01-02,9,9,9,9,9\n",
        )
        .unwrap();
        let mut formatted = header.as_bytes().to_vec();
        push_ohlcv_rows(&mut formatted, &series.bars);
        assert_eq!(write("formatted"), String::from_utf8(formatted).unwrap());
    }

    #[test]
    fn dates_and_numbers_format_compactly() {
        let mut b = Vec::new();
        push_date(&mut b, NaiveDate::from_ymd_opt(2024, 3, 7).unwrap());
        b.push(b',');
        push_f64(&mut b, 0.1);
        b.push(b',');
        push_f64(&mut b, f64::NAN);
        b.push(b',');
        push_f64(&mut b, 12.0);
        assert_eq!(String::from_utf8(b).unwrap(), "2024-03-07,0.1,,12.0");
        assert_eq!(file_safe("BTC/USDT"), "BTC_USDT");
        assert_eq!(file_safe("../x"), "_.._x");
    }
}
