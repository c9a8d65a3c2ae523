//! File tools: `read_file`, `list_dir`, `write_file`, `edit_file`.
//!
//! Every path is confined to the workspace (the session's own folder or the
//! user's, docs §2.3.1) and the current run dir.
//! Relative paths resolve in the workspace, which persists across the
//! session's runs. Escapes (`..`, absolute paths elsewhere, symlinks that
//! point outside) are refused with an error naming the allowed roots.

use schemars::JsonSchema;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::args::opt_usize;
use super::{Builtin, ToolEnv};
use crate::fsio::{ConfineError, confine};
use crate::model::contract::{EditFileArgs, ListDirArgs, ReadFileArgs, WriteFileArgs};
use crate::model::names;
use crate::store::atomic_write;
use crate::tools::Caps;
use crate::tools::{ToolContext, ToolError, TypedTool};

/// Largest file `read_file`/`edit_file` will load.
const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;
/// Characters of content one `read_file` page returns; the model pages on.
const PAGE_CHARS: usize = 9_000;
const DEFAULT_LINES: usize = 2_000;
const MAX_LIST_ENTRIES: usize = 500;

/// Resolves `raw` inside the allowed roots, following symlinks of the part
/// that exists, so a link cannot lead outside.
pub fn resolve_path(ctx: &ToolContext, raw: &str) -> Result<PathBuf, ToolError> {
    let raw = raw.trim();
    if raw.is_empty() || raw.contains('\0') {
        return Err(ToolError::InvalidArguments(
            "'path' must be a non-empty path".into(),
        ));
    }
    let joined = if Path::new(raw).is_absolute() {
        PathBuf::from(raw)
    } else {
        ctx.workspace.join(raw)
    };
    match confine(&joined, &[&ctx.workspace, &ctx.run_dir]) {
        Ok(real) => Ok(real),
        Err(ConfineError::Outside) => Err(outside(ctx, raw)),
        Err(ConfineError::Io(e)) => Err(ToolError::io("resolve", raw, e)),
    }
}

fn outside(ctx: &ToolContext, raw: &str) -> ToolError {
    ToolError::failed(
        "path_outside_workspace",
        format!(
            "path '{raw}' is outside the workspace; use a relative path (it resolves in {}) or a path inside the run directory {}",
            ctx.workspace.display(),
            ctx.run_dir.display()
        ),
    )
}

/// How a path is shown back to the model: relative to the workspace when inside it.
fn display(ctx: &ToolContext, p: &Path) -> String {
    let ws = ctx
        .workspace
        .canonicalize()
        .unwrap_or_else(|_| ctx.workspace.clone());
    match p.strip_prefix(&ws) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => p.display().to_string(),
    }
}

fn io_err<'a>(action: &'static str, raw: &'a str) -> impl FnOnce(std::io::Error) -> ToolError + 'a {
    move |source| ToolError::io(action, raw, source)
}

