//! Skills (docs §4.6, §9.1–§9.2): markdown guides the agent loads on demand.
//!
//! A skill is a directory with a `SKILL.md` (frontmatter `name`,
//! `description`, `category`, then a markdown body). User skills live in
//! `<data>/skills/<name>/SKILL.md` and are scanned first, so they override
//! the built-ins (shipped in `assets/skills/`, compiled into the binary) by
//! name. The system prompt lists one line per skill; `load_skill` returns the
//! body, paged, by outline or by section ([`load_skill_page`]).

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value, json};

use super::frontmatter;

/// Built-in skills: (directory name, SKILL.md), sorted by directory name.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "backtest-design",
        include_str!("../../assets/skills/backtest-design/SKILL.md"),
    ),
    (
        "benchmark-comparison",
        include_str!("../../assets/skills/benchmark-comparison/SKILL.md"),
    ),
    (
        "data-hygiene",
        include_str!("../../assets/skills/data-hygiene/SKILL.md"),
    ),
    (
        "factor-research",
        include_str!("../../assets/skills/factor-research/SKILL.md"),
    ),
    (
        "market-data",
        include_str!("../../assets/skills/market-data/SKILL.md"),
    ),
    (
        "metric-interpretation",
        include_str!("../../assets/skills/metric-interpretation/SKILL.md"),
    ),
    (
        "overfitting-checks",
        include_str!("../../assets/skills/overfitting-checks/SKILL.md"),
    ),
    (
        "quant-desk",
        include_str!("../../assets/skills/quant-desk/SKILL.md"),
    ),
    (
        "regime-analysis",
        include_str!("../../assets/skills/regime-analysis/SKILL.md"),
    ),
    (
        "report-writing",
        include_str!("../../assets/skills/report-writing/SKILL.md"),
    ),
    (
        "research-memory",
        include_str!("../../assets/skills/research-memory/SKILL.md"),
    ),
    (
        "risk-review",
        include_str!("../../assets/skills/risk-review/SKILL.md"),
    ),
    (
        "signal-rules",
        include_str!("../../assets/skills/signal-rules/SKILL.md"),
    ),
    (
        "technical-indicators",
        include_str!("../../assets/skills/technical-indicators/SKILL.md"),
    ),
    (
        "time-series-tests",
        include_str!("../../assets/skills/time-series-tests/SKILL.md"),
    ),
    (
        "transaction-costs",
        include_str!("../../assets/skills/transaction-costs/SKILL.md"),
    ),
    (
        "walk-forward-validation",
        include_str!("../../assets/skills/walk-forward-validation/SKILL.md"),
    ),
];

/// One loaded skill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub category: String,
    pub body: String,
    /// The skill's directory, for user (and on-disk bundled) skills.
    pub dir: Option<PathBuf>,
    pub builtin: bool,
}

/// Parses one `SKILL.md`; `None` when its name comes out empty.
fn parse_skill(dir_name: &str, text: &str, dir: Option<PathBuf>, builtin: bool) -> Option<Skill> {
    let (meta, body) = frontmatter::parse(text);
    let name = meta.text("name").unwrap_or_else(|| dir_name.to_string());
    if name.trim().is_empty() {
        return None;
    }
    Some(Skill {
        name,
        description: meta.text("description").unwrap_or_default(),
        category: meta.text("category").unwrap_or_else(|| "other".into()),
        body,
        dir,
        builtin,
    })
}

fn load_skill_dir(dir: &Path) -> Option<Skill> {
    let text = std::fs::read_to_string(dir.join("SKILL.md")).ok()?;
    let dir_name = dir.file_name()?.to_string_lossy().into_owned();
    parse_skill(&dir_name, &text, Some(dir.to_path_buf()), false)
}

/// Skills of one directory: sub-directories in sorted order that hold a `SKILL.md`.
fn scan_dir(dir: &Path) -> Vec<Skill> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && p.join("SKILL.md").is_file())
        .collect();
    dirs.sort();
    dirs.iter().filter_map(|d| load_skill_dir(d)).collect()
}

/// The skills of one run (re-read per run, docs §4.1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SkillSet {
    skills: Vec<Skill>,
    user_dir: Option<PathBuf>,
}

impl SkillSet {
    /// User skills from `user_dir` (if any), then the built-ins.
    pub fn load(user_dir: Option<&Path>) -> Self {
        Self::load_from(user_dir, None, true)
    }

