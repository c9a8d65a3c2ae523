//! Redaction of secrets and PII before tool traffic reaches events, traces and
//! previews (docs §2.8). The model itself always sees the raw result; only
//! what is recorded or displayed passes through here.
//!
//! Two audiences get two sinks for the same arguments: the trace on disk
//! keeps the spec's fail-closed [`Sink::Arguments`] (a call's `content` is
//! hidden), while what is shown to the user who made the call (chat cells,
//! `vibedesk run` output, its `--json` events) uses [`Sink::Display`], which
//! masks only secrets, so a memory the user asked to save reads as written.
//!
//! Three layers:
//! - [`redact_value`]: a key-based walk over JSON, replacing the values of
//!   sensitive keys with `[redacted]`;
//! - [`redact_text`]: an idempotent scrub of free text (bearer tokens,
//!   `key=value` credential pairs, well-known token shapes);
//! - [`redact_internal_paths`]: hides the engine's own filesystem roots.

use std::path::Path;

use serde_json::Value;

use crate::text::redact::REDACTED;
/// Free-text redaction lives in the `text` room (the memory index uses it too).
pub use crate::text::redact::redact_text;

/// Where a payload is headed; decides whether `content` is sensitive (§2.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sink {
    /// Tool-call arguments. Fail-closed: `content` (e.g. a file being
    /// written) is redacted.
    Arguments,
    /// Tool results. `content` is the payload of read/load tools and is kept.
    Result,
    /// Tool-call arguments shown to the user who made the call. Only secrets
    /// are masked: sensitive key names (`api_key`, `password`, `token`, `env`,
    /// `headers`, PII…), credential pairs and token shapes in any string, as
    /// in every sink. `content` (a memory being saved, a file being written)
    /// is the user's own text and is shown. The original redacts events with
    /// the arguments sink; this divergence is deliberate (issue 16 item 4).
    Display,
}

/// Replacement for an internal filesystem root.
const PATH_PLACEHOLDER: &str = "<redacted>";

/// Keys whose value is always sensitive, compared lower-cased and folded.
const SENSITIVE_KEYS: &[&str] = &[
    "api_key",
    "authorization",
    "content",
    "env",
    "headers",
    "passphrase",
    "password",
    "secret",
    "token",
];

/// Personal/brokerage identifiers, treated exactly like [`SENSITIVE_KEYS`].
/// `account_ref` is deliberately absent: it is an opaque handle, not PII.
const PII_KEYS: &[&str] = &[
    "account_number",
    "account_id",
    "account_no",
    "account_num",
    "brokerage_account_number",
    "brokerage_account_id",
    "account_url",
    "rhs_account_number",
    "ssn",
    "social_security_number",
    "tax_id",
    "taxpayer_id",
    "tin",
    "routing_number",
    "bank_account_number",
];

/// Substrings that make any lower-cased key sensitive.
const KEY_MARKERS: &[&str] = &["api_key", "authorization", "password", "secret", "token"];

/// The same markers after folding, so `apiKey`, `x-api-key` etc. match.
const FOLDED_KEY_MARKERS: &[&str] = &["apikey", "authorization", "password", "secret", "token"];

/// How a JSON key is treated by the key walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeyClass {
    /// Not sensitive: recurse into the value.
    Plain,
    /// Equals a sensitive or PII name: the value is always replaced.
    Exact,
    /// Only contains a marker (`tokens`, `max_tokens`, `db_password_hint`).
    Marker,
}

/// Lower-cased key with everything but ASCII letters and digits removed, so
/// `apiKey`, `API-KEY` and `x-api-key` compare like `apikey` (§2.8).
fn fold(lower: &str) -> String {
    lower.chars().filter(char::is_ascii_alphanumeric).collect()
}

/// `name` folded equals `folded`, compared without allocating.
fn folded_eq(name: &str, folded: &str) -> bool {
    name.bytes()
        .filter(u8::is_ascii_alphanumeric)
        .eq(folded.bytes())
}

