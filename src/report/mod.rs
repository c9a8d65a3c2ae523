//! Reports that can be handed on (docs §20.3): a tear sheet as one
//! self-contained HTML file ([`html`]) or as Markdown with SVG files beside
//! it ([`markdown`]), and a research session's conversation exported the
//! same two ways ([`export`]). The charts are inline SVG drawn here
//! ([`svg`]); nothing a report holds asks another host for anything, and
//! every text taken from a run or a session is escaped.

pub mod export;
pub mod html;
pub mod markdown;
pub mod svg;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::fsio::IoError;
use crate::research::tearsheet::{Period, TearSheet};

/// Why a report or an export was not written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("{path}: {reason}")]
    BadFile { path: PathBuf, reason: String },
    #[error(transparent)]
    TearSheet(#[from] crate::research::tearsheet::TearSheetError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("session {0} has no messages to export")]
    EmptySession(String),
}

/// The two files a run's report can be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Html(PathBuf),
    Markdown(PathBuf),
}

/// Where a run's report goes unless told: `report.html` in the run dir.
pub const DEFAULT_REPORT: &str = "report.html";

/// The tear sheet of a backtest run dir and its run card's facts.
pub fn of_run(run_dir: &Path) -> Result<(TearSheet, RunFacts), ReportError> {
    let input = crate::research::tearsheet::from_run_dir(run_dir)?;
    let sheet = crate::research::tearsheet::compute(&input)?;
    Ok((sheet, RunFacts::read(run_dir)?))
}

/// Computes and writes a run's report (HTML by default); returns its path.
pub fn write_run_report(run_dir: &Path, target: Option<Target>) -> Result<PathBuf, ReportError> {
    let (sheet, facts) = of_run(run_dir)?;
    match target.unwrap_or_else(|| Target::Html(run_dir.join(DEFAULT_REPORT))) {
        Target::Html(path) => {
            html::write(&path, &sheet, &facts)?;
            Ok(path)
        }
        Target::Markdown(path) => {
            markdown::write(&path, &sheet, &facts)?;
            Ok(path)
        }
    }
}

/// What the run card says about a backtest beyond its returns: the
/// assumptions every number rests on and where the data came from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunFacts {
    /// (name, value) pairs in the run card's order.
    pub assumptions: Vec<(String, String)>,
    /// One line per series: symbol, rows, source, location, dates.
    pub provenance: Vec<String>,
    /// What ran, how to reproduce it: (name, value).
    pub run: Vec<(String, String)>,
    pub warnings: Vec<String>,
}

impl RunFacts {
    /// The facts of `run_dir/run_card.json`; a run without a card has none
    /// (a tear sheet of returns from elsewhere).
    pub fn read(run_dir: &Path) -> Result<Self, ReportError> {
        let path = run_dir.join("run_card.json");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(IoError::new("read", &path, e).into()),
        };
        let card: Value = serde_json::from_str(&text).map_err(|e| ReportError::BadFile {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        Ok(Self::from_card(&card))
    }

    pub fn from_card(card: &Value) -> Self {
        let mut facts = RunFacts::default();
        if let Some(a) = card["assumptions"].as_object() {
            facts.assumptions = a
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.replace('_', " "), plain(v)))
                .collect();
        }
        let b = &card["backtest"];
        for key in ["strategy", "codes", "start_date", "end_date", "source"] {
            if !b[key].is_null() {
                facts.run.push((key.replace('_', " "), plain(&b[key])));
            }
        }
        for key in ["risk_free", "risk_free_note", "benchmark_note"] {
            if !b[key].is_null() {
                facts
                    .assumptions
                    .push((key.replace('_', " "), plain(&b[key])));
            }
        }
        let r = &card["reproducibility"];
        for key in ["config_hash", "strategy_hash", "engine"] {
            if !r[key].is_null() {
                facts.run.push((key.replace('_', " "), plain(&r[key])));
            }
        }
        for d in card["data_sources"]["series"]
            .as_array()
            .into_iter()
            .flatten()
        {
            facts.provenance.push(format!(
                "{}: {} rows from {} ({}), {} to {}{}",
                plain(&d["symbol"]),
                plain(&d["rows"]),
                plain(&d["source"]),
                plain(&d["location"]),
                plain(&d["first_date"]),
                plain(&d["last_date"]),
                if d["from_cache"] == true {
                    ", cached"
                } else {
                    ""
                }
            ));
        }
        facts.warnings = card["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .map(plain)
            .collect();
        facts
    }
}

/// A JSON value as a reader would write it: strings bare, lists joined.
fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "—".to_string(),
        Value::Array(a) => a.iter().map(plain).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// Text made safe for HTML and SVG, in content and in quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A metric's value as the tables show it.
pub fn format_value(value: Option<f64>, unit: crate::research::tearsheet::Unit) -> String {
    use crate::research::tearsheet::Unit;
    match value {
        None => "—".to_string(),
        Some(v) if !v.is_finite() => "—".to_string(),
        Some(v) => match unit {
            Unit::Percent => format!("{:.2}%", v * 100.0),
            Unit::Ratio => format!("{v:.2}"),
            Unit::Count => format!("{v:.0}"),
        },
    }
}

/// One chart of a report: a file-name stem, its heading and the SVG.
pub struct Chart {
    pub id: String,
    pub title: String,
    pub svg: String,
}