    /// User skills, then an on-disk bundled directory, then (if `builtins`)
    /// the compiled-in set; the first skill of a name wins.
    pub fn load_from(user_dir: Option<&Path>, bundled_dir: Option<&Path>, builtins: bool) -> Self {
        let mut skills: Vec<Skill> = Vec::new();
        let push = |s: Skill, skills: &mut Vec<Skill>| {
            if !skills.iter().any(|k| k.name == s.name) {
                skills.push(s);
            }
        };
        if let Some(u) = user_dir {
            for s in scan_dir(u) {
                push(s, &mut skills);
            }
        }
        if let Some(b) = bundled_dir {
            for s in scan_dir(b) {
                push(s, &mut skills);
            }
        }
        if builtins {
            for (dir, text) in BUILTIN {
                if let Some(s) = parse_skill(dir, text, None, true) {
                    push(s, &mut skills);
                }
            }
        }
        SkillSet {
            skills,
            user_dir: user_dir.map(Path::to_path_buf),
        }
    }

    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    pub fn len(&self) -> usize {
        self.skills.len()
    }

    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    pub fn names(&self) -> Vec<&str> {
        self.skills.iter().map(|s| s.name.as_str()).collect()
    }

    /// A skill by name; a user skill created after loading is found on disk
    /// (`<user_dir>/<name>/SKILL.md`, docs §4.6).
    pub fn get(&self, name: &str) -> Option<Skill> {
        if let Some(s) = self.skills.iter().find(|s| s.name == name) {
            return Some(s.clone());
        }
        let user = self.user_dir.as_ref()?;
        // A name is one path component: never read outside the user dir.
        if name.is_empty() || name.contains(['/', '\\']) || name == "." || name == ".." {
            return None;
        }
        load_skill_dir(&user.join(name))
    }

    /// `<skill name="…">\n<body>\n</skill>`, or the original's error text
    /// `Error: Unknown skill '<name>'. Available: a, b, …`.
    pub fn content(&self, name: &str) -> Result<String, SkillError> {
        match self.get(name) {
            Some(s) => Ok(format!("<skill name=\"{name}\">\n{}\n</skill>", s.body)),
            None => Err(SkillError::Unknown {
                name: name.to_string(),
                available: self.names().join(", "),
            }),
        }
    }
}

/// Why a skill (or a page of it) cannot be loaded: the messages the model
/// sees, in the original's `Error: …` form.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error("Error: Unknown skill '{name}'. Available: {available}")]
    Unknown { name: String, available: String },
    #[error("Error: skill '{name}' has no section '{section}'. Sections: {titles}")]
    NoSection {
        name: String,
        section: String,
        titles: String,
    },
    #[error(
        "Error: section '{section}' is ambiguous in skill '{name}' ({count} sections match). Re-request one of: {paths}"
    )]
    AmbiguousSection {
        name: String,
        section: String,
        count: usize,
        paths: String,
    },
    #[error("Error: offset {offset} is past the end of section '{section}' ({chars} characters)")]
    OffsetPastSection {
        offset: usize,
        section: String,
        chars: usize,
    },
    #[error("Error: offset {offset} is past the end of skill '{name}' ({chars} characters)")]
    OffsetPastSkill {
        offset: usize,
        name: String,
        chars: usize,
    },
}

impl SkillError {
    /// The tool result's `error_code`.
    pub fn code(&self) -> &'static str {
        match self {
            SkillError::Unknown { .. } => "unknown_skill",
            SkillError::NoSection { .. } | SkillError::AmbiguousSection { .. } => "unknown_section",
            SkillError::OffsetPastSection { .. } | SkillError::OffsetPastSkill { .. } => {
                "invalid_offset"
            }
        }
    }
}

// ----- sections ------------------------------------------------------------

/// One heading-delimited span of a document; offsets are in characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub level: usize,
    pub title: String,
    pub start: usize,
    pub end: usize,
    pub summary: String,
}

impl Section {
    pub fn chars(&self) -> usize {
        self.end - self.start
    }
}

