//! A research session exported as Markdown or one HTML file (docs §20.3):
//! the conversation in order, each tool call folded to one line with its
//! arguments, the figures its results name (embedded in the HTML, linked
//! from the Markdown), a result's `metrics` as a table, and links to the
//! other files it wrote.

use std::collections::HashMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use serde_json::Value;

use super::markdown::md_escape;
use super::{ReportError, escape};
use crate::model::Role;
use crate::store::MessageLog;

/// The two forms of an export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Markdown,
    Html,
}

impl Format {
    pub fn extension(self) -> &'static str {
        match self {
            Format::Markdown => "md",
            Format::Html => "html",
        }
    }
}

/// Where an export goes unless told: `<session>/exports/session.<ext>`.
pub fn default_path(session_dir: &Path, format: Format) -> PathBuf {
    session_dir
        .join("exports")
        .join(format!("session.{}", format.extension()))
}

/// Longest argument text a folded call line shows.
const ARGS_CHARS: usize = 240;
/// Largest figure embedded in the HTML; a larger one is linked.
const EMBED_BYTES: u64 = 4 * 1024 * 1024;
/// How deep a result's JSON is searched for file paths.
const MAX_DEPTH: usize = 6;

/// One entry of the conversation as the export shows it.
enum Entry {
    User(String),
    Assistant(String),
    Call { name: String, args: String },
    Result(Findings),
}

/// What a tool's result points at.
#[derive(Default)]
struct Findings {
    tool: String,
    ok: bool,
    figures: Vec<PathBuf>,
    files: Vec<PathBuf>,
    metrics: Vec<(String, String)>,
}

/// Writes the session at `session_dir` to `out` (or the default path) and
/// returns the path written.
pub fn export_session(
    session_dir: &Path,
    format: Format,
    out: Option<&Path>,
) -> Result<PathBuf, ReportError> {
    let id = session_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let read = MessageLog::read(session_dir)?;
    if read.messages.is_empty() {
        return Err(ReportError::EmptySession(id));
    }
    let title = std::fs::read_to_string(session_dir.join("session.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["title"].as_str().map(String::from))
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| format!("Session {id}"));
    let entries = entries(session_dir, &read.messages);
    let path = out.map_or_else(|| default_path(session_dir, format), Path::to_path_buf);
    let base = crate::fsio::parent_dir(&path);
    let text = match format {
        Format::Markdown => markdown(&title, &id, &entries, &base),
        Format::Html => html(&title, &id, &entries),
    };
    super::write(&path, text.as_bytes())?;
    Ok(path)
}

fn entries(session_dir: &Path, messages: &[crate::store::StoredMessage]) -> Vec<Entry> {
    let workspace = session_dir.join("workspace");
    let mut names: HashMap<String, String> = HashMap::new();
    let mut out = Vec::new();
    for stored in messages {
        let m = &stored.message;
        match m.role {
            Role::System => {}
            Role::User => out.push(Entry::User(m.content.clone())),
            Role::Assistant => {
                if !m.content.trim().is_empty() {
                    out.push(Entry::Assistant(m.content.clone()));
                }
                for call in &m.tool_calls {
                    names.insert(call.id.clone(), call.function.name.clone());
                    out.push(Entry::Call {
                        name: call.function.name.clone(),
                        args: one_line_args(&call.function.arguments),
                    });
                }
            }
            Role::Tool => {
                let tool = m
                    .tool_call_id
                    .as_ref()
                    .and_then(|id| names.get(id).cloned())
                    .or_else(|| m.name.clone())
                    .unwrap_or_else(|| "tool".into());
                out.push(Entry::Result(findings(tool, &m.content, &workspace)));
            }
        }
    }
    out
}

/// The arguments as compact JSON on one line, cut to [`ARGS_CHARS`].
fn one_line_args(raw: &str) -> String {
    let compact = serde_json::from_str::<Value>(raw)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| raw.split_whitespace().collect::<Vec<_>>().join(" "));
    if compact.chars().count() > ARGS_CHARS {
        let cut: String = compact.chars().take(ARGS_CHARS).collect();
        format!("{cut}…")
    } else {
        compact
    }
}

fn findings(tool: String, content: &str, workspace: &Path) -> Findings {
    let mut f = Findings {
        tool,
        ok: true,
        ..Findings::default()
    };
    let Ok(v) = serde_json::from_str::<Value>(content) else {
        return f;
    };
    f.ok = !matches!(v["status"].as_str(), Some("error" | "failed"));
    if let Some(m) = v["metrics"].as_object() {
        f.metrics = m
            .iter()
            .filter(|(_, x)| x.is_number() || x.is_string() || x.is_boolean())
            .take(40)
            .map(|(k, x)| {
                let shown = match x {
                    Value::Number(n) if n.is_f64() => {
                        n.as_f64().map_or(n.to_string(), |x| format!("{x:.4}"))
                    }
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), shown)
            })
            .collect();
    }
    let mut paths = Vec::new();
    collect_paths(&v, workspace, 0, &mut paths);
    for p in paths {
        let figure = matches!(p.extension().and_then(|e| e.to_str()), Some("svg" | "png"));
        let list = if figure { &mut f.figures } else { &mut f.files };
        if !list.contains(&p) {
            list.push(p);
        }
    }
    f
}

