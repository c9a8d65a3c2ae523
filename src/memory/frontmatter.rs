//! The frontmatter mini-parser shared by memory entries and skills (docs §9.1),
//! and the textual field updates memory writes use (docs §8.5).
//!
//! A document has frontmatter only when its first line is `---` (trailing
//! spaces/tabs allowed, LF or CRLF) and a later line is a closing `---`; the
//! closing fence may end the file. Anything else is "no frontmatter" and the
//! whole text, stripped, is the body.

/// One frontmatter value: `[a, b]` lists, `true`/`false`, or a plain string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FmValue {
    Str(String),
    List(Vec<String>),
    Bool(bool),
}

impl FmValue {
    /// The value as display text: lists joined with `, `, booleans as
    /// `true`/`false` (how the original coerces frontmatter to strings).
    pub fn as_text(&self) -> String {
        match self {
            FmValue::Str(s) => s.clone(),
            FmValue::Bool(b) => b.to_string(),
            FmValue::List(items) => items.join(", "),
        }
    }
}

/// Parsed metadata, in first-seen key order; a repeated key keeps its first
/// position and its last value (a Python dict's behaviour).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    pairs: Vec<(String, FmValue)>,
    raw: Vec<(String, String)>,
    /// Non-blank lines that are not `key: value` (no colon, or no key): the
    /// original drops them silently; readers report them.
    malformed: Vec<String>,
}

impl Meta {
    pub fn get(&self, key: &str) -> Option<&FmValue> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The value as text, if present.
    pub fn text(&self, key: &str) -> Option<String> {
        self.get(key).map(FmValue::as_text)
    }

    /// The value exactly as written (stripped), before list/boolean parsing:
    /// a description such as `[red]inject[/red]` stays that text.
    pub fn raw(&self, key: &str) -> Option<&str> {
        self.raw
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &FmValue)> {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Lines of the block that were ignored because they are not `key: value`.
    pub fn malformed(&self) -> &[String] {
        &self.malformed
    }

    fn insert(&mut self, key: String, value: FmValue, raw: &str) {
        match self.raw.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = raw.to_string(),
            None => self.raw.push((key.clone(), raw.to_string())),
        }
        match self.pairs.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.pairs.push((key, value)),
        }
    }
}

/// True for a fence line: `---` plus optional spaces/tabs (the line ending
/// already removed, a trailing `\r` allowed).
fn is_fence(line: &str) -> bool {
    let line = line.strip_suffix('\r').unwrap_or(line);
    line.strip_prefix("---")
        .is_some_and(|rest| rest.chars().all(|c| c == ' ' || c == '\t'))
}

/// Splits `text` into (metadata, stripped body) per docs §9.1. Without valid
/// frontmatter the metadata is empty and the body is the stripped text.
pub fn parse(text: &str) -> (Meta, String) {
    match split(text) {
        Some((meta_text, body)) => (parse_meta(meta_text), body.trim().to_string()),
        None => (Meta::default(), text.trim().to_string()),
    }
}

/// The raw metadata block and the raw body, or `None` without frontmatter.
/// The closing fence must be a line of its own: `name: foo---` is not one.
pub fn split(text: &str) -> Option<(&str, &str)> {
    let first_end = text.find('\n')?;
    if !is_fence(&text[..first_end]) {
        return None;
    }
    let meta_start = first_end + 1;
    let mut pos = meta_start;
    loop {
        let (line_end, next) = match text[pos..].find('\n') {
            Some(i) => (pos + i, Some(pos + i + 1)),
            None => (text.len(), None),
        };
        if is_fence(&text[pos..line_end]) {
            let meta = &text[meta_start..pos];
            let body = next.map(|n| &text[n..]).unwrap_or("");
            return Some((meta, body));
        }
        pos = next?;
    }
}

fn parse_meta(block: &str) -> Meta {
    let mut meta = Meta::default();
    for line in block.trim().split('\n') {
        let line = line.trim();
        let Some((key, value)) = line.split_once(':').filter(|(k, _)| !k.trim().is_empty()) else {
            if !line.is_empty() {
                meta.malformed.push(line.to_string());
            }
            continue;
        };
        let key = key.trim().to_string();
        let value = value.trim();
        let parsed = if value.starts_with('[') && value.ends_with(']') && value.len() >= 2 {
            FmValue::List(
                value[1..value.len() - 1]
                    .split(',')
                    .map(|item| {
                        item.trim()
                            .trim_matches(|c| c == '\'' || c == '"')
                            .to_string()
                    })
                    .filter(|item| !item.is_empty())
                    .collect(),
            )
        } else if value.eq_ignore_ascii_case("true") {
            FmValue::Bool(true)
        } else if value.eq_ignore_ascii_case("false") {
            FmValue::Bool(false)
        } else {
            FmValue::Str(value.to_string())
        };
        meta.insert(key, parsed, value);
    }
    meta
}

/// Locates the frontmatter lines the way the original's field updater does
/// (first line and closing line equal `---` once stripped): returns the
/// lines and the closing line's index.
fn fence_lines(text: &str) -> Option<(Vec<&str>, usize)> {
    let lines: Vec<&str> = text.split('\n').collect();
    if lines.first().map(|l| l.trim()) != Some("---") {
        return None;
    }
    let end = lines.iter().skip(1).position(|l| l.trim() == "---")? + 1;
    Some((lines, end))
}

