//! One memory entry: its markdown-with-frontmatter format (docs §8.3), file
//! names, read rules, importance (docs §8.4) and the dedup key (docs §8.5).

use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};
use sha2::{Digest, Sha256};

use super::compression::Level;
use super::frontmatter::{self, FmValue, Meta};

/// The default body limit, marker included (docs §8.3).
pub const MAX_ENTRY_CHARS: usize = 8_000;
/// Longest slug, in characters, before the hash suffix.
const SLUG_CHARS: usize = 60;
/// Longest slug in bytes: keeps `<type>_<slug>_<hash>.md` well under the
/// 255-byte file-name limit even for 4-byte characters.
const SLUG_BYTES: usize = 180;

/// The four entry types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryType {
    User,
    Feedback,
    Project,
    Reference,
}

impl MemoryType {
    pub const ALL: [MemoryType; 4] = [
        MemoryType::User,
        MemoryType::Feedback,
        MemoryType::Project,
        MemoryType::Reference,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MemoryType::User => "user",
            MemoryType::Feedback => "feedback",
            MemoryType::Project => "project",
            MemoryType::Reference => "reference",
        }
    }

    pub fn parse(s: &str) -> Option<MemoryType> {
        MemoryType::ALL.into_iter().find(|t| t.as_str() == s.trim())
    }
}

/// Who wrote an entry (docs §8.3): the user (the CLI, the workstation, a
/// file written by hand) or the model (the `remember` tool). A model's
/// memory is unconfirmed until the user keeps it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Origin {
    #[default]
    User,
    Model,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::User => "user",
            Origin::Model => "model",
        }
    }

    pub fn parse(s: &str) -> Option<Origin> {
        match s.trim() {
            "user" => Some(Origin::User),
            "model" => Some(Origin::Model),
            _ => None,
        }
    }
}

/// How an unconfirmed memory is labelled wherever the model reads it.
pub const UNCONFIRMED_LABEL: &str = "unconfirmed, written by the model";

/// A `true`/`false` frontmatter value.
fn parse_bool(s: &str) -> Option<bool> {
    match s.trim() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

impl std::fmt::Display for MemoryType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An entry as read from disk.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// File name inside the entries directory, e.g. `project_btc.md`.
    pub file: String,
    pub path: PathBuf,
    pub title: String,
    pub description: String,
    /// As written (`project` when missing); not necessarily one of the four.
    pub memory_type: String,
    pub id: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub last_accessed: DateTime<Utc>,
    pub keywords: Vec<String>,
    pub quality: f64,
    pub access_count: u64,
    pub related: Vec<String>,
    pub category: String,
    pub level: Level,
    /// The retention estimate of the last compression, when compressed.
    pub retention: Option<f64>,
    /// The body, stripped (not cut: compression and `show` want all of it).
    pub body: String,
    pub modified: DateTime<Utc>,
    pub size: u64,
    /// Frontmatter values that could not be read, each naming its field and
    /// what was used instead (see [`frontmatter_problems`]); empty when the
    /// file read cleanly.
    pub problems: Vec<String>,
    /// Who wrote the entry when it was not the user or their agent
    /// (`source: mcp:<client>`, docs §8.3): an outside note, never recalled
    /// into a prompt on its own (docs §4.2).
    pub source: Option<String>,
    /// Who wrote it (`origin`; a file without the field is the user's).
    pub origin: Origin,
    /// Whether the user kept it (`confirmed`; without the field, true for
    /// the user's and false for the model's).
    pub confirmed: bool,
}

impl Entry {
    /// The model wrote it and the user has not kept it (docs §8.3): recall
    /// ranks it after the user's and labels it.
    pub fn is_unconfirmed(&self) -> bool {
        self.origin == Origin::Model && !self.confirmed
    }

    /// Importance now (docs §8.4 `compute_importance`).
    pub fn importance(&self, now: DateTime<Utc>, decay: bool) -> f64 {
        compute_importance(
            self.quality,
            self.access_count,
            days_between(self.last_accessed, now),
            decay,
        )
    }

    /// The body as the original hands it out: cut to 8,000 characters.
    pub fn body_cut(&self) -> &str {
        cut_chars(&self.body, MAX_ENTRY_CHARS)
    }

    pub fn stem(&self) -> &str {
        self.file.strip_suffix(".md").unwrap_or(&self.file)
    }

    /// Whether someone other than the user wrote it (an MCP client).
    pub fn is_external(&self) -> bool {
        self.source.is_some()
    }
}