async fn read_text(path: &Path, raw: &str) -> Result<String, ToolError> {
    let meta = tokio::fs::metadata(path)
        .await
        .map_err(io_err("read", raw))?;
    if meta.is_dir() {
        return Err(ToolError::failed(
            "is_a_directory",
            format!("'{raw}' is a directory; use list_dir"),
        ));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(ToolError::failed(
            "file_too_large",
            format!(
                "'{raw}' is {} bytes; the limit is {MAX_FILE_BYTES}",
                meta.len()
            ),
        ));
    }
    let bytes = tokio::fs::read(path).await.map_err(io_err("read", raw))?;
    if bytes.contains(&0) {
        return Err(ToolError::failed(
            "binary_file",
            format!("'{raw}' looks binary (it contains NUL bytes)"),
        ));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Why [`store_file`] could not write; the message names the path itself.
#[derive(Debug, thiserror::Error)]
enum StoreFileError {
    #[error(transparent)]
    Append(#[from] std::io::Error),
    #[error(transparent)]
    Replace(#[from] crate::store::StoreError),
}

/// Writes off the async threads: atomically (temp, fsync, rename) when
/// replacing, so a crash never leaves half a file; appends are fsynced.
async fn store_file(path: &Path, bytes: Vec<u8>, append: bool, raw: &str) -> Result<(), ToolError> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || -> Result<(), StoreFileError> {
        if append {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)?;
            Ok(f.write_all(&bytes).and_then(|_| f.sync_data())?)
        } else {
            Ok(atomic_write(&path, &bytes)?)
        }
    })
    .await
    .map_err(|e| ToolError::failed("io_error", e.to_string()))?
    .map_err(|e| ToolError::failed("io_error", format!("cannot write '{raw}': {e}")))
}

pub struct ReadFile;

/// `read_file`'s page.
#[derive(Serialize, JsonSchema)]
pub struct ReadFileOutput {
    status: &'static str,
    path: String,
    content: String,
    offset: usize,
    returned_lines: usize,
    total_lines: usize,
    next_offset: Option<usize>,
    complete: bool,
}

impl TypedTool for ReadFile {
    type Args = ReadFileArgs;
    type Output = ReadFileOutput;

    const NAME: &'static str = names::READ_FILE;
    fn description(&self) -> &str {
        "Read a text file from the workspace, a page of lines at a time (offset is the 1-based first line)."
    }
    fn repeatable(&self) -> bool {
        true
    }
    async fn run(
        &self,
        args: ReadFileArgs,
        ctx: &ToolContext,
    ) -> Result<ReadFileOutput, ToolError> {
        let raw = args.path.as_str();
        let path = resolve_path(ctx, raw)?;
        let offset = opt_usize(args.offset, "offset")?.unwrap_or(1).max(1);
        let limit = opt_usize(args.limit, "limit")?
            .unwrap_or(DEFAULT_LINES)
            .max(1);
        let text = read_text(&path, raw).await?;
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let total = lines.len();
        if offset > total.max(1) {
            return Err(ToolError::InvalidArguments(format!(
                "offset {offset} is past the end ({total} lines)"
            )));
        }
        let mut content = String::new();
        let mut returned = 0;
        for line in lines.iter().skip(offset - 1).take(limit) {
            if returned > 0 && content.chars().count() + line.chars().count() > PAGE_CHARS {
                break;
            }
            content.push_str(line);
            returned += 1;
        }
        let next = offset - 1 + returned;
        Ok(ReadFileOutput {
            status: "ok",
            path: display(ctx, &path),
            content,
            offset,
            returned_lines: returned,
            total_lines: total,
            next_offset: (next < total).then_some(next + 1),
            complete: next >= total,
        })
    }
}

pub struct ListDir;

/// One `list_dir` entry; `size` is null for folders.
#[derive(Serialize, JsonSchema)]
pub struct DirEntry {
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    size: Option<u64>,
}

/// `list_dir`'s listing.
#[derive(Serialize, JsonSchema)]
pub struct ListDirOutput {
    status: &'static str,
    path: String,
    entries: Vec<DirEntry>,
    truncated: bool,
}

impl TypedTool for ListDir {
    type Args = ListDirArgs;
    type Output = ListDirOutput;

    const NAME: &'static str = names::LIST_DIR;
    fn description(&self) -> &str {
        "List files and folders in the workspace (or a folder inside it), with sizes."
    }
    fn repeatable(&self) -> bool {
        true
    }
    async fn run(&self, args: ListDirArgs, ctx: &ToolContext) -> Result<ListDirOutput, ToolError> {
        let raw = args.path.as_deref().unwrap_or(".");
        let recursive = args.recursive.unwrap_or(false);
        let root = resolve_path(ctx, raw)?;
        let mut entries = Vec::new();
        let mut truncated = false;
        let mut stack = vec![(root.clone(), 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            let mut rd = tokio::fs::read_dir(&dir)
                .await
                .map_err(io_err("list", raw))?;
            let mut here = Vec::new();
            while let Some(e) = rd.next_entry().await.map_err(io_err("list", raw))? {
                here.push(e);
            }
            here.sort_by_key(|e| e.file_name());
            for e in here {
                if entries.len() >= MAX_LIST_ENTRIES {
                    truncated = true;
                    break;
                }
                let meta = e.metadata().await.ok();
                let is_dir = meta.as_ref().is_some_and(|m| m.is_dir());
                let rel = e
                    .path()
                    .strip_prefix(&root)
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|_| e.path());
                entries.push(DirEntry {
                    name: rel.display().to_string(),
                    kind: if is_dir { "dir" } else { "file" },
                    size: if is_dir { None } else { meta.map(|m| m.len()) },
                });
                if recursive && is_dir && depth < 3 {
                    stack.push((e.path(), depth + 1));
                }
            }
        }
        Ok(ListDirOutput {
            status: "ok",
            path: display(ctx, &root),
            entries,
            truncated,
        })
    }
}

pub struct WriteFile;

/// What `write_file` wrote.
#[derive(Serialize, JsonSchema)]
pub struct WriteFileOutput {
    status: &'static str,
    path: String,
    bytes: usize,
    appended: bool,
}

impl TypedTool for WriteFile {
    type Args = WriteFileArgs;
    type Output = WriteFileOutput;

    const NAME: &'static str = names::WRITE_FILE;
    const CAPS: Caps = Caps::WRITES_FILES;
    fn description(&self) -> &str {
        "Write a text file in the workspace (creates folders; replaces the file atomically, or appends)."
    }
    fn repeatable(&self) -> bool {
        true
    }
    async fn run(
        &self,
        args: WriteFileArgs,
        ctx: &ToolContext,
    ) -> Result<WriteFileOutput, ToolError> {
        let raw = args.path.as_str();
        let append = args.append.unwrap_or(false);
        let path = resolve_path(ctx, raw)?;
        if path.is_dir() {
            return Err(ToolError::failed(
                "is_a_directory",
                format!("'{raw}' is a directory"),
            ));
        }
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(io_err("create folder for", raw))?;
        }
        let written = args.content.len();
        store_file(&path, args.content.into_bytes(), append, raw).await?;
        Ok(WriteFileOutput {
            status: "ok",
            path: display(ctx, &path),
            bytes: written,
            appended: append,
        })
    }
}