/// Every string in `v` that names an existing file (absolute, or relative
/// to the session's workspace).
fn collect_paths(v: &Value, workspace: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > MAX_DEPTH || out.len() > 50 {
        return;
    }
    match v {
        Value::String(s) if s.len() < 1024 && !s.contains('\n') && s.contains('.') => {
            let p = Path::new(s);
            let full = if p.is_absolute() {
                p.to_path_buf()
            } else {
                workspace.join(p)
            };
            if full.is_file() {
                out.push(full);
            }
        }
        Value::Array(a) => a
            .iter()
            .for_each(|x| collect_paths(x, workspace, depth + 1, out)),
        Value::Object(o) => o
            .values()
            .for_each(|x| collect_paths(x, workspace, depth + 1, out)),
        _ => {}
    }
}

/// A path as a link from `base`: relative (`../workspace/…`) when both
/// are absolute, so the session folder can move as a whole.
fn link_target(path: &Path, base: &Path) -> String {
    use std::path::Component;
    if !(path.is_absolute() && base.is_absolute()) {
        return path.to_string_lossy().into_owned();
    }
    let p: Vec<Component<'_>> = path.components().collect();
    let b: Vec<Component<'_>> = base.components().collect();
    let common = p.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut rel = PathBuf::new();
    for _ in common..b.len() {
        rel.push("..");
    }
    for c in p.iter().skip(common) {
        rel.push(c.as_os_str());
    }
    rel.to_string_lossy().into_owned()
}