/// Longest `source` kept, in characters.
const SOURCE_CHARS: usize = 80;

/// A `source` value as stored: one line, trimmed, at most 80 characters;
/// `None` when blank.
pub fn clean_source(source: &str) -> Option<String> {
    let line = one_line(source);
    let cut = cut_chars(line.trim(), SOURCE_CHARS).trim();
    (!cut.is_empty()).then(|| cut.to_string())
}

/// Days from `earlier` to `later`, fractional (negative when reversed).
pub fn days_between(earlier: DateTime<Utc>, later: DateTime<Utc>) -> f64 {
    (later - earlier).num_milliseconds() as f64 / 86_400_000.0
}

/// Importance: the quality score, or with decay on
/// `clamp(q × (e^(−ln2/14 · max(0, days)) + min(0.3, 0.1 · access_count)), 0, 1)`
/// (a 14-day half-life).
pub fn compute_importance(
    quality: f64,
    access_count: u64,
    days_since_access: f64,
    decay: bool,
) -> f64 {
    if !decay {
        return quality;
    }
    let decayed = (-(std::f64::consts::LN_2 / 14.0) * days_since_access.max(0.0)).exp();
    let boost = (0.1 * access_count as f64).min(0.3);
    (quality * (decayed + boost)).clamp(0.0, 1.0)
}

/// `&s[..n chars]`.
pub fn cut_chars(s: &str, n: usize) -> &str {
    crate::text::prefix_chars(s, n)
}

/// Removes C0/C1 control characters except tab, LF and CR (docs §8.3).
pub fn sanitize_body(content: &str) -> String {
    content
        .chars()
        .filter(|c| {
            !matches!(*c,
                '\u{00}'..='\u{08}' | '\u{0B}' | '\u{0C}' | '\u{0E}'..='\u{1F}' | '\u{7F}'..='\u{9F}')
        })
        .collect()
}

/// Cuts `content` to at most `limit` characters *including* a visible
/// marker `\n\n[truncated at <limit> chars]\n` (docs §8.3).
pub fn truncate_body(content: &str, limit: usize) -> String {
    if content.chars().count() <= limit {
        return content.to_string();
    }
    let marker = format!("\n\n[truncated at {limit} chars]\n");
    let keep = limit.saturating_sub(marker.chars().count());
    format!("{}{marker}", cut_chars(content, keep))
}

/// One line of frontmatter text: newlines become spaces.
pub fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// Keywords as stored: at most 5, each at most 30 characters, without the
/// characters that would break the `[a, b]` list syntax.
pub fn clean_keywords(keywords: &[String]) -> Vec<String> {
    keywords
        .iter()
        .map(|k| {
            let k: String = k
                .chars()
                .filter(|c| !matches!(c, ',' | '[' | ']' | '"' | '\'' | '\n' | '\r'))
                .collect();
            cut_chars(k.trim(), 30).trim().to_string()
        })
        .filter(|k| !k.is_empty())
        .take(5)
        .collect()
}

/// `YYYY-MM-DDTHH:MM:SSZ`: UTC with an explicit zone (the original wrote no
/// zone and read the value back as local time, docs §12.9).
pub fn format_ts(ts: DateTime<Utc>) -> String {
    ts.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Parses a timestamp as written: RFC 3339 / ISO 8601 with a zone, or a
/// naive value, which is UTC (what the original meant when it wrote it;
/// reading it as local time was its bug, docs §12.9).
pub fn parse_ts(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f%:z",
        "%Y-%m-%d %H:%M:%S%.f%:z",
        "%Y-%m-%dT%H:%M:%S%.f%z",
    ] {
        if let Ok(t) = DateTime::parse_from_str(s, fmt) {
            return Some(t.with_timezone(&Utc));
        }
    }
    let naive = s.strip_suffix('Z').unwrap_or(s);
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(naive, fmt) {
            return Some(Utc.from_utc_datetime(&t));
        }
    }
    NaiveDate::parse_from_str(naive, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| Utc.from_utc_datetime(&t))
}