pub struct EditFile;

/// How many replacements `edit_file` made.
#[derive(Serialize, JsonSchema)]
pub struct EditFileOutput {
    status: &'static str,
    path: String,
    replacements: usize,
}

impl TypedTool for EditFile {
    type Args = EditFileArgs;
    type Output = EditFileOutput;

    const NAME: &'static str = names::EDIT_FILE;
    const CAPS: Caps = Caps::WRITES_FILES;
    fn description(&self) -> &str {
        "Replace an exact piece of text in a workspace file (must match once unless replace_all)."
    }
    fn repeatable(&self) -> bool {
        true
    }
    async fn run(
        &self,
        args: EditFileArgs,
        ctx: &ToolContext,
    ) -> Result<EditFileOutput, ToolError> {
        let raw = args.path.as_str();
        let (old, new) = (args.old_string.as_str(), args.new_string.as_str());
        let all = args.replace_all.unwrap_or(false);
        if old.is_empty() {
            return Err(ToolError::InvalidArguments(
                "'old_string' must not be empty".into(),
            ));
        }
        let path = resolve_path(ctx, raw)?;
        let text = read_text(&path, raw).await?;
        let count = text.matches(old).count();
        if count == 0 {
            return Err(ToolError::failed(
                "no_match",
                format!(
                    "'old_string' was not found in '{raw}'; read the file and copy the text exactly"
                ),
            ));
        }
        if count > 1 && !all {
            return Err(ToolError::failed(
                "ambiguous_match",
                format!(
                    "'old_string' occurs {count} times in '{raw}'; add context to make it unique or set replace_all"
                ),
            ));
        }
        let updated = if all {
            text.replace(old, new)
        } else {
            text.replacen(old, new, 1)
        };
        store_file(&path, updated.into_bytes(), false, raw).await?;
        Ok(EditFileOutput {
            status: "ok",
            path: display(ctx, &path),
            replacements: if all { count } else { 1 },
        })
    }
}

impl Builtin for ReadFile {
    fn build(_: &ToolEnv) -> Option<Self> {
        Some(ReadFile)
    }
}

