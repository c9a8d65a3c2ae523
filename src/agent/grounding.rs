//! The final-answer check (docs §1.5 step 5, §1.8). A check looks at a draft
//! answer and lists its issues; the loop then asks for a revision (bounded)
//! and, when revisions run out, uses the check's fallback.
//!
//! The built-in [`PendingWriteCheck`] implements the original's pending-write
//! directive: when the user asked for `.md` files to be written and none was,
//! the draft is sent back with the list of unwritten targets. The original's
//! market-identity ledger arrives with the research tools through the same
//! trait.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::SystemTime;

use regex::Regex;

/// What a check may look at.
pub struct AnswerContext<'a> {
    pub user_message: &'a str,
    /// Files that `write_file`/`edit_file` wrote successfully in this run.
    pub written: &'a [PathBuf],
    pub run_started: SystemTime,
    pub workspace: &'a Path,
    pub run_dir: &'a Path,
}

/// When revisions are exhausted: the text to deliver and why it is degraded.
pub struct Fallback {
    pub content: String,
    pub reason: String,
}

pub trait AnswerCheck: Send + Sync {
    /// Issues with the draft; empty means it may be delivered.
    fn validate(&self, draft: &str, ctx: &AnswerContext<'_>) -> Vec<String>;
    /// The steering text that asks for a revision.
    fn correction(&self, issues: &[String], ctx: &AnswerContext<'_>) -> String;
    /// What to deliver when the model did not fix the issues in time.
    fn fallback(&self, draft: &str, issues: &[String], ctx: &AnswerContext<'_>) -> Fallback;
    /// Extra text for the wrap-up nudge and the penultimate safety net
    /// (docs §1.3 steps 5–6), if there is unfinished work to insist on.
    fn directive(&self, _ctx: &AnswerContext<'_>) -> Option<String> {
        None
    }
}

/// Accepts every draft.
pub struct AcceptAll;

impl AnswerCheck for AcceptAll {
    fn validate(&self, _draft: &str, _ctx: &AnswerContext<'_>) -> Vec<String> {
        Vec::new()
    }
    fn correction(&self, _issues: &[String], _ctx: &AnswerContext<'_>) -> String {
        String::new()
    }
    fn fallback(&self, draft: &str, _issues: &[String], _ctx: &AnswerContext<'_>) -> Fallback {
        Fallback {
            content: draft.to_string(),
            reason: String::new(),
        }
    }
}

static ACTION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(update|create|write|add|make|edit|generate|overwrite|append|save)\b|更新|创建|写|生成|编辑|保存|追加").ok()
});

/// `.md` targets: Windows absolute, POSIX absolute, or bare/relative names.
static MD_PATH: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r#"(?i)(?:[a-z]:\\[^\s"'`<>|]*?|/[^\s"'`<>|]*?|[\w.\-/\\]+?)\.md\b"#).ok()
});

/// The pending-write rule of docs §1.8.
pub struct PendingWriteCheck;

impl PendingWriteCheck {
    /// Target `.md` paths named in the message, if it asks for writing.
    pub fn targets(message: &str) -> Vec<String> {
        let (Some(action), Some(md)) = (ACTION.as_ref(), MD_PATH.as_ref()) else {
            return Vec::new();
        };
        if !action.is_match(message) {
            return Vec::new();
        }
        let mut out: Vec<String> = Vec::new();
        for m in md.find_iter(message) {
            let t = m
                .as_str()
                .trim_matches(|c: char| c == '`' || c == '"' || c == '\'')
                .to_string();
            if !out.iter().any(|o| o.eq_ignore_ascii_case(&t)) {
                out.push(t);
            }
        }
        out
    }

    fn unwritten(ctx: &AnswerContext<'_>) -> Vec<String> {
        let targets = Self::targets(ctx.user_message);
        if targets.is_empty() {
            return Vec::new();
        }
        let written_any = targets.iter().any(|t| is_written(t, ctx));
        // As in the original: if any target was written, there is no directive.
        if written_any { Vec::new() } else { targets }
    }
}

fn is_written(target: &str, ctx: &AnswerContext<'_>) -> bool {
    let candidates: Vec<PathBuf> = if Path::new(target).is_absolute() {
        vec![PathBuf::from(target)]
    } else {
        vec![ctx.workspace.join(target), ctx.run_dir.join(target)]
    };
    let folded = |p: &Path| p.to_string_lossy().to_lowercase();
    candidates.iter().any(|c| {
        let recorded = ctx.written.iter().any(|w| {
            folded(w) == folded(c)
                || (!Path::new(target).is_absolute() && folded(w).ends_with(&target.to_lowercase()))
        });
        let fresh = std::fs::metadata(c)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t >= ctx.run_started);
        recorded || fresh
    })
}

impl AnswerCheck for PendingWriteCheck {
    fn validate(&self, _draft: &str, ctx: &AnswerContext<'_>) -> Vec<String> {
        Self::unwritten(ctx)
            .into_iter()
            .map(|t| format!("task_target_not_written: {t}"))
            .collect()
    }

    fn correction(&self, _issues: &[String], ctx: &AnswerContext<'_>) -> String {
        self.directive(ctx).unwrap_or_default()
    }

    fn fallback(&self, draft: &str, _issues: &[String], ctx: &AnswerContext<'_>) -> Fallback {
        Fallback {
            content: draft.to_string(),
            reason: format!(
                "run ended without writing the task target file(s): {}",
                Self::unwritten(ctx).join(", ")
            ),
        }
    }

    fn directive(&self, ctx: &AnswerContext<'_>) -> Option<String> {
        let missing = Self::unwritten(ctx);
        (!missing.is_empty()).then(|| {
            format!(
                "[SYSTEM] The user asked for these file(s) to be written and they are not written yet: {}. Write them now with write_file (or edit_file) before answering, then say where they are.",
                missing.join(", ")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_need_an_action_and_a_md_path() {
        assert_eq!(
            PendingWriteCheck::targets("Please update notes/plan.md and /tmp/Report.md"),
            vec!["notes/plan.md", "/tmp/Report.md"]
        );
        assert!(PendingWriteCheck::targets("what does plan.md say?").is_empty());
        assert_eq!(
            PendingWriteCheck::targets("写入 summary.md"),
            vec!["summary.md"]
        );
        assert_eq!(
            PendingWriteCheck::targets("write a.md and A.md"),
            vec!["a.md"]
        );
    }

    #[test]
    fn written_target_clears_the_issue() {
        let dir = tempfile::tempdir().unwrap();
        let before = SystemTime::now() - std::time::Duration::from_secs(5);
        let mut ctx = AnswerContext {
            user_message: "write report.md",
            written: &[],
            run_started: before,
            workspace: dir.path(),
            run_dir: dir.path(),
        };
        let check = PendingWriteCheck;
        assert_eq!(
            check.validate("done", &ctx),
            vec!["task_target_not_written: report.md"]
        );
        assert!(check.directive(&ctx).unwrap().contains("report.md"));
        let fb = check.fallback("done", &[], &ctx);
        assert_eq!(fb.content, "done");
        assert!(
            fb.reason
                .starts_with("run ended without writing the task target file(s)")
        );
        std::fs::write(dir.path().join("report.md"), "x").unwrap();
        assert!(check.validate("done", &ctx).is_empty());
        ctx.user_message = "explain";
        assert!(check.directive(&ctx).is_none());
    }
}