fn sha256_hex(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A 6-hex id: `sha256(seed)[:6]`.
pub fn short_id(seed: &str) -> String {
    sha256_hex(seed)[..6].to_string()
}

/// The dedup key (docs §8.5): first 12 hex of SHA-256 of
/// `lower(strip(name)) | lower(strip(desc)) | lower(strip(content))`.
pub fn content_hash(name: &str, description: &str, content: &str) -> String {
    let key = format!(
        "{}|{}|{}",
        name.trim().to_lowercase(),
        description.trim().to_lowercase(),
        content.trim().to_lowercase()
    );
    sha256_hex(&key)[..12].to_string()
}

/// Characters a slug keeps as they are: ASCII `a-z 0-9 _ -`, and any
/// non-ASCII letter or digit, plus the combining marks of the scripts the
/// original slugged (Thai tone marks, Arabic and Hebrew points, Indic
/// vowel signs), so such titles read naturally on disk.
fn slug_keeps(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-';
    }
    c.is_alphanumeric()
        || matches!(c,
            '\u{0300}'..='\u{036F}'
            | '\u{0591}'..='\u{05C7}'
            | '\u{0610}'..='\u{061A}'
            | '\u{064B}'..='\u{065F}'
            | '\u{0670}'
            | '\u{06D6}'..='\u{06ED}'
            | '\u{0900}'..='\u{0DFF}'
            | '\u{0E00}'..='\u{0EFF}'
            | '\u{3099}'..='\u{309C}'
            | '\u{30FC}')
}

/// The file-name slug of a (trimmed) title.
///
/// The original kept only a few non-Latin ranges and cut at 60 characters,
/// so two titles could still share a file and overwrite each other (Persian
/// letters outside its Arabic range, kana, Hangul, punctuation variants, long
/// titles with a common prefix; docs §11.1 item 9). Here a slug is lossless
/// — the lower-cased title itself — only when every character is kept as is
/// and nothing is cut; otherwise `_<sha256(title)[:6]>` is appended, so two
/// different titles never share a slug except by a hash collision, which
/// [`crate::memory::MemoryStore`] detects and resolves with a longer hash.
pub fn slug(title: &str) -> String {
    slug_with_hash(title, 6)
}

/// [`slug`] with a hash suffix of `hash_len` hex digits when lossy.
pub fn slug_with_hash(title: &str, hash_len: usize) -> String {
    let lower = title.to_lowercase();
    let mut body = String::new();
    // The title maps to itself only if it was already lower case.
    let mut lossless = lower == title;
    for (chars, c) in lower.chars().enumerate() {
        if chars >= SLUG_CHARS || body.len() + c.len_utf8() > SLUG_BYTES {
            lossless = false;
            break;
        }
        if slug_keeps(c) {
            body.push(c);
        } else {
            body.push('_');
            lossless = false;
        }
    }
    if body.trim_matches('_').is_empty() {
        lossless = false;
    }
    if lossless {
        return body;
    }
    let hash = sha256_hex(title);
    let hash = &hash[..hash_len.min(hash.len())];
    if body.is_empty() {
        hash.to_string()
    } else {
        format!("{body}_{hash}")
    }
}

/// `<type>_<slug>.md`.
pub fn file_name(memory_type: MemoryType, title: &str) -> String {
    format!("{}_{}.md", memory_type.as_str(), slug(title))
}

/// What a new entry is made of.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEntry {
    pub title: String,
    pub content: String,
    pub memory_type: MemoryType,
    /// Empty = the title.
    pub description: String,
    pub keywords: Vec<String>,
    /// Who writes it when not the user (`mcp:<client>`); `None` = the user.
    pub source: Option<String>,
    /// The model's memories are saved unconfirmed (docs §8.3).
    pub origin: Origin,
}

impl NewEntry {
    pub fn new(
        title: impl Into<String>,
        content: impl Into<String>,
        memory_type: MemoryType,
    ) -> Self {
        NewEntry {
            title: title.into(),
            content: content.into(),
            memory_type,
            description: String::new(),
            keywords: Vec::new(),
            source: None,
            origin: Origin::User,
        }
    }
}

/// The fields a write renders besides the text fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Stamp {
    pub id: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub last_accessed: DateTime<Utc>,
    pub quality: f64,
    pub access_count: u64,
    pub importance: f64,
    /// Ids of related entries (`related_memories`), as a person or an
    /// import wrote them. The original always wrote `[]`, so rewriting an
    /// entry dropped them; a replacing save keeps them.
    pub related: Vec<String>,
    /// `source`, written only when set (an entry from an MCP client).
    pub source: Option<String>,
    /// `origin` and `confirmed`, written only for the model's memories, so
    /// the user's files read as they always did.
    pub origin: Origin,
    pub confirmed: bool,
}