fn markdown(title: &str, id: &str, entries: &[Entry], base: &Path) -> String {
    let mut s = format!(
        "# {}\n\nSession `{}`, exported by vibedesk {}.\n\n",
        md_escape(title),
        id.replace('`', ""),
        env!("CARGO_PKG_VERSION")
    );
    for e in entries {
        match e {
            Entry::User(text) => {
                let _ = write!(s, "## You\n\n{}\n\n", no_raw_html(text));
            }
            Entry::Assistant(text) => {
                let _ = write!(s, "## Assistant\n\n{}\n\n", no_raw_html(text));
            }
            Entry::Call { name, args } => {
                let _ = writeln!(s, "- ▸ **{}** {}\n", md_escape(name), md_escape(args));
            }
            Entry::Result(f) => {
                let _ = writeln!(
                    s,
                    "  - {} {}\n",
                    if f.ok { "✓" } else { "✗" },
                    md_escape(&f.tool)
                );
                if !f.metrics.is_empty() {
                    s.push_str("| metric | value |\n|---|---|\n");
                    for (k, v) in &f.metrics {
                        let _ = writeln!(s, "| {} | {} |", md_escape(k), md_escape(v));
                    }
                    s.push('\n');
                }
                for p in &f.figures {
                    let _ = write!(
                        s,
                        "![{}](<{}>)\n\n",
                        md_escape(&file_name(p)),
                        link_target(p, base)
                    );
                }
                for p in &f.files {
                    let _ = writeln!(
                        s,
                        "- [{}](<{}>)",
                        md_escape(&file_name(p)),
                        link_target(p, base)
                    );
                }
                if !f.files.is_empty() {
                    s.push('\n');
                }
            }
        }
    }
    s
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Markdown text with raw HTML made literal outside code, so an exported
/// message never injects markup into a viewer.
fn no_raw_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push_str(line);
        } else if fenced {
            out.push_str(line);
        } else {
            out.push_str(&line.replace('<', "&lt;").replace('>', "&gt;"));
        }
        out.push('\n');
    }
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px auto;max-width:900px;color:#222}\
.user{background:#eef4fb;padding:8px 12px;border-radius:6px}.assistant{padding:4px 12px}\
.call{font-family:monospace;font-size:12px;color:#555;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}\
table{border-collapse:collapse;font-size:13px}th,td{border-bottom:1px solid #eee;padding:2px 8px;text-align:left}\
pre{background:#f6f6f6;padding:8px;overflow-x:auto}img{max-width:100%}.failed{color:#c0392b}";

fn html(title: &str, id: &str, entries: &[Entry]) -> String {
    let mut s = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style></head><body>\n<h1>{t}</h1><p>Session <code>{}</code>, exported by vibedesk {}.</p>\n",
        escape(id),
        env!("CARGO_PKG_VERSION"),
        t = escape(title)
    );
    for e in entries {
        match e {
            Entry::User(text) => {
                let _ = write!(
                    s,
                    "<section class=\"user\"><h2>You</h2>{}</section>\n",
                    markdown_html(text)
                );
            }
            Entry::Assistant(text) => {
                let _ = write!(
                    s,
                    "<section class=\"assistant\"><h2>Assistant</h2>{}</section>\n",
                    markdown_html(text)
                );
            }
            Entry::Call { name, args } => {
                let _ = writeln!(
                    s,
                    "<div class=\"call\" title=\"{a}\">▸ <b>{}</b> {a}</div>",
                    escape(name),
                    a = escape(args)
                );
            }
            Entry::Result(f) => result_html(&mut s, f),
        }
    }
    s.push_str("</body></html>\n");
    s
}

fn result_html(s: &mut String, f: &Findings) {
    let _ = writeln!(
        s,
        "<div class=\"result{}\">{} {}</div>",
        if f.ok { "" } else { " failed" },
        if f.ok { "✓" } else { "✗" },
        escape(&f.tool)
    );
    if !f.metrics.is_empty() {
        s.push_str("<table class=\"metrics\"><tbody>");
        for (k, v) in &f.metrics {
            let _ = write!(s, "<tr><th>{}</th><td>{}</td></tr>", escape(k), escape(v));
        }
        s.push_str("</tbody></table>\n");
    }
    for p in &f.figures {
        let name = escape(&file_name(p));
        let small = std::fs::metadata(p).is_ok_and(|m| m.len() <= EMBED_BYTES);
        let bytes = if small { std::fs::read(p).ok() } else { None };
        match bytes {
            Some(b) => {
                let mime = if p.extension().is_some_and(|e| e == "png") {
                    "image/png"
                } else {
                    "image/svg+xml"
                };
                // A data URI keeps the file self-contained, and an SVG shown
                // through <img> runs no script.
                let _ = writeln!(
                    s,
                    "<figure><img alt=\"{name}\" src=\"data:{mime};base64,{}\"><figcaption>{name}</figcaption></figure>",
                    base64(&b)
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "<p>figure: <code>{}</code></p>",
                    escape(&p.to_string_lossy())
                );
            }
        }
    }
    if !f.files.is_empty() {
        s.push_str("<ul class=\"artifacts\">");
        for p in &f.files {
            let target = escape(&p.to_string_lossy());
            let _ = write!(
                s,
                "<li><a href=\"file://{target}\">{}</a></li>",
                escape(&file_name(p))
            );
        }
        s.push_str("</ul>\n");
    }
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                let idx = ((n >> (18 - 6 * k)) & 63) as usize;
                out.push(char::from(ABC.get(idx).copied().unwrap_or(b'A')));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A message's Markdown as HTML: structure and tables kept, raw HTML shown
/// as text, images shown as their link (never fetched).
fn markdown_html(text: &str) -> String {
    let mut s = String::with_capacity(text.len() * 2);
    let mut in_head = false;
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    for event in Parser::new_ext(text, opts) {
        match event {
            Event::Start(tag) => s.push_str(&open_tag(&tag, &mut in_head)),
            Event::End(tag) => s.push_str(close_tag(tag, &mut in_head)),
            Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => s.push_str(&escape(&t)),
            Event::Code(t) => {
                let _ = write!(s, "<code>{}</code>", escape(&t));
            }
            Event::InlineMath(t) | Event::DisplayMath(t) => s.push_str(&escape(&t)),
            Event::SoftBreak => s.push('\n'),
            Event::HardBreak => s.push_str("<br>"),
            Event::Rule => s.push_str("<hr>"),
            Event::FootnoteReference(t) => s.push_str(&escape(&t)),
            Event::TaskListMarker(done) => s.push_str(if done { "☑ " } else { "☐ " }),
        }
    }
    s
}

fn open_tag(tag: &Tag<'_>, in_head: &mut bool) -> String {
    match tag {
        Tag::Paragraph => "<p>".into(),
        Tag::Heading { level, .. } => format!("<{level}>"),
        Tag::BlockQuote(_) => "<blockquote>".into(),
        Tag::CodeBlock(_) => "<pre><code>".into(),
        Tag::List(Some(start)) => format!("<ol start=\"{start}\">"),
        Tag::List(None) => "<ul>".into(),
        Tag::Item => "<li>".into(),
        Tag::Table(_) => "<table>".into(),
        Tag::TableHead => {
            *in_head = true;
            "<thead><tr>".into()
        }
        Tag::TableRow => "<tr>".into(),
        Tag::TableCell => if *in_head { "<th>" } else { "<td>" }.into(),
        Tag::Emphasis => "<em>".into(),
        Tag::Strong => "<strong>".into(),
        Tag::Strikethrough => "<del>".into(),
        Tag::Link { dest_url, .. } => format!("<a href=\"{}\">", escape(dest_url)),
        Tag::Image { dest_url, .. } => format!("[image <code>{}</code>: ", escape(dest_url)),
        _ => String::new(),
    }
}

fn close_tag(tag: TagEnd, in_head: &mut bool) -> &'static str {
    match tag {
        TagEnd::Paragraph => "</p>\n",
        TagEnd::Heading(level) => match level {
            pulldown_cmark::HeadingLevel::H1 => "</h1>\n",
            pulldown_cmark::HeadingLevel::H2 => "</h2>\n",
            pulldown_cmark::HeadingLevel::H3 => "</h3>\n",
            pulldown_cmark::HeadingLevel::H4 => "</h4>\n",
            pulldown_cmark::HeadingLevel::H5 => "</h5>\n",
            pulldown_cmark::HeadingLevel::H6 => "</h6>\n",
        },
        TagEnd::BlockQuote(_) => "</blockquote>\n",
        TagEnd::CodeBlock => "</code></pre>\n",
        TagEnd::List(true) => "</ol>\n",
        TagEnd::List(false) => "</ul>\n",
        TagEnd::Item => "</li>\n",
        TagEnd::Table => "</tbody></table>\n",
        TagEnd::TableHead => {
            *in_head = false;
            "</tr></thead><tbody>\n"
        }
        TagEnd::TableRow => "</tr>\n",
        TagEnd::TableCell => {
            if *in_head {
                "</th>"
            } else {
                "</td>"
            }
        }
        TagEnd::Emphasis => "</em>",
        TagEnd::Strong => "</strong>",
        TagEnd::Strikethrough => "</del>",
        TagEnd::Link => "</a>",
        TagEnd::Image => "]",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Message, ToolCall};
    use crate::store::StoredMessage;

    #[test]
    fn base64_matches_the_rfc_vectors() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), coded);
        }
    }

    #[test]
    fn a_session_exports_with_folded_calls_figures_and_tables() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("abc123");
        let run = session.join("workspace").join("run1");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(
            run.join("chart.svg"),
            "<svg xmlns=\"http://www.w3.org/2000/svg\"/>",
        )
        .unwrap();
        std::fs::write(run.join("trades.csv"), "a,b\n").unwrap();
        let mut log = MessageLog::open(&session).unwrap();
        let mut call = Message::plain_with_role(Role::Assistant, "");
        call.tool_calls = vec![ToolCall::new(
            "c1",
            "backtest",
            "{\n \"codes\": [\"AAPL\"]\n}",
        )];
        let result = serde_json::json!({"status": "ok", "metrics": {"sharpe": 1.5},
            "chart": {"svg": run.join("chart.svg")}, "artifacts": ["run1/trades.csv"]});
        let mut tool = Message::plain_with_role(Role::Tool, result.to_string());
        tool.tool_call_id = Some("c1".into());
        for m in [
            Message::plain_with_role(Role::User, "backtest <b>AAPL</b>"),
            call,
            tool,
            Message::plain_with_role(Role::Assistant, "| a | b |\n|---|---|\n| 1 | 2 |\n"),
        ] {
            log.append(&StoredMessage::now(m)).unwrap();
        }
        let md_path = export_session(&session, Format::Markdown, None).unwrap();
        assert_eq!(md_path, session.join("exports/session.md"));
        let md = std::fs::read_to_string(&md_path).unwrap();
        assert!(
            md.contains("- ▸ **backtest** {\"codes\":\\[\"AAPL\"\\]}"),
            "{md}"
        );
        assert!(
            md.contains("backtest &lt;b&gt;AAPL&lt;/b&gt;") && md.contains("| sharpe | 1.5000 |")
        );
        for link in super::super::markdown::relative_links(&md) {
            assert!(link.starts_with("../workspace/"), "{link}");
            let target = md_path.parent().unwrap().join(&link);
            assert!(target.is_file(), "{link}");
        }
        assert!(md.contains("chart.svg") && md.contains("trades.csv"));
        let html_path = export_session(&session, Format::Html, None).unwrap();
        let html = std::fs::read_to_string(html_path).unwrap();
        assert!(html.contains("<td>1</td>") && html.contains("data:image/svg+xml;base64,"));
        assert!(html.contains("backtest &lt;b&gt;AAPL&lt;/b&gt;") && !html.contains("<b>AAPL"));
        assert!(html.contains("<b>backtest</b> {&quot;codes&quot;:[&quot;AAPL&quot;]}"));
        let empty = dir.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        assert!(matches!(
            export_session(&empty, Format::Html, None),
            Err(ReportError::EmptySession(_))
        ));
    }
}