impl Builtin for ListDir {
    fn build(_: &ToolEnv) -> Option<Self> {
        Some(ListDir)
    }
}

impl Builtin for WriteFile {
    fn build(_: &ToolEnv) -> Option<Self> {
        Some(WriteFile)
    }
}

impl Builtin for EditFile {
    fn build(_: &ToolEnv) -> Option<Self> {
        Some(EditFile)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Tool;
    use serde_json::{Value, json};

    fn ctx(root: &Path) -> ToolContext {
        crate::tools::test_context(root.join("run"), root.join("ws"))
    }

    async fn call(tool: &dyn Tool, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        tool.call(args, ctx)
            .await
            .map(|s| serde_json::from_str(&s).unwrap())
    }

    #[tokio::test]
    async fn write_read_edit_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        let w = call(
            &WriteFile,
            json!({"path": "notes/a.md", "content": "one\ntwo\nthree\n"}),
            &c,
        )
        .await
        .unwrap();
        assert_eq!(w["path"], "notes/a.md");
        let r = call(
            &ReadFile,
            json!({"path": "notes/a.md", "offset": 2, "limit": 1}),
            &c,
        )
        .await
        .unwrap();
        assert_eq!(r["content"], "two\n");
        assert_eq!(r["next_offset"], 3);
        assert_eq!(r["total_lines"], 3);
        call(
            &EditFile,
            json!({"path": "notes/a.md", "old_string": "two", "new_string": "2"}),
            &c,
        )
        .await
        .unwrap();
        let r = call(&ReadFile, json!({"path": "notes/a.md"}), &c)
            .await
            .unwrap();
        assert_eq!(r["content"], "one\n2\nthree\n");
        assert_eq!(r["complete"], true);
        let e = call(
            &EditFile,
            json!({"path": "notes/a.md", "old_string": "zzz", "new_string": "q"}),
            &c,
        )
        .await
        .unwrap_err();
        assert_eq!(e.code(), "no_match");
        let l = call(&ListDir, json!({"recursive": true}), &c)
            .await
            .unwrap();
        let names: Vec<&str> = l["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["notes", "notes/a.md"]);
    }

    #[tokio::test]
    async fn escapes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        std::fs::write(dir.path().join("secret.txt"), "s").unwrap();
        for p in ["../secret.txt", "/etc/passwd", "a/../../secret.txt"] {
            let e = call(&ReadFile, json!({"path": p}), &c).await.unwrap_err();
            assert_eq!(e.code(), "path_outside_workspace", "{p}: {e}");
            assert!(e.to_string().contains("outside the workspace"));
        }
        std::os::unix::fs::symlink(dir.path(), c.workspace.join("link")).unwrap();
        let e = call(
            &WriteFile,
            json!({"path": "link/x.txt", "content": "x"}),
            &c,
        )
        .await
        .unwrap_err();
        assert_eq!(e.code(), "path_outside_workspace");
        assert!(!dir.path().join("x.txt").exists());
        // The run dir is allowed by absolute path.
        let inside = c.run_dir.join("config.json");
        call(
            &WriteFile,
            json!({"path": inside.to_str().unwrap(), "content": "{}"}),
            &c,
        )
        .await
        .unwrap();
        assert!(inside.exists());
    }

    #[tokio::test]
    async fn binary_and_ambiguous_inputs_get_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        std::fs::write(c.workspace.join("b.bin"), [0u8, 1, 2]).unwrap();
        assert_eq!(
            call(&ReadFile, json!({"path": "b.bin"}), &c)
                .await
                .unwrap_err()
                .code(),
            "binary_file"
        );
        std::fs::write(c.workspace.join("t.txt"), "x x").unwrap();
        let e = call(
            &EditFile,
            json!({"path": "t.txt", "old_string": "x", "new_string": "y"}),
            &c,
        )
        .await
        .unwrap_err();
        assert_eq!(e.code(), "ambiguous_match");
        call(
            &EditFile,
            json!({"path": "t.txt", "old_string": "x", "new_string": "y", "replace_all": true}),
            &c,
        )
        .await
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(c.workspace.join("t.txt")).unwrap(),
            "y y"
        );
    }
}