/// Renders an entry in the format of docs §8.3 (timestamps with a zone).
/// `title`, `description` and `body` must already be cleaned.
pub fn render(
    title: &str,
    description: &str,
    memory_type: MemoryType,
    keywords: &[String],
    stamp: &Stamp,
    body: &str,
) -> String {
    format!(
        "---\nname: {title}\ndescription: {description}\ntype: {t}\nid: {id}\ncreated_at: {c}\nupdated_at: {u}\nkeywords: [{kw}]\nquality_score: {q}\naccess_count: {a}\nlast_accessed: {l}\nimportance: {i}\nrelated_memories: [{rel}]\ncategory: {t}\ncompression_level: raw\n{src}{origin}---\n\n{body}",
        t = memory_type.as_str(),
        id = stamp.id,
        c = format_ts(stamp.created_at),
        u = format_ts(stamp.updated_at),
        kw = keywords.join(", "),
        q = format_score(stamp.quality),
        a = stamp.access_count,
        l = format_ts(stamp.last_accessed),
        i = format_score(stamp.importance),
        rel = stamp.related.join(", "),
        src = stamp
            .source
            .as_ref()
            .map(|s| format!("source: {s}\n"))
            .unwrap_or_default(),
        origin = match stamp.origin {
            Origin::User => String::new(),
            Origin::Model => format!("origin: model\nconfirmed: {}\n", stamp.confirmed),
        },
    )
}

/// Scores as the original writes them: two decimals, but `0.5` for the
/// default (Python's `str(0.5)`).
pub fn format_score(v: f64) -> String {
    let s = format!("{v:.2}");
    match s.strip_suffix('0') {
        Some(t) if !t.ends_with('.') => t.to_string(),
        _ => s,
    }
}

