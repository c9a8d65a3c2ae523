//! The tear sheet as Markdown (docs §20.3): the tables as pipe tables and
//! each chart as an SVG file in `<stem>_files/` beside the document,
//! linked by a relative path so the pair can be moved together.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use super::{ReportError, RunFacts, charts, format_value, period_name};
use crate::research::tearsheet::{TearSheet, Unit};

/// Text safe inside a Markdown paragraph or table cell: no markup, no
/// raw HTML, no cell break, one line.
pub fn md_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '#' | '!' => {
                out.push('\\');
                out.push(c);
            }
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The folder of the charts beside `md_path`: `report.md` → `report_files`.
pub fn files_dir(md_path: &Path) -> PathBuf {
    let stem = md_path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    crate::fsio::parent_dir(md_path).join(format!("{stem}_files"))
}

/// Writes the document and its charts; returns the chart files written.
pub fn write(
    path: &Path,
    sheet: &TearSheet,
    facts: &RunFacts,
) -> Result<Vec<PathBuf>, ReportError> {
    let dir = files_dir(path);
    let folder = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut written = Vec::new();
    let mut figures = String::new();
    for c in charts(sheet) {
        let file = dir.join(format!("{}.svg", c.id));
        super::write(&file, c.svg.as_bytes())?;
        written.push(file);
        // A folder name with spaces still links: the target is in <…>.
        let _ = write!(
            figures,
            "![{}](<{folder}/{}.svg>)\n\n",
            md_escape(&c.title),
            c.id
        );
    }
    super::write(path, render(sheet, facts, &figures).as_bytes())?;
    Ok(written)
}

fn row(cells: &[String]) -> String {
    format!("| {} |\n", cells.join(" | "))
}

fn header(cells: &[&str]) -> String {
    let owned: Vec<String> = cells.iter().map(|c| c.to_string()).collect();
    let rule: Vec<String> = cells.iter().map(|_| "---".to_string()).collect();
    format!("{}{}", row(&owned), row(&rule))
}

fn pct(v: Option<f64>) -> String {
    format_value(v, Unit::Percent)
}

/// The document, with `figures` (the chart links) after the metrics.
pub fn render(sheet: &TearSheet, facts: &RunFacts, figures: &str) -> String {
    let mut s = format!(
        "# {}\n\n{} to {}, daily returns.\n\n## Metrics\n\n",
        md_escape(&sheet.title),
        sheet.start,
        sheet.end
    );
    s.push_str(&header(&["Metric", "Strategy", "Benchmark", "Note"]));
    for m in &sheet.metrics {
        s.push_str(&row(&[
            md_escape(&m.name),
            format_value(m.value, m.unit),
            format_value(m.benchmark, m.unit),
            md_escape(m.note.as_deref().unwrap_or("")),
        ]));
    }
    s.push_str("\n## Charts\n\n");
    s.push_str(figures);
    s.push_str("## Monthly returns\n\n");
    s.push_str(&header(&[
        "Year", "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        "Year",
    ]));
    let t = &sheet.monthly;
    for (r, year) in t.years.iter().enumerate() {
        let mut cells = vec![year.to_string()];
        cells.extend(t.cells.get(r).copied().unwrap_or([None; 12]).map(pct));
        cells.push(pct(t.year.get(r).copied().flatten()));
        s.push_str(&row(&cells));
    }
    s.push_str("\n## Annual returns\n\n");
    s.push_str(&header(&["Year", "Strategy", "Benchmark"]));
    for a in &sheet.annual {
        s.push_str(&row(&[
            a.year.to_string(),
            pct(Some(a.strategy)),
            pct(a.benchmark),
        ]));
    }
    s.push_str("\n## Worst drawdowns\n\n");
    s.push_str(&header(&[
        "#", "Start", "Trough", "Recovery", "Depth", "Days",
    ]));
    for (i, d) in sheet.drawdowns.iter().enumerate() {
        s.push_str(&row(&[
            (i + 1).to_string(),
            d.start.to_string(),
            d.trough.to_string(),
            d.recovery.map_or("not recovered".into(), |r| r.to_string()),
            pct(Some(d.depth)),
            d.days.to_string(),
        ]));
    }
    if let Some(first) = sheet.distribution.first() {
        s.push_str("\n## Return quantiles\n\n");
        let mut head = vec!["Period".to_string(), "Count".to_string()];
        head.extend(
            first
                .quantiles
                .iter()
                .map(|(p, _)| format!("{:.0}%", p * 100.0)),
        );
        s.push_str(&row(&head));
        s.push_str(&row(&vec!["---".to_string(); head.len()]));
        for d in &sheet.distribution {
            let mut cells = vec![period_name(d.period).to_string(), d.count.to_string()];
            cells.extend(d.quantiles.iter().map(|(_, q)| pct(Some(*q))));
            s.push_str(&row(&cells));
        }
    }
    facts_part(&mut s, sheet, facts);
    s
}

fn facts_part(s: &mut String, sheet: &TearSheet, facts: &RunFacts) {
    s.push_str("\n## Assumptions\n\n");
    for a in &sheet.assumptions {
        let _ = writeln!(s, "- {}", md_escape(a));
    }
    for (k, v) in &facts.assumptions {
        let _ = writeln!(s, "- {}: {}", md_escape(k), md_escape(v));
    }
    s.push_str("\n## Data provenance\n\n");
    if facts.provenance.is_empty() {
        s.push_str("No run card: the returns were given directly.\n");
    }
    for p in &facts.provenance {
        let _ = writeln!(s, "- {}", md_escape(p));
    }
    for (k, v) in &facts.run {
        let _ = writeln!(s, "- {}: {}", md_escape(k), md_escape(v));
    }
    if !facts.warnings.is_empty() {
        s.push_str("\n## Warnings\n\n");
        for w in &facts.warnings {
            let _ = writeln!(s, "- {}", md_escape(w));
        }
    }
}

/// The relative targets of a Markdown document's images and links
/// (`](target)` or `](<target>)`), skipping URLs and anchors.
pub fn relative_links(md: &str) -> Vec<String> {
    md.split("](")
        .skip(1)
        .filter_map(|rest| {
            let target = match rest.strip_prefix('<') {
                Some(inner) => inner.split('>').next()?,
                None => rest.split(')').next()?,
            };
            let local = !target.contains("://") && !target.starts_with('#');
            local.then(|| target.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::sheet;

    #[test]
    fn charts_are_written_beside_and_the_links_resolve() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("my report.md");
        let mut ts = sheet(300);
        ts.title = "A | B <i>".into();
        let files = write(&path, &ts, &RunFacts::default()).unwrap();
        assert!(files.len() >= 5, "{files:?}");
        let md = std::fs::read_to_string(&path).unwrap();
        assert!(md.starts_with("# A \\| B &lt;i&gt;\n"), "{md}");
        let links = relative_links(&md);
        assert_eq!(links.len(), files.len(), "{links:?}");
        for link in links {
            let target = dir.path().join(&link);
            assert!(target.is_file(), "{link} does not resolve");
            assert!(std::fs::read_to_string(target).unwrap().starts_with("<svg"));
        }
        assert!(md.contains("| Sharpe | 1.23 | 0.62 |"), "{md}");
    }
}
