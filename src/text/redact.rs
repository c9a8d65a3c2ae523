//! Redaction of secrets in free text (docs §2.8): bearer tokens, credential
//! pairs, passwords written as prose and well-known token shapes. It lives
//! in the `text` room because both the tools' redaction
//! (`tools::redact`) and the memory index (§8.8, which must never hold a
//! secret a search could confirm) use it, and `memory` may not use `tools`.

use std::sync::LazyLock;

use regex::{Captures, Regex};

/// Replacement for a sensitive value (keys and text pairs).
pub const REDACTED: &str = "[redacted]";

/// Compiles a pattern that is fixed at build time. A failure is a
/// programming error (the `regexes_compile` test forces every rule); in
/// release we skip the rule rather than panic inside a tool call.
fn compile(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

/// Rule (1), §2.8: `bearer <token>`. The token runs to whitespace, a quote,
/// a comma or a semicolon; the word's case and the spacing are kept.
static BEARER_RE: LazyLock<Option<Regex>> =
    LazyLock::new(|| compile(r#"(?i)\b(?P<word>bearer)(?P<ws>\s+)(?P<tok>[^\s"',;]+)"#));

/// Rule (2), §2.8: credential pairs. The name must not follow a letter or
/// digit and must meet the separator, which keeps plurals (`tokens:`) intact.
static PAIR_RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    compile(concat!(
        r"(?i)(?P<pre>^|[^a-z0-9])",
        r"(?P<key>api[_-]?(?:key|secret)",
        r"|(?:access|auth|refresh|bearer|id|session)[_-]?token",
        r"|client[_-]?secret|secret[_-]?key|private[_-]?key|app[_-]?secret",
        r"|passphrase|password|passwd|authorization|secret|token)",
        r#"(?P<kq>["']?)(?P<sep>\s*[:=]\s*)"#,
        // A scheme word before a bare value stays readable.
        r"(?P<scheme>(?:bearer|basic)\s+)?",
        // Quoted (escapes allowed), already redacted, or bare up to a delimiter.
        r#"(?:"(?P<dq>(?:[^"\\]|\\.)*)""#,
        r#"|'(?P<sq>(?:[^'\\]|\\.)*)'"#,
        r#"|(?P<oq>["']?)(?:(?P<done>\[redacted\])|(?P<bare>[^\s,;&"'}\]]+)))"#,
    ))
});

/// Rule (2b), §2.8: a password written as prose, `password hunter2-XYZ`
/// or `passphrase is s3cret!`: the word, spaces (and an `is`/`was`), then a
/// value with at least one character that is not a letter, so
/// `password manager` and `password reset` stay readable.
static PROSE_PASSWORD_RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    compile(concat!(
        r"(?i)(?P<pre>^|[^a-z0-9])(?P<key>password|passwd|passphrase)",
        r"(?P<ws>\s+(?:(?:is|was)\s+)?)",
        r#"(?P<val>[^\s,;"'<>()\[\]{}]*[^a-z\s,;"'<>()\[\]{}][^\s,;"'<>()\[\]{}]*)"#,
    ))
});

/// Rule (3), §2.8: bare token shapes, replaced wholesale. The leading
/// character must not continue an identifier, so `task-…` or `risk-…` never
/// trigger the `sk-` shape.
static TOKEN_SHAPE_RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    compile(concat!(
        r"(?P<pre>^|[^A-Za-z0-9_-])(?P<tok>",
        // OpenAI-style secret keys (including `sk-proj-…`).
        r"sk-[A-Za-z0-9_-]{20,}",
        // GitHub personal/OAuth/user/server/refresh tokens.
        r"|gh[pousr]_[A-Za-z0-9_]{30,}",
        // Slack bot/app/user/refresh/session tokens.
        r"|xox[baprs]-[A-Za-z0-9-]{10,}",
        // AWS access key ids: exactly 16 characters after the prefix.
        r"|AKIA[0-9A-Z]{16}\b",
        // PyPI upload tokens are long macaroons.
        r"|pypi-[A-Za-z0-9_-]{40,}",
        // JWTs: a base64url JSON header (`eyJ`), payload and signature.
        r"|eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*",
        r")",
    ))
});