fn is_hex6(s: &str) -> bool {
    s.len() == 6 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A text field as written; the original coerced `[a]`-looking values through
/// its list parser (`[red]x[/red]` came back as `red]x[/red`), we keep them.
fn text_or(meta: &Meta, key: &str, default: &str) -> String {
    meta.raw(key)
        .map(str::to_string)
        .unwrap_or_else(|| default.to_string())
}

/// What in `meta` the read rules of docs §8.3 could not use, field by field:
/// a value present but unreadable (an unknown `type` or `compression_level`,
/// a timestamp, score or count that does not parse, `keywords` that are not
/// a list, an `id` that is not 6 characters) and lines that are not
/// `key: value`. The entry still loads with the default named in each
/// message. The original applies the same defaults silently; these are
/// shown to the user. Missing or empty fields are not problems.
pub fn frontmatter_problems(meta: &Meta) -> Vec<String> {
    let mut out = Vec::new();
    // A present, non-empty value, as written.
    let given = |key: &str| meta.raw(key).map(str::trim).filter(|v| !v.is_empty());
    if let Some(t) = given("type")
        && MemoryType::parse(t).is_none()
    {
        out.push(format!(
            "type '{t}' is not one of user, feedback, project, reference"
        ));
    }
    for key in ["created_at", "updated_at", "last_accessed"] {
        if let Some(v) = given(key)
            && parse_ts(v).is_none()
        {
            out.push(format!(
                "{key} '{v}' is not a date (the file's time is used)"
            ));
        }
    }
    if let Some(v) = given("quality_score")
        && !v.parse::<f64>().is_ok_and(f64::is_finite)
    {
        out.push(format!("quality_score '{v}' is not a number (0.5 is used)"));
    }
    if let Some(v) = given("access_count")
        && v.parse::<i64>().is_err()
    {
        out.push(format!(
            "access_count '{v}' is not a whole number (0 is used)"
        ));
    }
    if let Some(v) = given("compression_level")
        && Level::parse(v).is_none()
    {
        out.push(format!("compression_level '{v}' is unknown (raw is used)"));
    }
    if let Some(v) = given("keywords")
        && !matches!(meta.get("keywords"), Some(FmValue::List(_)))
    {
        out.push(format!("keywords '{v}' is not a [list] (ignored)"));
    }
    if let Some(v) = given("id")
        && v.chars().count() != 6
    {
        out.push(format!(
            "id '{v}' is not 6 characters (a new one is derived)"
        ));
    }
    if let Some(v) = given("origin")
        && Origin::parse(v).is_none()
    {
        out.push(format!("origin '{v}' is not user or model (model is used)"));
    }
    if let Some(v) = given("confirmed")
        && parse_bool(v).is_none()
    {
        out.push(format!(
            "confirmed '{v}' is not true or false (false is used)"
        ));
    }
    for line in meta.malformed() {
        out.push(format!("line '{line}' is not 'key: value' (ignored)"));
    }
    out
}

/// One line for the user about memory files with problems: how many, the
/// first one as an example, and the folder to fix them in. `problems` holds
/// (file, what is wrong) per file; `None` when it is empty.
pub fn problems_notice(problems: &[(&str, &str)], entries_dir: &Path) -> Option<String> {
    let (file, problem) = problems.first()?;
    Some(format!(
        "{} memory file(s) have problems, e.g. {file}: {problem}; fix them in {}",
        problems.len(),
        entries_dir.display()
    ))
}

/// [`problems_notice`] for entries as read.
pub fn entries_notice(entries: &[Entry], entries_dir: &Path) -> Option<String> {
    let joined: Vec<(&str, String)> = entries
        .iter()
        .filter(|e| !e.problems.is_empty())
        .map(|e| (e.file.as_str(), e.problems.join("; ")))
        .collect();
    let pairs: Vec<(&str, &str)> = joined.iter().map(|(f, p)| (*f, p.as_str())).collect();
    problems_notice(&pairs, entries_dir)
}

/// Parses an entry file by the read rules of docs §8.3: fields coerced and
/// clamped, missing ones defaulted, timestamps falling back to the file's
/// modification time, naive timestamps read as UTC.
pub fn parse_entry(path: &Path, text: &str, modified: DateTime<Utc>, size: u64) -> Entry {
    let (meta, body) = frontmatter::parse(text);
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = file.strip_suffix(".md").unwrap_or(&file).to_string();
    let title = meta
        .raw("name")
        .map(str::to_string)
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| stem.clone());
    let keywords = match meta.get("keywords") {
        Some(FmValue::List(items)) => items
            .iter()
            .take(5)
            .map(|k| cut_chars(k, 30).to_string())
            .collect(),
        _ => Vec::new(),
    };
    let related = match meta.get("related_memories") {
        Some(FmValue::List(items)) => items.iter().filter(|r| is_hex6(r)).cloned().collect(),
        _ => Vec::new(),
    };
    let quality = meta
        .text("quality_score")
        .and_then(|q| q.trim().parse::<f64>().ok())
        .filter(|q| q.is_finite())
        .map(|q| q.clamp(0.0, 1.0))
        .unwrap_or(0.5);
    let access_count = meta
        .text("access_count")
        .and_then(|a| a.trim().parse::<i64>().ok())
        .map(|a| a.max(0) as u64)
        .unwrap_or(0);
    let id = meta
        .text("id")
        .filter(|i| i.chars().count() == 6)
        .unwrap_or_else(|| short_id(&format!("{title}{}", modified.timestamp())));
    let ts = |key: &str| {
        meta.text(key)
            .and_then(|v| parse_ts(&v))
            .unwrap_or(modified)
    };
    let level = meta
        .text("compression_level")
        .and_then(|l| Level::parse(&l))
        .unwrap_or(Level::Raw);
    let problems = frontmatter_problems(&meta);
    let source = meta.raw("source").and_then(clean_source);
    let (origin, confirmed) = origin_of(&meta);
    Entry {
        source,
        origin,
        confirmed,
        path: path.to_path_buf(),
        description: text_or(&meta, "description", ""),
        memory_type: meta
            .text("type")
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "project".into()),
        id,
        created_at: ts("created_at"),
        updated_at: ts("updated_at"),
        last_accessed: ts("last_accessed"),
        keywords,
        quality,
        access_count,
        related,
        category: text_or(&meta, "category", ""),
        level,
        retention: meta
            .text("compression_retention")
            .and_then(|r| r.trim().parse().ok()),
        body,
        modified,
        size,
        title,
        file,
        problems,
    }
}

/// `origin` and `confirmed` by the read rules of docs §8.3: no `origin` is
/// the user's (files from before the field); an unreadable one is the
/// model's, unconfirmed, so a damaged mark never promotes a memory.
fn origin_of(meta: &Meta) -> (Origin, bool) {
    let given = |key: &str| meta.raw(key).map(str::trim).filter(|v| !v.is_empty());
    let origin = match given("origin") {
        None => Origin::User,
        Some(v) => Origin::parse(v).unwrap_or(Origin::Model),
    };
    let confirmed = match given("confirmed") {
        None => origin == Origin::User,
        Some(v) => parse_bool(v).unwrap_or(false),
    };
    (origin, confirmed)
}