/// Sets `field: value` in the frontmatter, replacing the first line that
/// starts with `field:` or inserting one just before the closing fence
/// (docs §8.5). `None` when the text has no frontmatter.
pub fn set_field(text: &str, field: &str, value: &str) -> Option<String> {
    set_fields(text, &[(field, value)])
}

/// [`set_field`] for several fields at once.
pub fn set_fields(text: &str, fields: &[(&str, &str)]) -> Option<String> {
    let (lines, mut end) = fence_lines(text)?;
    let mut lines: Vec<String> = lines.into_iter().map(str::to_string).collect();
    for (field, value) in fields {
        let prefix = format!("{field}:");
        let new_line = format!("{field}: {value}");
        match (1..end).find(|i| lines[*i].starts_with(&prefix)) {
            Some(i) => lines[i] = new_line,
            None => {
                lines.insert(end, new_line);
                end += 1;
            }
        }
    }
    Some(lines.join("\n"))
}

/// Replaces the body: the frontmatter (with `fields` set as by
/// [`set_fields`]) then a blank line and `body`, the layout the original's
/// compression write-back produces (docs §8.6).
pub fn replace_body(text: &str, fields: &[(&str, &str)], body: &str) -> Option<String> {
    let updated = set_fields(text, fields)?;
    let (lines, end) = fence_lines(&updated)?;
    let mut out = lines[..=end].join("\n");
    out.push_str("\n\n");
    out.push_str(body);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> FmValue {
        FmValue::Str(v.into())
    }

    // SK-1, one assertion group per upstream case.
    #[test]
    fn sk1_basic_and_category() {
        let (m, body) =
            parse("---\nname: foo\ndescription: Does foo\ncategory: tool\n---\n\n# Foo\nbody\n");
        assert_eq!(m.get("name"), Some(&s("foo")));
        assert_eq!(m.get("description"), Some(&s("Does foo")));
        assert_eq!(m.get("category"), Some(&s("tool")));
        assert_eq!(body, "# Foo\nbody");
    }

    #[test]
    fn lines_that_are_not_key_value_are_kept_aside() {
        let (m, _) = parse("---\nname: a\njust words\n: no key\n\ntype: : : bogus\n---\n");
        assert_eq!(m.malformed(), ["just words", ": no key"]);
        assert_eq!(m.get("name"), Some(&s("a")));
        // Split at the first colon: the rest is the value, as written.
        assert_eq!(m.raw("type"), Some(": : bogus"));
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn sk1_booleans_and_lists() {
        let (m, _) = parse("---\na: true\nb: FALSE\nc: [x, 'y', \"z\", ]\nd: []\n---\n");
        assert_eq!(m.get("a"), Some(&FmValue::Bool(true)));
        assert_eq!(m.get("b"), Some(&FmValue::Bool(false)));
        assert_eq!(
            m.get("c"),
            Some(&FmValue::List(vec!["x".into(), "y".into(), "z".into()]))
        );
        assert_eq!(m.get("d"), Some(&FmValue::List(vec![])));
    }

    #[test]
    fn sk1_no_frontmatter_and_edge_fences() {
        let (m, body) = parse("  just text\n\n");
        assert!(m.is_empty());
        assert_eq!(body, "just text");
        let (m, body) = parse("---\nname: x\n---\nline 1\n\nline 2\n");
        assert_eq!(m.len(), 1);
        assert_eq!(body, "line 1\n\nline 2");
        // Closing fence at EOF without a newline: empty body.
        let (m, body) = parse("---\nname: x\n---");
        assert_eq!(m.get("name"), Some(&s("x")));
        assert_eq!(body, "");
        let (m, body) = parse("---\n---\nBody only.");
        assert!(m.is_empty());
        assert_eq!(body, "Body only.");
        // `name: foo---` is not a closing fence.
        let (m, body) = parse("---\nname: foo---");
        assert!(m.is_empty());
        assert_eq!(body, "---\nname: foo---");
        // CRLF and trailing blanks on the fences.
        let (m, body) = parse("--- \r\nname: y\r\n---\t\r\nB\r\n");
        assert_eq!(m.get("name"), Some(&s("y")));
        assert_eq!(body, "B");
    }

    #[test]
    fn nested_lines_are_flat_keys_and_colon_splits_once() {
        let (m, _) = parse("---\nouter:\n  inner: v\nurl: http://x:1\nno colon\n---\n");
        assert_eq!(m.get("inner"), Some(&s("v")));
        assert_eq!(m.get("url"), Some(&s("http://x:1")));
        assert_eq!(m.get("outer"), Some(&s("")));
    }

    #[test]
    fn field_updates_replace_or_insert() {
        let text = "---\nname: a\naccess_count: 1\n---\n\nbody";
        let out = set_field(text, "access_count", "2").unwrap();
        assert_eq!(out, "---\nname: a\naccess_count: 2\n---\n\nbody");
        let out = set_field(text, "quality_score", "0.60").unwrap();
        assert_eq!(
            out,
            "---\nname: a\naccess_count: 1\nquality_score: 0.60\n---\n\nbody"
        );
        assert!(set_field("no fm", "a", "b").is_none());
        let out = replace_body(text, &[("compression_level", "daily")], "short").unwrap();
        assert_eq!(
            out,
            "---\nname: a\naccess_count: 1\ncompression_level: daily\n---\n\nshort"
        );
    }
}
