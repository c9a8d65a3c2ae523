//! What a call asking for approval will do, as lines for the overlay
//! (docs §2.14.4): a unified diff for a file write, the command and its
//! cwd for `bash`, the text for `remember`, name and arguments otherwise.

use serde_json::Value;

use super::ToolContext;
use super::builtin::fs::resolve_path;
use super::manifest::Access;

/// Files larger than this are not diffed (the preview says so).
const MAX_DIFF_BYTES: u64 = 512 * 1024;
/// Lines of context around each change.
const CONTEXT: usize = 3;

/// The preview of `tool` called with `args`.
pub fn preview(tool: &str, access: Access, args: &Value, ctx: &ToolContext) -> Vec<String> {
    let field = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
    match access {
        Access::WorkspaceWrite => file_preview(tool, args, ctx),
        Access::Shell => vec![
            format!("$ {}", field("command")),
            format!("cwd: {}", ctx.workspace.display()),
        ],
        Access::MemoryWrite => {
            let mut lines = vec![format!("memory: {}", field("title"))];
            lines.extend(field("content").lines().map(String::from));
            lines
        }
        _ => {
            let args = serde_json::to_string_pretty(args).unwrap_or_default();
            std::iter::once(format!("{tool} with"))
                .chain(args.lines().map(String::from))
                .collect()
        }
    }
}

/// The diff a `write_file` or `edit_file` call would make.
fn file_preview(tool: &str, args: &Value, ctx: &ToolContext) -> Vec<String> {
    let field = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
    let raw = field("path");
    let path = match resolve_path(ctx, raw) {
        Ok(p) => p,
        Err(e) => return vec![format!("{raw}: {e}")],
    };
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    if size > MAX_DIFF_BYTES {
        return vec![format!("{raw}: {size} bytes, too large to diff")];
    }
    let exists = path.is_file();
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let new = match tool {
        crate::model::names::EDIT_FILE => {
            let (from, to) = (field("old_string"), field("new_string"));
            if from.is_empty() || !old.contains(from) {
                return vec![format!("{raw}: the text to replace is not in the file")];
            }
            if args.get("replace_all").and_then(Value::as_bool) == Some(true) {
                old.replace(from, to)
            } else {
                old.replacen(from, to, 1)
            }
        }
        _ if args.get("append").and_then(Value::as_bool) == Some(true) => {
            format!("{old}{}", field("content"))
        }
        _ => field("content").to_string(),
    };
    let from = if exists {
        format!("--- {raw}")
    } else {
        "--- /dev/null".to_string()
    };
    let mut lines = vec![from, format!("+++ {raw}")];
    lines.extend(unified_diff(&old, &new));
    lines
}

/// One line of a diff.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op<'a> {
    Same(&'a str),
    Del(&'a str),
    Add(&'a str),
}

/// A unified line diff of `old` to `new` with [`CONTEXT`] lines of context
/// (hunk headers without line numbers' counts beyond the start).
pub fn unified_diff(old: &str, new: &str) -> Vec<String> {
    let ops = line_ops(old, new);
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| !matches!(o, Op::Same(_)))
        .map(|(i, _)| i)
        .collect();
    let mut out = Vec::new();
    let mut shown_to = 0usize;
    let mut k = 0;
    while let Some(&first) = changed.get(k) {
        let start = first.saturating_sub(CONTEXT).max(shown_to);
        let mut end = first + 1;
        // Changes closer than two contexts share a hunk.
        while let Some(&next) = changed.get(k + 1) {
            if next <= end + 2 * CONTEXT {
                end = next + 1;
                k += 1;
            } else {
                break;
            }
        }
        let end = (end + CONTEXT).min(ops.len());
        let old_line = ops
            .get(..start)
            .map_or(0, |o| o.iter().filter(|x| !matches!(x, Op::Add(_))).count());
        out.push(format!("@@ -{} @@", old_line + 1));
        for op in ops.get(start..end).unwrap_or_default() {
            out.push(match op {
                Op::Same(l) => format!(" {l}"),
                Op::Del(l) => format!("-{l}"),
                Op::Add(l) => format!("+{l}"),
            });
        }
        shown_to = end;
        k += 1;
    }
    out
}

/// The longest-common-subsequence edit script of two texts' lines. Common
/// head and tail lines are trimmed first, so a small edit of a large file
/// stays cheap; the middle is capped so a wholesale rewrite cannot take
/// quadratic memory.
fn line_ops<'a>(old: &'a str, new: &'a str) -> Vec<Op<'a>> {
    const MAX_CELLS: usize = 4_000_000;
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (am, bm) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let mut ops: Vec<Op> = a[..head].iter().map(|l| Op::Same(l)).collect();
    let (n, m) = (am.len(), bm.len());
    if n.saturating_mul(m) > MAX_CELLS {
        ops.extend(am.iter().map(|l| Op::Del(l)));
        ops.extend(bm.iter().map(|l| Op::Add(l)));
    } else {
        // lcs[i][j]: the LCS length of am[i..] and bm[j..].
        let mut lcs = vec![vec![0u32; m + 1]; n + 1];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                lcs[i][j] = if am[i] == bm[j] {
                    lcs[i + 1][j + 1] + 1
                } else {
                    lcs[i + 1][j].max(lcs[i][j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < n || j < m {
            if i < n && j < m && am[i] == bm[j] {
                ops.push(Op::Same(am[i]));
                i += 1;
                j += 1;
            } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
                // Removals before additions, as unified diffs show them.
                ops.push(Op::Del(am[i]));
                i += 1;
            } else {
                ops.push(Op::Add(bm[j]));
                j += 1;
            }
        }
    }
    ops.extend(a[a.len() - tail..].iter().map(|l| Op::Same(l)));
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_line_shows_as_removed_and_added_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\n";
        let d = unified_diff(old, new);
        assert_eq!(
            d,
            ["@@ -2 @@", " b", " c", " d", "-e", "+E", " f", " g", " h"]
        );
    }

    #[test]
    fn a_new_file_is_all_additions_and_equal_texts_no_hunks() {
        assert_eq!(unified_diff("", "x\ny"), ["@@ -1 @@", "+x", "+y"]);
        assert!(unified_diff("same\n", "same\n").is_empty());
    }

    #[test]
    fn the_preview_of_a_write_diffs_against_the_file_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = crate::tools::test_context(dir.path().join("run"), dir.path().join("ws"));
        std::fs::write(dir.path().join("ws/notes.md"), "one\ntwo\n").unwrap();
        let args = serde_json::json!({"path": "notes.md", "content": "one\nthree\n"});
        let p = preview("write_file", Access::WorkspaceWrite, &args, &ctx);
        assert_eq!(
            p,
            [
                "--- notes.md",
                "+++ notes.md",
                "@@ -1 @@",
                " one",
                "-two",
                "+three"
            ]
        );
        let edit = serde_json::json!({"path": "notes.md", "old_string": "two", "new_string": "2"});
        let p = preview("edit_file", Access::WorkspaceWrite, &edit, &ctx);
        assert!(p.contains(&"+2".to_string()), "{p:?}");
        let bash = serde_json::json!({"command": "ls -la"});
        let p = preview("bash", Access::Shell, &bash, &ctx);
        assert_eq!(p[0], "$ ls -la");
        assert!(p[1].starts_with("cwd: "), "{p:?}");
    }
}