/// Reads and parses one entry file.
pub fn read_entry(path: &Path) -> std::io::Result<Entry> {
    let bytes = std::fs::read(path)?;
    let meta = std::fs::metadata(path)?;
    let modified = meta
        .modified()
        .map(DateTime::<Utc>::from)
        .unwrap_or_else(|_| Utc::now());
    Ok(parse_entry(
        path,
        &String::from_utf8_lossy(&bytes),
        modified,
        meta.len(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        parse_ts(s).unwrap()
    }

    #[test]
    fn unreadable_frontmatter_values_are_named_and_defaulted() {
        let text = "---\nname: Odd\ntype: : : bogus\nid: abc\ncreated_at: yesterday\n\
                    quality_score: lots\naccess_count: -2.5\ncompression_level: weekly\n\
                    keywords: fees\nstray line\n---\nbody";
        let modified = at("2026-01-02T03:04:05Z");
        let e = parse_entry(Path::new("/m/project_odd.md"), text, modified, 1);
        // The entry loads with the read rules' defaults.
        assert_eq!(e.title, "Odd");
        assert_eq!(e.memory_type, ": : bogus");
        assert_eq!(
            (e.created_at, e.quality, e.access_count),
            (modified, 0.5, 0)
        );
        assert_eq!((e.level, e.keywords.len(), e.id.len()), (Level::Raw, 0, 6));
        assert_eq!(
            e.problems,
            [
                "type ': : bogus' is not one of user, feedback, project, reference",
                "created_at 'yesterday' is not a date (the file's time is used)",
                "quality_score 'lots' is not a number (0.5 is used)",
                "access_count '-2.5' is not a whole number (0 is used)",
                "compression_level 'weekly' is unknown (raw is used)",
                "keywords 'fees' is not a [list] (ignored)",
                "id 'abc' is not 6 characters (a new one is derived)",
                "line 'stray line' is not 'key: value' (ignored)",
            ]
        );
        let notice = entries_notice(std::slice::from_ref(&e), Path::new("/m")).unwrap();
        assert!(
            notice.starts_with(
                "1 memory file(s) have problems, e.g. project_odd.md: type ': : bogus'"
            ),
            "{notice}"
        );
        assert!(notice.ends_with("fix them in /m"), "{notice}");
    }

    #[test]
    fn origin_and_confirmed_read_leniently() {
        let read = |fm: &str| {
            let text = format!("---\nname: T\n{fm}---\nb");
            parse_entry(Path::new("project_t.md"), &text, Utc::now(), 1)
        };
        // A file from before the field is the user's own.
        let old = read("");
        assert_eq!(
            (old.origin, old.confirmed, old.is_unconfirmed()),
            (Origin::User, true, false)
        );
        assert!(old.problems.is_empty());
        let model = read("origin: model\nconfirmed: false\n");
        assert!(model.is_unconfirmed() && model.problems.is_empty());
        let kept = read("origin: model\nconfirmed: true\n");
        assert_eq!((kept.origin, kept.is_unconfirmed()), (Origin::Model, false));
        // No `confirmed` on the model's: unconfirmed.
        assert!(read("origin: model\n").is_unconfirmed());
        // Damaged marks never promote a memory, and are named.
        let odd = read("origin: robot\nconfirmed: yes\n");
        assert!(odd.is_unconfirmed());
        assert_eq!(
            odd.problems,
            [
                "origin 'robot' is not user or model (model is used)",
                "confirmed 'yes' is not true or false (false is used)"
            ]
        );
    }

    #[test]
    fn the_models_memory_is_rendered_with_its_origin_and_the_users_without() {
        let mut stamp = Stamp {
            id: "a1b2c3".into(),
            created_at: at("2026-01-02T03:04:05Z"),
            updated_at: at("2026-01-02T03:04:05Z"),
            last_accessed: at("2026-01-02T03:04:05Z"),
            quality: 0.5,
            access_count: 0,
            importance: 0.5,
            related: Vec::new(),
            source: None,
            origin: Origin::User,
            confirmed: true,
        };
        let users = render("T", "d", MemoryType::Project, &[], &stamp, "b");
        assert!(!users.contains("origin:") && !users.contains("confirmed:"));
        stamp.origin = Origin::Model;
        stamp.confirmed = false;
        let models = render("T", "d", MemoryType::Project, &[], &stamp, "b");
        assert!(
            models.contains("\norigin: model\nconfirmed: false\n---\n"),
            "{models}"
        );
        let e = parse_entry(Path::new("project_t.md"), &models, Utc::now(), 1);
        assert!(e.is_unconfirmed() && e.problems.is_empty());
    }

    #[test]
    fn clean_missing_and_empty_values_are_no_problem() {
        let stamp = Stamp {
            id: "a1b2c3".into(),
            created_at: at("2026-01-02T03:04:05Z"),
            updated_at: at("2026-01-02T03:04:05Z"),
            last_accessed: at("2026-01-02T03:04:05Z"),
            quality: 0.5,
            access_count: 3,
            importance: 0.5,
            related: Vec::new(),
            source: None,
            origin: Origin::User,
            confirmed: true,
        };
        let written = render("T", "d", MemoryType::User, &["k".into()], &stamp, "b");
        let e = parse_entry(Path::new("user_t.md"), &written, Utc::now(), 1);
        assert!(e.problems.is_empty(), "{:?}", e.problems);
        let sparse = "---\nname: T\ntype:\ncreated_at:\n---\nb";
        let e = parse_entry(Path::new("t.md"), sparse, Utc::now(), 1);
        assert!(e.problems.is_empty(), "{:?}", e.problems);
        assert_eq!(e.memory_type, "project");
        assert!(entries_notice(&[e], Path::new("/m")).is_none());
    }

    #[test]
    fn timestamps_are_utc_with_a_zone_and_parsed_as_written() {
        let t = at("2026-01-02T03:04:05Z");
        assert_eq!(format_ts(t), "2026-01-02T03:04:05Z");
        // Naive values (the original's format) are UTC, never local time.
        assert_eq!(at("2026-01-02T03:04:05"), t);
        assert_eq!(at("2026-01-02T05:04:05+02:00"), t);
        assert_eq!(at("2026-01-02 03:04:05.250").timestamp(), t.timestamp());
        assert_eq!(format_ts(at("2026-01-02")), "2026-01-02T00:00:00Z");
        assert!(parse_ts("yesterday").is_none());
    }

    #[test]
    fn pm02_pm05_pm06_slugs() {
        assert!(file_name(MemoryType::User, "My Fancy Skill!").contains("my_fancy_skill_"));
        assert_eq!(
            file_name(MemoryType::Project, "overwrite"),
            "project_overwrite.md"
        );
        // Non-Latin titles keep their characters; equal-length titles differ.
        let a = slug("上证指数");
        let b = slug("深证成指");
        assert!(a.starts_with("上证指数") && a != b);
        let t1 = slug("ตลาดหุ้น");
        let t2 = slug("ราคาทอง");
        assert!(t1.starts_with("ตลาดหุ้น") && t1 != t2);
        assert_ne!(slug("🚀"), slug("🎯"));
        assert_eq!(slug("🚀"), slug("🚀"));
        assert_ne!(file_name(MemoryType::User, "???"), "user_.md");
    }

    #[test]
    fn slugs_never_collide_where_the_original_did() {
        // Persian letters outside the original's Arabic range, kana with a
        // shared ticker, Hangul, full-width punctuation, long common prefixes.
        let pairs = [
            ("پول", "چول"),
            ("トヨタ 7203", "ソニー 7203"),
            ("삼성전자", "현대차"),
            ("茅台，买入", "茅台。买入"),
            ("a b", "a_b"),
            ("AAPL", "aapl"),
        ];
        for (x, y) in pairs {
            assert_ne!(slug(x), slug(y), "{x} vs {y}");
        }
        let long_a = format!("{}{}", "市场".repeat(40), "甲");
        let long_b = format!("{}{}", "市场".repeat(40), "乙");
        assert_ne!(slug(&long_a), slug(&long_b));
        let huge = "𠀀".repeat(100);
        assert!(file_name(MemoryType::Reference, &huge).len() < 255);
    }

    #[test]
    fn pm08_body_cleaning() {
        let dirty = "ok\u{1b}[31mred\u{0}\u{7}\u{85}\tTab\nLine";
        assert_eq!(sanitize_body(dirty), "ok[31mred\tTab\nLine");
        let long = "x".repeat(8_100);
        let t = truncate_body(&long, MAX_ENTRY_CHARS);
        assert!(t.ends_with("chars]\n") && t.contains("[truncated at 8000"));
        assert!(t.chars().count() <= 8_000);
        assert!(t.starts_with(&"x".repeat(7_900)));
        let exact = "y".repeat(8_000);
        assert_eq!(truncate_body(&exact, MAX_ENTRY_CHARS), exact);
        let t = truncate_body(&long, 100);
        assert!(t.contains("[truncated at 100 chars]") && t.chars().count() == 100);
    }

    #[test]
    fn pm12_legacy_and_coercion() {
        let now = at("2026-03-01T00:00:00Z");
        let e = parse_entry(
            Path::new("/m/project_old.md"),
            "---\nname: Old\ndescription: legacy\ntype: project\n---\n\nbody",
            now,
            10,
        );
        assert_eq!((e.quality, e.access_count), (0.5, 0));
        assert!(e.keywords.is_empty() && e.related.is_empty());
        assert_eq!(e.id.len(), 6);
        assert_eq!(e.created_at, now);
        assert_eq!(e.level, Level::Raw);
        let parse = |fm: &str| {
            parse_entry(
                Path::new("/m/x.md"),
                &format!("---\nname: X\n{fm}\n---\nb"),
                now,
                1,
            )
        };
        assert_eq!(parse("quality_score: 2.5").quality, 1.0);
        assert_eq!(parse("quality_score: -0.5").quality, 0.0);
        assert_eq!(parse("access_count: abc").access_count, 0);
        assert_eq!(parse("keywords: [a, b, c, d, e, f, g]").keywords.len(), 5);
        assert_eq!(
            parse("related_memories: [ab12cd, too_long_id, 0a33ff, x, ok33ff]").related,
            vec!["ab12cd", "0a33ff"]
        );
        assert_eq!(
            parse("description: [red]inject[/red]").description,
            "[red]inject[/red]"
        );
        let nameless = parse_entry(Path::new("/m/user_stem.md"), "no frontmatter", now, 1);
        assert_eq!(nameless.title, "user_stem");
        assert_eq!(nameless.memory_type, "project");
    }

    #[test]
    fn pm13_importance() {
        assert_eq!(compute_importance(0.9, 3, 0.0, true), 1.0);
        assert!(compute_importance(0.2, 0, 30.0, true) < 0.15);
        let a = compute_importance(0.5, 100, 0.0, true);
        let b = compute_importance(0.5, 3, 0.0, true);
        assert!((a - 0.65).abs() < 1e-12 && (b - 0.65).abs() < 1e-12);
        assert!(compute_importance(1.0, 10, 0.0, true) <= 1.0);
        assert_eq!(compute_importance(0.0, 100, 0.0, true), 0.0);
        assert_eq!(compute_importance(0.7, 10, 100.0, false), 0.7);
    }

    #[test]
    fn pm15_content_hash() {
        let h = content_hash("Name", "Desc", "Body");
        assert_eq!(h.len(), 12);
        assert!(h.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(h, content_hash("  name ", "DESC", "body\n"));
        assert_ne!(h, content_hash("Name", "Desc", "Other body"));
    }

    #[test]
    fn render_round_trips() {
        let now = at("2026-05-06T07:08:09Z");
        let stamp = Stamp {
            id: "abc123".into(),
            created_at: now,
            updated_at: now,
            last_accessed: now,
            quality: 0.5,
            access_count: 0,
            importance: 0.5,
            related: vec!["ab12cd".into(), "0a33ff".into()],
            source: None,
            origin: Origin::User,
            confirmed: true,
        };
        let text = render(
            "T",
            "D",
            MemoryType::Feedback,
            &["k1".into(), "k2".into()],
            &stamp,
            "Body",
        );
        assert!(text.starts_with("---\nname: T\ndescription: D\ntype: feedback\n"));
        assert!(text.contains("quality_score: 0.5\n") && text.contains("keywords: [k1, k2]\n"));
        let e = parse_entry(Path::new("/m/feedback_t.md"), &text, Utc::now(), 1);
        assert_eq!(
            (
                e.title.as_str(),
                e.description.as_str(),
                e.memory_type.as_str()
            ),
            ("T", "D", "feedback")
        );
        assert_eq!((e.created_at, e.last_accessed), (now, now));
        assert_eq!(e.keywords, vec!["k1", "k2"]);
        assert_eq!(e.related, vec!["ab12cd", "0a33ff"]);
        assert_eq!(e.body, "Body");
        assert_eq!(format_score(0.57), "0.57");
        assert_eq!(format_score(0.6), "0.6");
        assert_eq!(format_score(1.0), "1.0");
        // An entry without a source is written as before; one with a source
        // keeps it, cleaned to one line.
        assert!(!text.contains("source:"));
        assert_eq!(e.source, None);
        let stamp = Stamp {
            source: clean_source("mcp:claude\ncode"),
            ..stamp
        };
        let text = render("T", "D", MemoryType::Project, &[], &stamp, "Body");
        assert!(text.contains("compression_level: raw\nsource: mcp:claude code\n---\n"));
        let e = parse_entry(Path::new("/m/project_t.md"), &text, Utc::now(), 1);
        assert_eq!(e.source.as_deref(), Some("mcp:claude code"));
        assert!(e.is_external() && e.problems.is_empty());
    }
}