static HEADING: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^(#{1,6})[ \t]+(\S.*?)[ \t]*#*[ \t]*$").ok());
static FENCE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^[ \t]{0,3}(`{3,}|~{3,})").ok());

const SUMMARY_CHARS: usize = 110;

/// ATX headings outside fenced blocks; a section runs to the next heading of
/// the same or a shallower level; its summary is the first prose line under
/// the deepest just-opened heading (docs §9.2).
pub fn split_sections(document: &str) -> Vec<Section> {
    let (Some(heading_re), Some(fence_re)) = (HEADING.as_ref(), FENCE.as_ref()) else {
        return Vec::new();
    };
    let mut raw: Vec<Section> = Vec::new();
    let mut pending: Vec<usize> = Vec::new();
    let mut offset = 0usize;
    let mut fenced = false;
    for line in document.split_inclusive('\n') {
        let stripped = line.trim_end_matches(['\r', '\n']);
        if fence_re.is_match(stripped) {
            fenced = !fenced;
        } else if !fenced {
            if let Some(c) = heading_re.captures(stripped) {
                let level = c.get(1).map_or(1, |m| m.as_str().len());
                let title = c.get(2).map_or("", |m| m.as_str()).to_string();
                raw.push(Section {
                    level,
                    title,
                    start: offset,
                    end: 0,
                    summary: String::new(),
                });
                pending.push(raw.len() - 1);
            } else if !pending.is_empty() && !stripped.trim().is_empty() {
                let index = pending[pending.len() - 1];
                pending.clear();
                let mut summary = stripped
                    .trim()
                    .trim_start_matches(['-', '*', '>', '|', ' '])
                    .trim_matches(['*', '`'])
                    .trim()
                    .to_string();
                if summary.chars().count() > SUMMARY_CHARS {
                    let cut: String = summary.chars().take(SUMMARY_CHARS - 1).collect();
                    summary = format!("{}…", cut.trim_end());
                }
                raw[index].summary = summary;
            }
        }
        offset += line.chars().count();
    }
    let total = document.chars().count();
    let levels: Vec<(usize, usize)> = raw.iter().map(|s| (s.level, s.start)).collect();
    for (i, s) in raw.iter_mut().enumerate() {
        s.end = levels[i + 1..]
            .iter()
            .find(|(l, _)| *l <= s.level)
            .map_or(total, |(_, start)| *start);
    }
    raw
}

