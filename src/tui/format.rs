//! Small text formats shared by the views: elapsed clocks, token counts,
//! one-line previews.

use std::time::Duration;

use unicode_width::UnicodeWidthChar;

/// An elapsed clock as people read it: `0s`, `59s`, `1m 00s`, `1h 02m 09s`.
/// Whole seconds only; the clock must not flicker between frames.
pub(crate) fn clock(d: Duration) -> String {
    let s = d.as_secs();
    let (h, m, s) = (s / 3600, (s % 3600) / 60, s % 60);
    if h > 0 {
        format!("{h}h {m:02}m {s:02}s")
    } else if m > 0 {
        format!("{m}m {s:02}s")
    } else {
        format!("{s}s")
    }
}

/// A finished call's duration: milliseconds below one second, else a clock.
pub(crate) fn duration_ms(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 10_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        clock(Duration::from_millis(ms))
    }
}

/// Token counts in a narrow column: `950`, `12.3k`, `40k`, `1.2M`.
pub fn tokens(n: u64) -> String {
    if n < 1000 {
        n.to_string()
    } else if n < 1_000_000 {
        let k = n as f64 / 1000.0;
        if n.is_multiple_of(1000) || k >= 100.0 {
            format!("{}k", (k).round() as u64)
        } else {
            format!("{k:.1}k")
        }
    } else {
        format!("{:.1}M", n as f64 / 1_000_000.0)
    }
}

/// Thousands separators: `12,345`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The first line of `text`, whitespace collapsed, cut to `width` columns
/// with an ellipsis.
pub(crate) fn one_line(text: &str, width: usize) -> String {
    let mut flat = String::with_capacity(text.len().min(width * 4 + 8));
    let mut last_space = false;
    for c in text.chars() {
        let c = if c.is_whitespace() { ' ' } else { c };
        if c == ' ' {
            if last_space || flat.is_empty() {
                continue;
            }
            last_space = true;
        } else {
            last_space = false;
        }
        flat.push(c);
        // Enough characters to fill any width; stop early on huge texts.
        if flat.len() > width * 4 + 8 {
            break;
        }
    }
    truncate(flat.trim_end(), width)
}

/// Cuts `text` to `width` display columns, ending in `…` when cut.
pub(crate) fn truncate(text: &str, width: usize) -> String {
    if width == 0 {
        return String::new();
    }
    let total: usize = text.chars().map(|c| c.width().unwrap_or(0)).sum();
    if total <= width {
        return text.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > width.saturating_sub(1) {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    out
}

/// Display width of a string.
pub(crate) fn width(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

/// `ts` as RFC 3339 shown as `YYYY-mm-dd HH:MM` in the given offset; the raw
/// string when it does not parse.
pub(crate) fn timestamp(ts: &str, offset: chrono::FixedOffset) -> String {
    match chrono::DateTime::parse_from_rfc3339(ts) {
        Ok(t) => t
            .with_timezone(&offset)
            .format("%Y-%m-%d %H:%M")
            .to_string(),
        Err(_) => ts.chars().take(16).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_read_like_codex() {
        assert_eq!(clock(Duration::from_secs(0)), "0s");
        assert_eq!(clock(Duration::from_millis(59_999)), "59s");
        assert_eq!(clock(Duration::from_secs(60)), "1m 00s");
        assert_eq!(clock(Duration::from_secs(3729)), "1h 02m 09s");
    }

    #[test]
    fn token_counts_are_short() {
        assert_eq!(tokens(950), "950");
        assert_eq!(tokens(12_345), "12.3k");
        assert_eq!(tokens(40_000), "40k");
        assert_eq!(tokens(1_234_567), "1.2M");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn one_line_flattens_and_cuts() {
        assert_eq!(one_line("a\n\n  b c", 10), "a b c");
        assert_eq!(one_line("abcdefghijkl", 5), "abcd…");
        assert_eq!(truncate("日本語", 4), "日…");
    }
}