/// Every chart of a tear sheet, in the order a report shows them.
pub fn charts(sheet: &TearSheet) -> Vec<Chart> {
    use svg::{Axis, Line};
    let s = &sheet.series;
    let mut out = Vec::new();
    let mut push = |id: &str, title: String, svg: String| {
        out.push(Chart {
            id: id.to_string(),
            title,
            svg,
        })
    };
    let equity: Vec<Option<f64>> = s.equity.iter().copied().map(Some).collect();
    let bench: Option<Vec<Option<f64>>> = s
        .benchmark_equity
        .as_ref()
        .map(|b| b.iter().copied().map(Some).collect());
    let mut lines = vec![Line {
        name: "strategy",
        values: &equity,
        color: svg::BLUE,
    }];
    if let Some(b) = &bench {
        lines.push(Line {
            name: "benchmark",
            values: b,
            color: svg::GRAY,
        });
    }
    let title = "Equity (growth of 1) against the benchmark".to_string();
    push(
        "equity",
        title.clone(),
        svg::line_chart(&title, &s.dates, &lines, Axis::Number, false),
    );
    let under: Vec<Option<f64>> = s.underwater.iter().copied().map(Some).collect();
    let title = "Underwater (drawdown from the running peak)".to_string();
    let line = Line {
        name: "drawdown",
        values: &under,
        color: svg::RED,
    };
    push(
        "underwater",
        title.clone(),
        svg::line_chart(&title, &s.dates, &[line], Axis::Percent, true),
    );
    let title = "Monthly returns (%)".to_string();
    push(
        "monthly",
        title.clone(),
        svg::monthly_heatmap(&title, &sheet.monthly),
    );
    let years: Vec<String> = sheet.annual.iter().map(|a| a.year.to_string()).collect();
    let mut groups = vec![(
        "strategy",
        svg::BLUE,
        sheet.annual.iter().map(|a| Some(a.strategy)).collect(),
    )];
    if sheet.annual.iter().any(|a| a.benchmark.is_some()) {
        groups.push((
            "benchmark",
            svg::GRAY,
            sheet.annual.iter().map(|a| a.benchmark).collect(),
        ));
    }
    let title = "Annual returns".to_string();
    push(
        "annual",
        title.clone(),
        svg::bar_chart(&title, &years, &groups, Axis::Percent),
    );
    for stat in ["sharpe", "sortino", "volatility", "beta"] {
        let found: Vec<_> = s.rolling.iter().filter(|r| r.statistic == stat).collect();
        if found.is_empty() {
            continue;
        }
        let names: Vec<String> = found.iter().map(|r| format!("{} days", r.window)).collect();
        let lines: Vec<Line<'_>> = found
            .iter()
            .zip(&names)
            .zip(
                [svg::BLUE, svg::ORANGE, svg::GREEN, svg::GRAY]
                    .iter()
                    .cycle(),
            )
            .map(|((r, name), color)| Line {
                name,
                values: &r.values,
                color,
            })
            .collect();
        let axis = if stat == "volatility" {
            Axis::Percent
        } else {
            Axis::Number
        };
        let title = format!("Rolling {stat} (6 and 12 months)");
        push(
            &format!("rolling_{stat}"),
            title.clone(),
            svg::line_chart(&title, &s.dates, &lines, axis, false),
        );
    }
    for d in &sheet.distribution {
        let period = period_name(d.period);
        let title = format!("Distribution of {period} returns (%), {} periods", d.count);
        push(
            &format!("distribution_{period}"),
            title.clone(),
            svg::histogram(&title, d),
        );
    }
    if let Some(p) = &sheet.positions {
        let gross: Vec<Option<f64>> = p.gross.iter().copied().map(Some).collect();
        let net: Vec<Option<f64>> = p.net.iter().copied().map(Some).collect();
        let lines = [
            Line {
                name: "gross",
                values: &gross,
                color: svg::BLUE,
            },
            Line {
                name: "net",
                values: &net,
                color: svg::ORANGE,
            },
        ];
        let title = "Exposure (fraction of equity)".to_string();
        push(
            "exposure",
            title.clone(),
            svg::line_chart(&title, &s.dates, &lines, Axis::Percent, false),
        );
    }
    out
}

pub fn period_name(p: Period) -> &'static str {
    match p {
        Period::Day => "daily",
        Period::Week => "weekly",
        Period::Month => "monthly",
        Period::Quarter => "quarterly",
        Period::Year => "yearly",
    }
}

/// Writes a finished document in one crash-safe step.
pub(crate) fn write(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    let dir = crate::fsio::parent_dir(path);
    std::fs::create_dir_all(&dir).map_err(|e| IoError::new("create", &dir, e))?;
    crate::fsio::write_atomic(path, bytes, crate::fsio::Durability::Synced)?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod fixture;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn facts_come_from_the_run_card() {
        let card = json!({
            "backtest": {"strategy": "sma_cross(20, 50)", "codes": ["AAPL", "MSFT"], "risk_free": "treasury_3m"},
            "assumptions": {"commission_rate": 0.001, "benchmark": "SPY", "optimizer": null},
            "data_sources": {"series": [{"symbol": "AAPL", "rows": 10, "source": "embedded",
                "location": "offline", "first_date": "2020-01-02", "last_date": "2020-01-15", "from_cache": false}]},
            "reproducibility": {"config_hash": "abc"},
            "warnings": ["w1"],
        });
        let f = RunFacts::from_card(&card);
        assert!(
            f.assumptions
                .contains(&("commission rate".into(), "0.001".into()))
        );
        assert!(!f.assumptions.iter().any(|(k, _)| k == "optimizer"));
        assert!(f.run.contains(&("codes".into(), "AAPL, MSFT".into())));
        assert_eq!(
            f.provenance,
            ["AAPL: 10 rows from embedded (offline), 2020-01-02 to 2020-01-15"]
        );
        assert_eq!(f.warnings, ["w1"]);
    }
}