/// Text of a named group, or "" when it did not participate.
fn group<'t>(caps: &Captures<'t>, name: &str) -> &'t str {
    caps.name(name).map_or("", |m| m.as_str())
}

/// Whole match, used to leave a pair untouched.
fn whole<'t>(caps: &Captures<'t>) -> &'t str {
    caps.get(0).map_or("", |m| m.as_str())
}

/// True for a value a previous pass produced, with or without an auth
/// scheme in front, so redaction stays idempotent (§2.8).
fn is_already_redacted(value: &str) -> bool {
    if value == REDACTED {
        return true;
    }
    let Some((scheme, rest)) = value.split_once(char::is_whitespace) else {
        return false;
    };
    (scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("basic"))
        && rest.trim_start() == REDACTED
}

/// Scrubs one line: bearer tokens, then credential pairs, then token shapes.
/// Bearer goes first so `Authorization: Bearer x` keeps its scheme word.
fn scrub_line(line: &str) -> String {
    let mut out = line.to_string();
    if let Some(re) = BEARER_RE.as_ref() {
        out = re
            .replace_all(&out, |caps: &Captures| {
                if group(caps, "tok").starts_with(REDACTED) {
                    whole(caps).to_string()
                } else {
                    format!("{}{}{REDACTED}", group(caps, "word"), group(caps, "ws"))
                }
            })
            .into_owned();
    }
    if let Some(re) = PAIR_RE.as_ref() {
        out = re.replace_all(&out, replace_pair).into_owned();
    }
    if let Some(re) = PROSE_PASSWORD_RE.as_ref() {
        out = re
            .replace_all(&out, |caps: &Captures| {
                format!(
                    "{}{}{}{REDACTED}",
                    group(caps, "pre"),
                    group(caps, "key"),
                    group(caps, "ws")
                )
            })
            .into_owned();
    }
    if let Some(re) = TOKEN_SHAPE_RE.as_ref() {
        out = re
            .replace_all(&out, |caps: &Captures| {
                format!("{}{REDACTED}", group(caps, "pre"))
            })
            .into_owned();
    }
    out
}

/// Rebuilds a credential pair with its value redacted, keeping the key,
/// separator and quotes exactly as written.
fn replace_pair(caps: &Captures) -> String {
    let (open, value, close) = if let Some(m) = caps.name("dq") {
        ("\"", m.as_str(), "\"")
    } else if let Some(m) = caps.name("sq") {
        ("'", m.as_str(), "'")
    } else if caps.name("done").is_some() {
        return whole(caps).to_string();
    } else {
        (group(caps, "oq"), group(caps, "bare"), "")
    };
    // An empty value hides nothing; a redacted one must stay as it is.
    if value.is_empty() || is_already_redacted(value) {
        return whole(caps).to_string();
    }
    format!(
        "{}{}{}{}{}{open}{REDACTED}{close}",
        group(caps, "pre"),
        group(caps, "key"),
        group(caps, "kq"),
        group(caps, "sep"),
        group(caps, "scheme"),
    )
}

/// Text redaction (§2.8): bearer tokens, singular credential pairs and bare
/// token shapes become `[redacted]`. Idempotent. Each line is scrubbed on its
/// own so a pattern never spans a newline; newlines are preserved.
pub fn redact_text(text: &str) -> String {
    text.split('\n')
        .map(scrub_line)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regexes_compile() {
        assert!(BEARER_RE.is_some(), "bearer rule");
        assert!(PAIR_RE.is_some(), "pair rule");
        assert!(TOKEN_SHAPE_RE.is_some(), "token shape rule");
        assert!(PROSE_PASSWORD_RE.is_some(), "prose password rule");
    }
}
