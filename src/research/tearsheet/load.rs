//! A backtest run directory as a tear sheet's input: `equity.csv`'s
//! returns and the benchmark's (`ret − active_ret`), `positions.csv`'s
//! executed weights, and from `run_card.json` the title, the benchmark's
//! name and which risk-free rate the backtest used (docs §7.5), rebuilt
//! from the embedded Treasury curve. The first bar is left out: it is the
//! starting capital, with no return (docs §20.1).

use std::path::Path;

use chrono::NaiveDate;
use serde_json::Value;

use super::{Benchmark, PositionsInput, RiskFreeInput, TearSheetError, TearSheetInput};
use crate::research::data::rates::{self, RiskFree};

fn read(path: &Path) -> Result<String, TearSheetError> {
    std::fs::read_to_string(path).map_err(|e| TearSheetError::Io {
        path: path.display().to_string(),
        source: e,
    })
}

fn bad(path: &Path, why: impl Into<String>) -> TearSheetError {
    TearSheetError::Format {
        path: path.display().to_string(),
        why: why.into(),
    }
}

fn num(path: &Path, cell: Option<&str>, what: &str) -> Result<f64, TearSheetError> {
    let c = cell.unwrap_or("").trim();
    if c.is_empty() || c.eq_ignore_ascii_case("nan") {
        return Ok(f64::NAN);
    }
    c.parse::<f64>()
        .map_err(|_| bad(path, format!("{what} `{c}` is not a number")))
}

fn date(path: &Path, cell: Option<&str>) -> Result<NaiveDate, TearSheetError> {
    let c = cell.unwrap_or("").trim();
    // A timestamp may carry a time after the date.
    let d = c.get(..10).unwrap_or(c);
    NaiveDate::parse_from_str(d, "%Y-%m-%d").map_err(|_| bad(path, format!("`{c}` is not a date")))
}

/// A CSV's header and rows.
fn table(path: &Path) -> Result<(Vec<String>, Vec<csv::StringRecord>), TearSheetError> {
    let text = read(path)?;
    let mut rdr = csv::Reader::from_reader(text.as_bytes());
    let header = rdr
        .headers()
        .map_err(|e| bad(path, e.to_string()))?
        .iter()
        .map(str::to_string)
        .collect();
    let rows = rdr
        .records()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(path, e.to_string()))?;
    Ok((header, rows))
}

fn column(path: &Path, header: &[String], name: &str) -> Result<usize, TearSheetError> {
    header
        .iter()
        .position(|h| h == name)
        .ok_or_else(|| bad(path, format!("no `{name}` column")))
}

/// The equity file's dates, returns and benchmark returns, first bar kept.
type EquityColumns = (Vec<NaiveDate>, Vec<f64>, Vec<f64>);

fn equity(path: &Path) -> Result<EquityColumns, TearSheetError> {
    let (header, rows) = table(path)?;
    let (t, r, a) = (
        column(path, &header, "timestamp")?,
        column(path, &header, "ret")?,
        column(path, &header, "active_ret")?,
    );
    let mut out = (Vec::new(), Vec::new(), Vec::new());
    for row in &rows {
        let ret = num(path, row.get(r), "ret")?;
        out.0.push(date(path, row.get(t))?);
        out.1.push(ret);
        out.2.push(ret - num(path, row.get(a), "active_ret")?);
    }
    Ok(out)
}

fn positions(path: &Path, dates: &[NaiveDate]) -> Result<Option<PositionsInput>, TearSheetError> {
    if !path.exists() {
        return Ok(None);
    }
    let (header, rows) = table(path)?;
    let codes: Vec<String> = header.iter().skip(1).cloned().collect();
    let mut weights = Vec::with_capacity(rows.len());
    for row in &rows {
        let w = (1..=codes.len())
            .map(|j| num(path, row.get(j), "weight"))
            .collect::<Result<Vec<_>, _>>()?;
        weights.push(w);
    }
    if weights.len() != dates.len() {
        return Err(bad(
            path,
            format!(
                "{} rows for {} bars of equity.csv",
                weights.len(),
                dates.len()
            ),
        ));
    }
    Ok(Some(PositionsInput { codes, weights }))
}

/// The run card's title, benchmark name, risk-free rate and bars a year.
type Card = (String, String, RiskFree, f64);

fn card(dir: &Path, dates: &[NaiveDate]) -> Result<Card, TearSheetError> {
    let path = dir.join("run_card.json");
    let v: Value = if path.exists() {
        serde_json::from_str(&read(&path)?).map_err(|e| bad(&path, e.to_string()))?
    } else {
        Value::Null
    };
    let bt = &v["backtest"];
    let codes: Vec<&str> = bt["codes"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let strategy = bt["strategy"].as_str().unwrap_or("backtest");
    let title = if codes.is_empty() {
        strategy.to_string()
    } else {
        format!("{strategy} on {}", codes.join(", "))
    };
    let bench = bt["benchmark"].as_str().unwrap_or("benchmark").to_string();
    let ppy = bt["bars_per_year"].as_f64().unwrap_or(252.0);
    let rf = match bt["risk_free"].as_str() {
        Some("treasury_3m") => rates::per_bar(dates, ppy),
        Some("given") => RiskFree::given(
            dates.len(),
            bt["risk_free_rate"].as_f64().unwrap_or(0.0),
            ppy,
        ),
        _ => RiskFree::zero(
            dates.len(),
            bt["risk_free_note"]
                .as_str()
                .unwrap_or("the run card names no risk-free rate: zero"),
        ),
    };
    Ok((title, bench, rf, ppy))
}

/// The tear sheet's input for the backtest run in `dir`.
pub fn from_run_dir(dir: &Path) -> Result<TearSheetInput, TearSheetError> {
    // The engine writes its tables under `artifacts/` (docs §7.6), the run
    // card beside them.
    let art = dir.join("artifacts");
    let tables = if art.join("equity.csv").is_file() {
        art.as_path()
    } else {
        dir
    };
    let (dates, r, b) = equity(&tables.join("equity.csv"))?;
    let pos = positions(&tables.join("positions.csv"), &dates)?;
    let (title, bench, rf, ppy) = card(dir, &dates)?;
    let source = match rf.label {
        "treasury_3m" => "3-month T-bill, US Treasury (docs §15.1.1)".to_string(),
        other => format!("{other}: {}", rf.note.as_deref().unwrap_or("")),
    };
    let skip = |x: Vec<f64>| x.into_iter().skip(1).collect::<Vec<_>>();
    let mut input = TearSheetInput {
        title,
        dates: dates.into_iter().skip(1).collect(),
        returns: skip(r),
        benchmark: Some(Benchmark {
            name: bench,
            returns: skip(b),
        }),
        risk_free: (rf.label != "zero").then(|| RiskFreeInput {
            source,
            daily: skip(rf.per_bar),
        }),
        positions: pos.map(|p| PositionsInput {
            codes: p.codes,
            weights: p.weights.into_iter().skip(1).collect(),
        }),
        ..TearSheetInput::default()
    };
    input.options.periods_per_year = ppy;
    Ok(input)
}