fn classify_key(key: &str, sink: Sink) -> KeyClass {
    let lower = key.to_lowercase();
    let folded = fold(&lower);
    // Result sink: `content` is the payload of read/load tools (§2.8); the
    // display sink shows it to the user whose text it is.
    if matches!(sink, Sink::Result | Sink::Display) && (lower == "content" || folded == "content") {
        return KeyClass::Plain;
    }
    let exact = SENSITIVE_KEYS
        .iter()
        .chain(PII_KEYS)
        .any(|name| lower == *name || folded_eq(name, &folded));
    if exact {
        return KeyClass::Exact;
    }
    let marked = KEY_MARKERS.iter().any(|m| lower.contains(m))
        || FOLDED_KEY_MARKERS.iter().any(|m| folded.contains(m));
    if marked {
        KeyClass::Marker
    } else {
        KeyClass::Plain
    }
}

/// Key-based redaction (§2.8), recursive over objects and arrays. Values of
/// sensitive keys become `[redacted]`; every surviving string leaf goes
/// through [`redact_text`].
pub fn redact_value(value: &Value, sink: Sink) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, v)| (key.clone(), redact_entry(key, v, sink)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| redact_value(v, sink)).collect()),
        Value::String(s) => Value::String(redact_text(s)),
        other => other.clone(),
    }
}

fn redact_entry(key: &str, value: &Value, sink: Sink) -> Value {
    match classify_key(key, sink) {
        KeyClass::Plain => redact_value(value, sink),
        KeyClass::Exact => Value::String(REDACTED.to_string()),
        // Deliberate divergence from the original, which redacts anything
        // under a marker key: counters such as `tokens`/`max_tokens` are
        // numbers, and numbers, booleans and null cannot carry a secret that
        // a marker-only key implies. Strings and containers stay fail-closed.
        KeyClass::Marker => match value {
            Value::Number(_) | Value::Bool(_) | Value::Null => value.clone(),
            _ => Value::String(REDACTED.to_string()),
        },
    }
}

/// Redacts a tool result for traces and previews (§2.8): JSON is walked
/// with the result sink and re-serialized (non-ASCII kept as is); anything
/// else is scrubbed as text.
pub fn redact_tool_result(raw: &str) -> String {
    match serde_json::from_str::<Value>(raw) {
        Ok(value) => serde_json::to_string(&redact_value(&value, Sink::Result))
            .unwrap_or_else(|_| redact_text(raw)),
        Err(_) => redact_text(raw),
    }
}

/// Replaces internal filesystem roots (home, cwd, engine dirs…) with
/// `<redacted>`, keeping the tail of each path (§2.8). Roots are tried in
/// both separator spellings, longest first; roots of three characters or
/// fewer are ignored. A root only matches at a path boundary, so
/// `/data/internal_users_test` survives the root `/data/internal_users`.
/// Idempotent.
pub fn redact_internal_paths(text: &str, roots: &[&Path]) -> String {
    let mut variants: Vec<String> = Vec::new();
    for root in roots {
        let spelled = root.to_string_lossy();
        // A trailing separator would stop `/root` (no slash) from matching.
        let trimmed = spelled.trim_end_matches(['/', '\\']);
        for variant in [
            trimmed.to_string(),
            trimmed.replace('\\', "/"),
            trimmed.replace('/', "\\"),
        ] {
            if variant.chars().count() > 3 && !variants.contains(&variant) {
                variants.push(variant);
            }
        }
    }
    // Longest first, so a nested root is replaced whole before its parent.
    variants.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    variants
        .iter()
        .fold(text.to_string(), |acc, root| replace_root(&acc, root))
}

