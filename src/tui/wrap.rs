//! Wrapping styled text to a width. The chat computes its own line counts
//! (to scroll a 10,000-message session without laying out all of it), so
//! wrapping lives here rather than inside ratatui's `Paragraph`.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// Styled pieces of text.
type Pieces = Vec<(String, Style)>;

/// A run of spaces followed by a word (consecutive non-space pieces,
/// possibly in several styles).
#[derive(Default)]
struct Token {
    gap: Pieces,
    gap_w: usize,
    word: Pieces,
    word_w: usize,
}

fn char_w(c: char) -> usize {
    c.width().unwrap_or(0)
}

fn tokenize(spans: &[Span<'_>]) -> Vec<Token> {
    let mut out = Vec::new();
    let mut cur = Token::default();
    for span in spans {
        let mut buf = String::new();
        let mut buf_space = false;
        let flush = |cur: &mut Token, out: &mut Vec<Token>, buf: &mut String, space: bool| {
            if buf.is_empty() {
                return;
            }
            let w: usize = buf.chars().map(char_w).sum();
            let text = std::mem::take(buf);
            if space {
                // Spaces after a word start the next token.
                if !cur.word.is_empty() {
                    out.push(std::mem::take(cur));
                }
                cur.gap.push((text, span.style));
                cur.gap_w += w;
            } else {
                cur.word.push((text, span.style));
                cur.word_w += w;
            }
        };
        for c in span.content.chars() {
            let is_space = c == ' ' || c == '\t';
            if is_space != buf_space {
                flush(&mut cur, &mut out, &mut buf, buf_space);
                buf_space = is_space;
            }
            buf.push(if c == '\t' { ' ' } else { c });
        }
        flush(&mut cur, &mut out, &mut buf, buf_space);
    }
    if !cur.word.is_empty() || !cur.gap.is_empty() {
        out.push(cur);
    }
    out
}

/// Word-wraps `spans` to `width` columns. `first` prefixes the first line,
/// `rest` every following one (hanging indents for lists and quotes). Runs
/// of spaces inside a line are kept; the run at a wrap point is dropped.
/// Words wider than a line are broken between characters.
pub(crate) fn wrap_spans(
    spans: &[Span<'_>],
    width: usize,
    first: &[Span<'static>],
    rest: &[Span<'static>],
) -> Vec<Line<'static>> {
    let prefix_w = |p: &[Span<'static>]| p.iter().map(|s| s.width()).sum::<usize>();
    let mut lines: Vec<Line<'static>> = Vec::new();
    let mut cur: Vec<Span<'static>> = first.to_vec();
    let mut cur_w = prefix_w(first);
    let mut line_start_w = cur_w;
    for token in tokenize(spans) {
        let at_start = cur_w == line_start_w;
        if !at_start && cur_w + token.gap_w + token.word_w > width {
            lines.push(Line::from(std::mem::take(&mut cur)));
            cur = rest.to_vec();
            cur_w = prefix_w(rest);
            line_start_w = cur_w;
        }
        // Leading spaces of the text itself survive on the first line only.
        if cur_w != line_start_w || lines.is_empty() {
            for (t, s) in token.gap {
                cur.push(Span::styled(t, s));
            }
            cur_w += token.gap_w;
        }
        if cur_w + token.word_w <= width || token.word_w == 0 {
            for (t, s) in token.word {
                cur.push(Span::styled(t, s));
            }
            cur_w += token.word_w;
            continue;
        }
        // A word wider than the room left: break it between characters.
        for (t, s) in token.word {
            let mut buf = String::new();
            for c in t.chars() {
                let w = char_w(c);
                if cur_w + w > width && cur_w > line_start_w {
                    if !buf.is_empty() {
                        cur.push(Span::styled(std::mem::take(&mut buf), s));
                    }
                    lines.push(Line::from(std::mem::take(&mut cur)));
                    cur = rest.to_vec();
                    cur_w = prefix_w(rest);
                    line_start_w = cur_w;
                }
                buf.push(c);
                cur_w += w;
            }
            if !buf.is_empty() {
                cur.push(Span::styled(buf, s));
            }
        }
    }
    lines.push(Line::from(cur));
    lines
}

/// Breaks a line between characters at `width` (code blocks: keep spaces).
pub(crate) fn wrap_hard(
    text: &str,
    style: Style,
    width: usize,
    prefix: &[Span<'static>],
) -> Vec<Line<'static>> {
    let pw: usize = prefix.iter().map(|s| s.width()).sum();
    let room = width.saturating_sub(pw).max(1);
    let mut out = Vec::new();
    let mut buf = String::new();
    let mut w = 0;
    for c in text.chars() {
        let c = if c == '\t' { ' ' } else { c };
        let cw = char_w(c);
        if w + cw > room && !buf.is_empty() {
            let mut spans = prefix.to_vec();
            spans.push(Span::styled(std::mem::take(&mut buf), style));
            out.push(Line::from(spans));
            w = 0;
        }
        buf.push(c);
        w += cw;
    }
    let mut spans = prefix.to_vec();
    spans.push(Span::styled(buf, style));
    out.push(Line::from(spans));
    out
}

/// Plain text of a line (tests and search).
pub fn line_text(line: &Line<'_>) -> String {
    line.spans.iter().map(|s| s.content.as_ref()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(line_text).collect()
    }

    #[test]
    fn wraps_words_with_hanging_indent() {
        let spans = [Span::raw("alpha beta gamma delta")];
        let out = wrap_spans(&spans, 12, &[Span::raw("• ")], &[Span::raw("  ")]);
        assert_eq!(texts(&out), ["• alpha beta", "  gamma", "  delta"]);
        for l in &out {
            assert!(l.width() <= 12);
        }
    }

    #[test]
    fn breaks_long_words_and_keeps_styles() {
        let spans = [
            Span::raw("ab "),
            Span::styled("cdefghij", Style::new().bold()),
        ];
        let out = wrap_spans(&spans, 4, &[], &[]);
        assert_eq!(texts(&out), ["ab", "cdef", "ghij"]);
        assert!(out[1].spans.iter().all(|s| s.style == Style::new().bold()));
    }

    #[test]
    fn hard_wrap_keeps_spaces() {
        let out = wrap_hard("a   b   c", Style::new(), 4, &[]);
        assert_eq!(texts(&out), ["a   ", "b   ", "c"]);
    }
}