fn normalize_title(title: &str) -> String {
    title
        .replace('#', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Titles of the headings enclosing `sections[index]`, outermost first.
pub fn ancestor_titles(sections: &[Section], index: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut level = sections[index].level;
    for s in sections[..index].iter().rev() {
        if s.level < level {
            out.push(s.title.clone());
            level = s.level;
        }
    }
    out.reverse();
    out
}

/// `Parent > Child` address of one section.
pub fn qualified_path(sections: &[Section], index: usize) -> String {
    let mut parts = ancestor_titles(sections, index);
    parts.push(sections[index].title.clone());
    parts.join(" > ")
}

/// Indices of the sections matching `wanted` (a title or a `A > B` path):
/// exact (case/space/`#`-insensitive) title matches first, else prefix
/// matches; named ancestors must appear in order above the target.
pub fn find_sections(sections: &[Section], wanted: &str) -> Vec<usize> {
    let parts: Vec<&str> = wanted
        .split('>')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    let Some(last) = parts.last() else {
        return Vec::new();
    };
    let key = normalize_title(last);
    if key.is_empty() {
        return Vec::new();
    }
    let wanted_ancestors: Vec<String> = parts[..parts.len() - 1]
        .iter()
        .map(|p| normalize_title(p))
        .collect();
    let ancestors_match = |index: usize| {
        let mut remaining = wanted_ancestors.iter().peekable();
        for title in ancestor_titles(sections, index) {
            if let Some(next) = remaining.peek()
                && normalize_title(&title).starts_with(next.as_str())
            {
                remaining.next();
            }
        }
        remaining.peek().is_none()
    };
    for exact in [true, false] {
        let matches: Vec<usize> = sections
            .iter()
            .enumerate()
            .filter(|(i, s)| {
                let t = normalize_title(&s.title);
                (if exact { t == key } else { t.starts_with(&key) }) && ancestors_match(*i)
            })
            .map(|(i, _)| i)
            .collect();
        if !matches.is_empty() {
            return matches;
        }
    }
    Vec::new()
}

// ----- load_skill paging -----------------------------------------------------

/// Whole tool result cap (the scheduler's truncation limit).
pub const TOOL_RESULT_LIMIT: usize = 10_000;
const PAGE_CHARS: usize = TOOL_RESULT_LIMIT - 600;
const MIN_PAGE_CHARS: usize = 1_000;
const OUTLINE_CHARS: usize = 4_500;
const SUGGEST_SECTIONS: usize = 40;

fn char_slice(s: &str, start: usize, len: usize) -> &str {
    let from = s.char_indices().nth(start).map_or(s.len(), |(i, _)| i);
    let rest = &s[from..];
    let to = rest.char_indices().nth(len).map_or(rest.len(), |(i, _)| i);
    &rest[..to]
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Serialises `base` plus the page of `body` at `offset`, shrinking the page
/// until the whole envelope fits [`TOOL_RESULT_LIMIT`] characters (JSON
/// escaping makes the size content-dependent). Returns the envelope and
/// whether the page reached the end.
fn paged(base: &Map<String, Value>, body: &str, offset: usize, budget: usize) -> (String, bool) {
    let total = body.chars().count();
    let mut size = budget.max(MIN_PAGE_CHARS);
    loop {
        let page = char_slice(body, offset, size);
        let next = offset + page.chars().count();
        let complete = next >= total;
        let mut env = base.clone();
        env.insert("content".into(), Value::String(page.to_string()));
        env.insert("offset".into(), json!(offset));
        env.insert(
            "next_offset".into(),
            if complete { Value::Null } else { json!(next) },
        );
        env.insert("complete".into(), json!(complete));
        let text = Value::Object(env).to_string();
        let len = text.chars().count();
        if len <= TOOL_RESULT_LIMIT || size <= MIN_PAGE_CHARS {
            return (text, complete);
        }
        size = ((size as f64 * TOOL_RESULT_LIMIT as f64 / len as f64) as usize)
            .saturating_sub(64)
            .max(MIN_PAGE_CHARS);
    }
}

fn render_outline(name: &str, sections: &[Section], total: usize) -> String {
    let header = format!(
        "{} sections, {} characters total. Only the opening text is in `content`.\nCall load_skill(name='{name}', section=\"<copy a label below verbatim>\") to pull one section in full, or load_skill(name='{name}', offset=<next_offset>) to keep reading straight through.\nSizes include nested subsections.",
        sections.len(),
        thousands(total)
    );
    let count = |t: &str| sections.iter().filter(|s| s.title == t).count();
    let labels: Vec<String> = (0..sections.len())
        .map(|i| {
            if count(&sections[i].title) > 1 {
                qualified_path(sections, i)
            } else {
                sections[i].title.clone()
            }
        })
        .collect();
    let mut text = String::new();
    for (with_summary, max_level) in [(true, 6), (false, 6), (false, 2)] {
        let mut lines = vec![header.clone()];
        for (s, label) in sections.iter().zip(&labels) {
            if s.level > max_level {
                continue;
            }
            let mut line = format!(
                "{}- {label} ({} chars)",
                "  ".repeat(s.level - 1),
                thousands(s.chars())
            );
            if with_summary && !s.summary.is_empty() {
                line.push_str(&format!(" — {}", s.summary));
            }
            lines.push(line);
        }
        text = lines.join("\n");
        if text.chars().count() <= OUTLINE_CHARS {
            return text;
        }
    }
    let cut: String = text.chars().take(OUTLINE_CHARS - 40).collect();
    format!("{}\n… outline truncated.", cut.trim_end())
}

/// The `load_skill` tool's answer (docs §4.6): a JSON envelope with `mode`
/// `document`, `outline` or `section`, always with `offset`, `next_offset`
/// and `complete`, at most [`TOOL_RESULT_LIMIT`] characters. `offset` is in
/// characters, `None` when the caller gave none. Errors are the messages
/// the model sees (`Error: …`).
pub fn load_skill_page(
    skills: &SkillSet,
    name: &str,
    section: Option<&str>,
    offset: Option<usize>,
) -> Result<String, SkillError> {
    let content = skills.content(name)?;
    let start = offset.unwrap_or(0);
    let total = content.chars().count();
    let section_name = section.map(str::trim).unwrap_or("");
    if !section_name.is_empty() {
        let sections = split_sections(&content);
        let matches = find_sections(&sections, section_name);
        if matches.is_empty() {
            let titles: Vec<String> = sections
                .iter()
                .take(SUGGEST_SECTIONS)
                .map(|s| format!("'{}'", s.title))
                .collect();
            return Err(SkillError::NoSection {
                name: name.to_string(),
                section: section_name.to_string(),
                titles: if titles.is_empty() {
                    "(none — this document has no headings)".to_string()
                } else {
                    titles.join(", ")
                },
            });
        }
        if matches.len() > 1 {
            let paths: Vec<String> = matches
                .iter()
                .take(SUGGEST_SECTIONS)
                .map(|i| format!("'{}'", qualified_path(&sections, *i)))
                .collect();
            return Err(SkillError::AmbiguousSection {
                name: name.to_string(),
                section: section_name.to_string(),
                count: matches.len(),
                paths: paths.join(", "),
            });
        }
        let s = &sections[matches[0]];
        let body = char_slice(&content, s.start, s.chars());
        let body_len = body.chars().count();
        if start >= body_len {
            return Err(SkillError::OffsetPastSection {
                offset: start,
                section: s.title.clone(),
                chars: body_len,
            });
        }
        let mut base = Map::new();
        base.insert("status".into(), json!("ok"));
        base.insert("mode".into(), json!("section"));
        base.insert("section".into(), json!(s.title));
        base.insert("section_start".into(), json!(s.start));
        base.insert("total_chars".into(), json!(body_len));
        base.insert("document_chars".into(), json!(total));
        return Ok(paged(&base, body, start, PAGE_CHARS).0);
    }
    if start >= total && total > 0 {
        return Err(SkillError::OffsetPastSkill {
            offset: start,
            name: name.to_string(),
            chars: total,
        });
    }
    let mut base = Map::new();
    base.insert("status".into(), json!("ok"));
    base.insert("mode".into(), json!("document"));
    base.insert("total_chars".into(), json!(total));
    let (document, complete) = paged(&base, &content, start, PAGE_CHARS);
    // A first read that cannot carry the whole document answers with the
    // heading map plus the opening text; an explicit offset means the
    // caller is paging deliberately.
    if complete || offset.is_some() {
        return Ok(document);
    }
    let sections = split_sections(&content);
    if sections.is_empty() {
        return Ok(document);
    }
    let outline = render_outline(name, &sections, total);
    let mut base = Map::new();
    base.insert("status".into(), json!("ok"));
    base.insert("mode".into(), json!("outline"));
    base.insert("total_chars".into(), json!(total));
    base.insert("section_count".into(), json!(sections.len()));
    let outline_len = outline.chars().count();
    base.insert("outline".into(), json!(outline));
    Ok(paged(
        &base,
        &content,
        0,
        PAGE_CHARS.saturating_sub(outline_len).max(MIN_PAGE_CHARS),
    )
    .0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_skill(root: &Path, dir: &str, fm: &str, body: &str) {
        let d = root.join(dir);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("SKILL.md"), format!("---\n{fm}\n---\n{body}")).unwrap();
    }

    // SK-2, case by case.
    #[test]
    fn sk2_loader() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write_skill(
            root,
            "alpha",
            "name: alpha\ndescription: A\ncategory: strategy",
            "Alpha body",
        );
        write_skill(
            root,
            "beta",
            "name: beta\ndescription: B\ncategory: data-source",
            "Beta body",
        );
        write_skill(root, "gamma", "description: G", "Gamma body");
        std::fs::create_dir_all(root.join("no-skill-file")).unwrap();
        let set = SkillSet::load_from(None, Some(root), false);
        assert_eq!(set.len(), 3);
        let cats: Vec<&str> = set.skills().iter().map(|s| s.category.as_str()).collect();
        assert_eq!(cats, vec!["strategy", "data-source", "other"]);
        assert_eq!(
            set.content("alpha").unwrap(),
            "<skill name=\"alpha\">\nAlpha body\n</skill>"
        );
        let err = set.content("nope").unwrap_err().to_string();
        assert!(err.contains("Error") && err.contains("nope"));
        let empty = SkillSet::load_from(Some(&root.join("missing")), None, false);
        assert!(empty.is_empty());
    }

    #[test]
    fn user_skills_override_builtins_and_are_found_mid_session() {
        let tmp = tempfile::tempdir().unwrap();
        write_skill(
            tmp.path(),
            "data-hygiene",
            "name: data-hygiene\ndescription: mine\ncategory: data-source",
            "Mine",
        );
        let set = SkillSet::load(Some(tmp.path()));
        assert_eq!(set.len(), BUILTIN.len());
        let s = set.get("data-hygiene").unwrap();
        assert_eq!((s.description.as_str(), s.builtin), ("mine", false));
        write_skill(
            tmp.path(),
            "late",
            "name: late\ndescription: L",
            "Late body",
        );
        assert!(set.content("late").unwrap().contains("Late body"));
        assert!(set.get("../etc").is_none());
    }

    #[test]
    fn builtins_are_well_formed() {
        let set = SkillSet::load(None);
        assert!(set.len() >= 12, "{}", set.len());
        for (dir, _) in BUILTIN {
            let s = set.get(dir).unwrap_or_else(|| panic!("{dir} did not load"));
            assert_eq!(s.name, *dir, "frontmatter name must match the directory");
            assert!(
                !s.description.is_empty() && s.description.len() < 200,
                "{dir}"
            );
            assert!(s.category != "other", "{dir} has no category");
            let secs = split_sections(&s.body);
            assert!(secs.len() >= 3, "{dir} needs sections");
        }
    }

    #[test]
    fn sections_and_lookup() {
        let doc = "# Top\nintro line\n## Mode 1\n### Workflow\nfirst\n## Mode 2\n### Workflow\nsecond\n```\n# not a heading\n```\n## Other ##\ntext\n";
        let s = split_sections(doc);
        let titles: Vec<&str> = s.iter().map(|x| x.title.as_str()).collect();
        assert_eq!(
            titles,
            vec!["Top", "Mode 1", "Workflow", "Mode 2", "Workflow", "Other"]
        );
        assert_eq!(s[0].summary, "intro line");
        assert_eq!(s[0].end, doc.chars().count());
        assert_eq!(find_sections(&s, "workflow").len(), 2);
        assert_eq!(find_sections(&s, "Mode 2 > Workflow"), vec![4]);
        assert_eq!(find_sections(&s, "mode"), vec![1, 3]);
        assert_eq!(find_sections(&s, "## OTHER"), vec![5]);
        assert_eq!(qualified_path(&s, 2), "Top > Mode 1 > Workflow");
    }

    fn envelope(set: &SkillSet, name: &str, section: Option<&str>, offset: Option<usize>) -> Value {
        let text = load_skill_page(set, name, section, offset).unwrap();
        assert!(
            text.chars().count() <= TOOL_RESULT_LIMIT,
            "{} chars",
            text.chars().count()
        );
        serde_json::from_str(&text).unwrap()
    }

    // SK-3, case by case.
    #[test]
    fn sk3_paging() {
        let tmp = tempfile::tempdir().unwrap();
        let mut long = String::new();
        for i in 0..40 {
            long.push_str(&format!("## Part {i}\n"));
            for j in 0..12 {
                long.push_str(&format!(
                    "Line {j} of part {i}: \"quoted\" text\twith escapes and ünïcode 市场.\n"
                ));
            }
        }
        write_skill(tmp.path(), "long", "name: long\ndescription: L", &long);
        write_skill(
            tmp.path(),
            "short",
            "name: short\ndescription: S",
            "# Short\nsmall",
        );
        let set = SkillSet::load_from(Some(tmp.path()), None, true);

        let first = envelope(&set, "long", None, None);
        assert_eq!(first["mode"], "outline");
        assert_eq!(first["complete"], false);
        assert!(first["outline"].as_str().unwrap().contains("Part 39"));
        let short = envelope(&set, "short", None, None);
        assert_eq!(
            (short["mode"].as_str(), short["complete"].as_bool()),
            (Some("document"), Some(true))
        );
        assert!(
            load_skill_page(&set, "missing", None, None)
                .unwrap_err()
                .to_string()
                .contains("Unknown skill")
        );
        let total = first["total_chars"].as_u64().unwrap() as usize;
        assert!(
            load_skill_page(&set, "long", None, Some(total))
                .unwrap_err()
                .to_string()
                .contains("past the end")
        );
        let sec = envelope(&set, "long", Some("part 7"), None);
        assert_eq!(sec["mode"], "section");
        assert!(sec["content"].as_str().unwrap().starts_with("## Part 7\n"));
        assert!(
            load_skill_page(&set, "long", Some("Part 99"), None)
                .unwrap_err()
                .to_string()
                .contains("no section")
        );

        // Paging reconstructs every skill byte for byte, in a sane number of calls.
        for name in set.names() {
            let full = set.content(name).unwrap();
            let mut rebuilt = String::new();
            let mut offset = 0usize;
            let mut calls = 0;
            loop {
                let env = envelope(&set, name, None, Some(offset));
                rebuilt.push_str(env["content"].as_str().unwrap());
                calls += 1;
                match env["next_offset"].as_u64() {
                    Some(n) => offset = n as usize,
                    None => break,
                }
            }
            assert_eq!(rebuilt, full, "{name}");
            assert!(
                calls <= full.chars().count() / 1_000 + 1,
                "{name}: {calls} calls"
            );
        }
    }
}