/// Replaces each occurrence of `root` that ends at a path boundary.
fn replace_root(text: &str, root: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(idx) = rest.find(root) {
        let after = &rest[idx + root.len()..];
        if at_path_boundary(after) {
            out.push_str(&rest[..idx]);
            out.push_str(PATH_PLACEHOLDER);
            rest = after;
        } else {
            // Step one character so overlapping candidates are still seen.
            let step = rest[idx..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&rest[..idx + step]);
            rest = &rest[idx + step..];
        }
    }
    out.push_str(rest);
    out
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// §2.8 boundary: the next character is not a word character, and not a
/// `.`/`-` that continues the name (`root.bak`, `root-old`); `root.` at a
/// sentence end or `root/` still count as boundaries.
fn at_path_boundary(after: &str) -> bool {
    let mut chars = after.chars();
    match chars.next() {
        None => true,
        Some(c) if is_word_char(c) => false,
        Some('.' | '-') => !chars.next().is_some_and(is_word_char),
        Some(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RD-1 (§10.7) exact input/output pairs.
    const RD1_PAIRS: &[(&str, &str)] = &[
        ("api_key=abc123", "api_key=[redacted]"),
        ("api_key=\"abc123\"", "api_key=\"[redacted]\""),
        ("{\"api_key\": \"abc123\"}", "{\"api_key\": \"[redacted]\"}"),
        ("API_KEY = abc123", "API_KEY = [redacted]"),
        ("access_token: abc.123-x", "access_token: [redacted]"),
        (
            "password: hunter2, user: bob",
            "password: [redacted], user: bob",
        ),
        (
            "Authorization: Bearer eyJhbGciOi.J9-_x==",
            "Authorization: Bearer [redacted]",
        ),
        ("bearer abc123", "bearer [redacted]"),
    ];

    /// RD-1 strings that must come back unchanged.
    const RD1_UNCHANGED: &[&str] = &[
        "sharpe=1.82, max_drawdown=-0.12",
        "timestamp=1699999999",
        "content=Quarterly revenue rose 12%",
        "tokens: 1204 in / 318 out",
        "api_keys: 3 configured",
    ];

    fn fake_sk() -> String {
        format!("sk-{}", "a".repeat(24))
    }

    fn fake_github() -> String {
        format!("ghp_{}", "A1b2C3".repeat(6))
    }

    fn fake_slack() -> String {
        format!("xoxb-{}-{}", "1234567890", "AbCdEfGhIj")
    }

    fn fake_aws() -> String {
        format!("AKIA{}", "ABCDEFGH12345678")
    }

    fn fake_pypi() -> String {
        format!("pypi-{}", "AgEIcHlwaS5vcmc".repeat(4))
    }

    fn fake_jwt() -> String {
        format!(
            "eyJ{}.eyJ{}.{}",
            "hbGciOiJIUzI1NiJ9", "zdWIiOiIxIn0", "c2lnbmF0dXJl"
        )
    }

    #[test]
    fn passwords_written_as_prose_are_redacted() {
        for (input, expected) in [
            (
                "my password hunter2-XYZ works",
                "my password [redacted] works",
            ),
            ("Passphrase is s3cret!", "Passphrase is [redacted]"),
            ("the passwd\t12345678", "the passwd\t[redacted]"),
            ("(password x9)", "(password [redacted])"),
        ] {
            assert_eq!(redact_text(input), expected, "{input}");
            // Idempotent.
            assert_eq!(redact_text(expected), expected, "{expected}");
        }
        for kept in [
            "reset the password manager",
            "password reset link",
            "passwords 123 are hashed",
            "password is required",
            "mypassword 1234",
        ] {
            assert_eq!(redact_text(kept), kept);
        }
    }

    #[test]
    fn rd1_exact_pairs() {
        for (input, expected) in RD1_PAIRS {
            assert_eq!(redact_text(input), *expected, "input: {input}");
        }
    }

    #[test]
    fn rd1_unchanged_strings() {
        for input in RD1_UNCHANGED {
            assert_eq!(redact_text(input), *input);
        }
    }

    #[test]
    fn rd1_idempotent() {
        let mut inputs: Vec<String> = RD1_PAIRS
            .iter()
            .flat_map(|(i, o)| [i.to_string(), o.to_string()])
            .collect();
        inputs.extend(RD1_UNCHANGED.iter().map(|s| s.to_string()));
        inputs.extend([
            format!("key {} and {}", fake_sk(), fake_jwt()),
            "password: \"unterminated".to_string(),
            "Authorization: Basic dXNlcjpwYXNz".to_string(),
            "{\"authorization\": \"Bearer abc\", \"token\": 42}".to_string(),
            "url?api_key=abc&secret=def;token='x y'".to_string(),
        ]);
        for input in &inputs {
            let once = redact_text(input);
            assert_eq!(redact_text(&once), once, "input: {input}");
        }
    }

    #[test]
    fn bearer_keeps_word_case_and_spacing() {
        assert_eq!(redact_text("BEARER  tok_1"), "BEARER  [redacted]");
        assert_eq!(redact_text("Bearer [redacted]"), "Bearer [redacted]");
        assert_eq!(
            redact_text("curl -H 'Authorization: Bearer abc.def'"),
            "curl -H 'Authorization: Bearer [redacted]'"
        );
    }

    #[test]
    fn pair_credential_name_variants() {
        let cases = [
            ("apiKey=abc", "apiKey=[redacted]"),
            ("api-secret: s3", "api-secret: [redacted]"),
            ("client_secret=xyz", "client_secret=[redacted]"),
            ("SECRET-KEY=xyz", "SECRET-KEY=[redacted]"),
            ("private_key: pk", "private_key: [redacted]"),
            ("app_secret=a1", "app_secret=[redacted]"),
            ("refresh-token=r1", "refresh-token=[redacted]"),
            ("auth_token=a", "auth_token=[redacted]"),
            ("bearer_token: b", "bearer_token: [redacted]"),
            ("id_token=i", "id_token=[redacted]"),
            ("sessionToken=s", "sessionToken=[redacted]"),
            ("passphrase: open sesame", "passphrase: [redacted] sesame"),
            ("passwd=p", "passwd=[redacted]"),
            ("secret=s", "secret=[redacted]"),
            ("token=t", "token=[redacted]"),
            ("OPENAI_API_KEY=abc", "OPENAI_API_KEY=[redacted]"),
            ("x-auth-token: abc", "x-auth-token: [redacted]"),
        ];
        for (input, expected) in cases {
            assert_eq!(redact_text(input), expected, "input: {input}");
        }
    }

    #[test]
    fn pair_value_forms() {
        assert_eq!(redact_text("password='hunter 2'"), "password='[redacted]'");
        assert_eq!(
            redact_text(r#"{"password": "a\"b", "user": "bob"}"#),
            r#"{"password": "[redacted]", "user": "bob"}"#
        );
        assert_eq!(redact_text("{token: abc}"), "{token: [redacted]}");
        assert_eq!(
            redact_text("GET /q?api_key=abc&symbol=SPY"),
            "GET /q?api_key=[redacted]&symbol=SPY"
        );
        assert_eq!(redact_text("password: \"abc"), "password: \"[redacted]");
        assert_eq!(
            redact_text("Authorization: Basic dXNlcjpwYXNz"),
            "Authorization: Basic [redacted]"
        );
        // JSON-quoted auth header: the bearer rule leaves the scheme visible.
        assert_eq!(
            redact_text(r#"{"Authorization": "Bearer abc"}"#),
            r#"{"Authorization": "Bearer [redacted]"}"#
        );
    }

    #[test]
    fn pair_skips_redacted_empty_and_plural() {
        for input in [
            "password: [redacted], user: bob",
            "api_key=\"[redacted]\"",
            "password: \"\"",
            "max_tokens: 512",
            "tokens=3",
            "secrets: 2 loaded",
            "passwords: none",
            "tokenizer: cl100k",
            "password_hint: pet name",
        ] {
            assert_eq!(redact_text(input), input);
        }
    }

    #[test]
    fn bare_token_shapes() {
        for token in [
            fake_sk(),
            format!("sk-proj-{}", "Ab1_".repeat(6)),
            fake_github(),
            fake_slack(),
            fake_aws(),
            fake_pypi(),
            fake_jwt(),
        ] {
            assert_eq!(redact_text(&token), REDACTED, "token: {token}");
            assert_eq!(
                redact_text(&format!("using ({token}) now")),
                "using ([redacted]) now",
                "token: {token}"
            );
        }
    }

    #[test]
    fn bare_token_near_misses_untouched() {
        for input in [
            "sk-short".to_string(),
            format!("task-{}", "a".repeat(24)),
            format!("risk-{}", "b".repeat(24)),
            format!("ghp_{}", "a".repeat(10)),
            format!("AKIA{}", "ABC"),
            format!("AKIA{}X", "ABCDEFGH12345678"),
            "pypi-package-name".to_string(),
            "eyJ without dots".to_string(),
        ] {
            assert_eq!(redact_text(&input), input);
        }
    }

    #[test]
    fn multiline_text_scrubbed_per_line() {
        let input = format!(
            "line one\napi_key=abc\r\npassword:\nnext {}\n\ntokens: 5\n",
            fake_sk()
        );
        let expected = "line one\napi_key=[redacted]\r\npassword:\nnext [redacted]\n\ntokens: 5\n";
        assert_eq!(redact_text(&input), expected);
        assert_eq!(redact_text(expected), expected);
        assert_eq!(redact_text(""), "");
        assert_eq!(redact_text("42"), "42");
    }

    fn nested_payload() -> Value {
        json!({
            "outer": [
                {
                    "api_key": "k1",
                    "Authorization": "Bearer abc",
                    "apiKey": "k2",
                    "x-api-key": "k3",
                    "accessToken": "t1",
                    "password": "hunter2",
                    "account_number": 12345678,
                    "accountId": "A-1",
                    "SSN": "123-45-6789",
                    "account_ref": "ACC-7",
                    "content": "file body",
                    "max_tokens": 512,
                    "tokens": {"in": 10},
                    "use_token": true,
                    "note": "api_key=abc and plain",
                    "symbol": "SPY",
                    "headers": {"accept": "json"},
                    "env": {"HOME": "/root"},
                }
            ],
            "token": 42,
        })
    }

    #[test]
    fn value_nested_result_sink() {
        let out = redact_value(&nested_payload(), Sink::Result);
        let inner = &out["outer"][0];
        for key in [
            "api_key",
            "Authorization",
            "apiKey",
            "x-api-key",
            "accessToken",
            "password",
            "account_number",
            "accountId",
            "SSN",
            "tokens",
            "headers",
            "env",
        ] {
            assert_eq!(inner[key], json!(REDACTED), "key: {key}");
        }
        assert_eq!(inner["account_ref"], json!("ACC-7"));
        assert_eq!(inner["content"], json!("file body"));
        assert_eq!(inner["max_tokens"], json!(512));
        assert_eq!(inner["use_token"], json!(true));
        assert_eq!(inner["note"], json!("api_key=[redacted] and plain"));
        assert_eq!(inner["symbol"], json!("SPY"));
        // Exact-name keys redact numbers too.
        assert_eq!(out["token"], json!(REDACTED));
    }

    #[test]
    fn value_content_redacted_in_arguments_sink() {
        let out = redact_value(&nested_payload(), Sink::Arguments);
        assert_eq!(out["outer"][0]["content"], json!(REDACTED));
        assert_eq!(out["outer"][0]["account_ref"], json!("ACC-7"));
        let args = json!({"path": "a.py", "Content": "x"});
        assert_eq!(
            redact_value(&args, Sink::Arguments),
            json!({"path": "a.py", "Content": REDACTED})
        );
        assert_eq!(
            redact_value(&args, Sink::Result),
            json!({"path": "a.py", "Content": "x"})
        );
    }

    /// A `remember` call as the model makes it, with secrets planted in a
    /// sensitive key, a credential pair and a token shape.
    fn remember_args() -> Value {
        json!({
            "action": "save",
            "title": "Fee preference",
            "content": format!("I prefer 10 bp fees; my key is {}", fake_sk()),
            "memory_type": "user",
            "api_key": "k-123",
            "note": "password: hunter2",
            "options": {"Password": "p", "env": {"HOME": "/root"}, "headers": {"accept": "json"}},
        })
    }

    #[test]
    fn display_sink_shows_ordinary_arguments_and_masks_secrets() {
        let out = redact_value(&remember_args(), Sink::Display);
        // The user's own words are shown; only the token inside them is not.
        assert_eq!(
            out["content"],
            json!("I prefer 10 bp fees; my key is [redacted]")
        );
        assert_eq!(out["title"], json!("Fee preference"));
        assert_eq!(out["memory_type"], json!("user"));
        assert_eq!(out["api_key"], json!(REDACTED));
        assert_eq!(out["note"], json!("password: [redacted]"));
        assert_eq!(out["options"]["Password"], json!(REDACTED));
        assert_eq!(out["options"]["env"], json!(REDACTED));
        assert_eq!(out["options"]["headers"], json!(REDACTED));
        let shown = out.to_string();
        for secret in [fake_sk().as_str(), "k-123", "hunter2", "/root"] {
            assert!(!shown.contains(secret), "{secret} leaked: {shown}");
        }
        assert_eq!(redact_value(&out, Sink::Display), out, "idempotent");
    }

    #[test]
    fn arguments_sink_keeps_the_spec_redaction_for_the_trace() {
        let out = redact_value(&remember_args(), Sink::Arguments);
        assert_eq!(out["content"], json!(REDACTED));
        assert_eq!(out["api_key"], json!(REDACTED));
        assert_eq!(out["note"], json!("password: [redacted]"));
        assert_eq!(out["title"], json!("Fee preference"));
        // Display differs from the trace only in `content`.
        let mut shown = redact_value(&remember_args(), Sink::Display);
        shown["content"] = json!(REDACTED);
        assert_eq!(shown, out);
    }

    #[test]
    fn value_folded_and_marker_keys() {
        let input = json!({
            "API-KEY": "a",
            "Tax-Id": "b",
            "routingNumber": "c",
            "db_password_hint": "d",
            "prompt_tokens": 1204,
            "clientSecret": "e",
            "token_count": null,
            "environment": "prod",
            "content_type": "csv",
        });
        let expected = json!({
            "API-KEY": REDACTED,
            "Tax-Id": REDACTED,
            "routingNumber": REDACTED,
            "db_password_hint": REDACTED,
            "prompt_tokens": 1204,
            "clientSecret": REDACTED,
            "token_count": null,
            "environment": "prod",
            "content_type": "csv",
        });
        assert_eq!(redact_value(&input, Sink::Result), expected);
        assert_eq!(redact_value(&expected, Sink::Result), expected);
    }

    #[test]
    fn value_scalars_and_arrays() {
        assert_eq!(redact_value(&json!(42), Sink::Arguments), json!(42));
        assert_eq!(
            redact_value(&json!(["bearer abc", 1, null]), Sink::Arguments),
            json!(["bearer [redacted]", 1, null])
        );
    }

    #[test]
    fn tool_result_json_walks_result_sink() {
        let raw = r#"{"content":"Résumé — ok","data":[{"api_key":"k"}],"rows":3}"#;
        let out = redact_tool_result(raw);
        let parsed: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
        assert_eq!(
            parsed,
            json!({"content": "Résumé — ok", "data": [{"api_key": REDACTED}], "rows": 3})
        );
        assert!(out.contains("Résumé — ok"), "non-ASCII kept: {out}");
        assert_eq!(redact_tool_result(&out), out);
    }

    #[test]
    fn tool_result_text_is_scrubbed() {
        assert_eq!(
            redact_tool_result("ok\npassword: hunter2, user: bob"),
            "ok\npassword: [redacted], user: bob"
        );
        assert_eq!(redact_tool_result("\"token=abc\""), "\"token=[redacted]\"");
    }

    #[test]
    fn rd2_internal_paths() {
        let root = Path::new("/data/internal_users");
        let roots = [root];
        assert_eq!(
            redact_internal_paths("read /data/internal_users/x.csv", &roots),
            "read <redacted>/x.csv"
        );
        assert_eq!(
            redact_internal_paths("/data/internal_users_test/x.csv", &roots),
            "/data/internal_users_test/x.csv"
        );
        assert_eq!(
            redact_internal_paths(
                "/data/internal_users-old and /data/internal_users.bak",
                &roots
            ),
            "/data/internal_users-old and /data/internal_users.bak"
        );
        assert_eq!(
            redact_internal_paths("in /data/internal_users. Then /data/internal_users", &roots),
            "in <redacted>. Then <redacted>"
        );
        assert_eq!(
            redact_internal_paths("caller file /home/me/x.csv", &roots),
            "caller file /home/me/x.csv"
        );
        let once = redact_internal_paths("a /data/internal_users/b /data/internal_users", &roots);
        assert_eq!(redact_internal_paths(&once, &roots), once);
    }

    #[test]
    fn rd2_longest_first_separators_and_short_roots() {
        let home = Path::new("/home/me");
        let agent = Path::new("/home/me/agent/");
        let short = Path::new("/tm");
        let roots = [home, agent, short];
        assert_eq!(
            redact_internal_paths("/home/me/agent/run.py and /home/me/notes /tm/x", &roots),
            "<redacted>/run.py and <redacted>/notes /tm/x"
        );
        assert_eq!(
            redact_internal_paths(r"\home\me\agent\run.py", &roots),
            r"<redacted>\run.py"
        );
        // A non-matching overlap must not hide a later match.
        assert_eq!(
            redact_internal_paths("/home/me_x /home/me/y", &roots),
            "/home/me_x <redacted>/y"
        );
        assert_eq!(redact_internal_paths("nothing here", &[]), "nothing here");
    }
}
