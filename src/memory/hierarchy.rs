//! Category folders for memory entries (the `hierarchy` flag, docs §8.2–§8.3).
//!
//! With the flag on, new entries go to `entries/<type>/<slug>.md` (`user/`,
//! `feedback/`, `project/`, `reference/`); with it off, to the flat
//! `entries/<type>_<slug>.md`. Reading always covers both (the base folder
//! plus the four category folders), so switching the flag never hides an
//! entry; the original scanned the category folders only with the flag on.
//!
//! An entry's `file` is its path relative to the entries folder:
//! `project_btc.md` (flat) or `project/btc.md` (category), so every
//! `entries_dir.join(file)` in the store works in both layouts.
//!
//! `.hierarchy.yaml` (in the entries folder) summarises the categories. The
//! original wrote it only from a helper nothing called, so it was always
//! stale or missing (docs §12.5); the store refreshes it after every add,
//! remove and GC archive while the flag is on.

use std::collections::{BTreeMap, HashSet};
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::MemoryError;
use super::atomic::write_atomic;
use super::entry::{self, Entry, MemoryType};
use super::tokenize::{recall_token_set, recall_tokens};

/// The category summary file, in the entries folder.
pub const INDEX_FILE: &str = ".hierarchy.yaml";
/// Keywords kept per category in [`INDEX_FILE`].
pub const MAX_CATEGORY_KEYWORDS: usize = 10;

/// The category folder names, in spec order.
pub fn categories() -> impl Iterator<Item = &'static str> {
    MemoryType::ALL.into_iter().map(MemoryType::as_str)
}

fn is_category(name: &str) -> bool {
    categories().any(|c| c == name)
}

/// The folder an entry of `memory_type` belongs in: its category folder,
/// or `base` itself for a type that is not one of the four.
pub fn route_entry(base: &Path, memory_type: &str) -> PathBuf {
    let t = memory_type.trim();
    if is_category(t) {
        base.join(t)
    } else {
        base.to_path_buf()
    }
}

/// The entry file (relative to the entries folder) for a type and slug:
/// `<type>/<slug>.md` with hierarchy on, `<type>_<slug>.md` off.
pub fn entry_file(hierarchy: bool, memory_type: MemoryType, slug: &str) -> String {
    if hierarchy {
        format!("{}/{slug}.md", memory_type.as_str())
    } else {
        format!("{}_{slug}.md", memory_type.as_str())
    }
}

/// The flat name's stem of an entry file: `project/btc.md` and
/// `project_btc.md` are both `project_btc`. Archive copies are named by it
/// (a `/` cannot be part of an archive file name), so an entry keeps its
/// archive history when it moves between layouts.
pub fn flat_stem(file: &str) -> String {
    file.strip_suffix(".md").unwrap_or(file).replace('/', "_")
}

/// Creates the four category folders under `base`.
pub fn ensure_dirs(base: &Path) -> Result<(), MemoryError> {
    for c in categories() {
        let dir = base.join(c);
        std::fs::create_dir_all(&dir).map_err(|e| MemoryError::io("create", &dir, e))?;
    }
    Ok(())
}

/// Reads an entry file under the entries folder, with `file` relative to
/// it: a file whose folder is one of the four categories is
/// `<category>/<name>`. (The store only ever reads files directly in the
/// entries folder or in a category folder of it.)
pub fn read_entry(path: &Path) -> std::io::Result<Entry> {
    let mut e = entry::read_entry(path)?;
    if let Some(cat) = path
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .filter(|n| is_category(n))
    {
        e.file = format!("{cat}/{}", e.file);
    }
    Ok(e)
}

fn base_name(rel: &str) -> &str {
    rel.rsplit('/').next().unwrap_or(rel)
}

/// Entry files of `base` and its category folders, relative to `base`,
/// sorted by file name (then by folder): `*.md`, not hidden, not
/// `MEMORY.md`. Missing folders are empty. Reads only; see
/// [`recover_orphans`] for the one repair the store makes first.
pub fn scan_all(base: &Path) -> Result<Vec<String>, MemoryError> {
    let mut out = md_files(base, None)?;
    for c in categories() {
        out.extend(md_files(&base.join(c), Some(c))?);
    }
    out.sort_by(|a, b| base_name(a).cmp(base_name(b)).then_with(|| a.cmp(b)));
    Ok(out)
}

fn md_files(dir: &Path, prefix: Option<&str>) -> Result<Vec<String>, MemoryError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        // A category path that is not a folder holds no entries.
        Err(_) if prefix.is_some() && !dir.is_dir() => return Ok(Vec::new()),
        Err(e) => return Err(MemoryError::io("list", dir, e)),
    };
    Ok(rd
        .flatten()
        .filter(|d| d.file_type().map(|t| t.is_file()).unwrap_or(false))
        .filter_map(|d| d.file_name().to_str().map(str::to_string))
        .filter(|n| n.ends_with(".md") && !n.starts_with('.') && n != "MEMORY.md")
        .map(|n| match prefix {
            Some(p) => format!("{p}/{n}"),
            None => n,
        })
        .collect())
}

/// Renames `from` to `to` unless `to` exists; `Ok(false)` when it does.
/// A hard link refuses an existing target, so no check-then-rename race.
fn move_no_replace(from: &Path, to: &Path) -> std::io::Result<bool> {
    match std::fs::hard_link(from, to) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => return Ok(false),
        // No hard links on this filesystem: check, then rename.
        Err(_) => {
            if to.exists() {
                return Ok(false);
            }
            std::fs::rename(from, to)?;
            return Ok(true);
        }
    }
    if let Err(e) = std::fs::remove_file(from) {
        // Leave one copy, not two.
        let _ = std::fs::remove_file(to);
        return Err(e);
    }
    Ok(true)
}

fn starts_with_frontmatter(path: &Path) -> bool {
    let mut head = [0u8; 3];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .map(|()| &head == b"---")
        .unwrap_or(false)
}

/// Renames suffix-less entry files (content starting with `---`) in `base`
/// and its category folders to `<name>.md`, unless that file exists (spec
/// §8.3): entries written by a tool that forgot the suffix become visible.
/// Other files are left alone; running it again changes nothing. Returns the
/// new paths; failures are logged and skipped.
pub fn recover_orphans(base: &Path) -> Vec<PathBuf> {
    let mut moved = Vec::new();
    let dirs = std::iter::once(base.to_path_buf()).chain(categories().map(|c| base.join(c)));
    for dir in dirs {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for d in rd.flatten() {
            let path = d.path();
            let Some(name) = d.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if name.starts_with('.')
                || path.extension().is_some()
                || !d.file_type().map(|t| t.is_file()).unwrap_or(false)
                || !starts_with_frontmatter(&path)
            {
                continue;
            }
            let target = dir.join(format!("{name}.md"));
            match move_no_replace(&path, &target) {
                Ok(true) => {
                    tracing::info!(from = %path.display(), to = %target.display(), "memory entry without .md suffix renamed");
                    moved.push(target);
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(path = %path.display(), "cannot rename the memory entry without .md suffix: {e}")
                }
            }
        }
    }
    moved
}

/// One category of [`INDEX_FILE`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CategorySummary {
    pub name: String,
    /// Entry files in the category folder.
    pub count: usize,
    /// The most frequent tokens of its entries' titles and keywords, most
    /// frequent first (ties alphabetical), at most [`MAX_CATEGORY_KEYWORDS`].
    pub keywords: Vec<String>,
}

/// Summaries of the four categories from the files (every one is listed,
/// empty ones with count 0).
pub fn summarize(base: &Path) -> Result<Vec<CategorySummary>, MemoryError> {
    let files = scan_all(base)?;
    let mut out = Vec::new();
    for c in categories() {
        let prefix = format!("{c}/");
        let mut freq: BTreeMap<String, usize> = BTreeMap::new();
        let mut count = 0;
        for f in files.iter().filter(|f| f.starts_with(&prefix)) {
            count += 1;
            let Ok(e) = read_entry(&base.join(f)) else {
                continue;
            };
            // Each entry counts a token once, so one long title cannot dominate.
            let tokens: HashSet<String> =
                recall_tokens(&format!("{} {}", e.title, e.keywords.join(" ")))
                    .into_iter()
                    .collect();
            for t in tokens {
                *freq.entry(t).or_default() += 1;
            }
        }
        let mut ranked: Vec<(String, usize)> = freq.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out.push(CategorySummary {
            name: c.to_string(),
            count,
            keywords: ranked
                .into_iter()
                .take(MAX_CATEGORY_KEYWORDS)
                .map(|(t, _)| t)
                .collect(),
        });
    }
    Ok(out)
}

fn render_index(summaries: &[CategorySummary], now: DateTime<Utc>) -> String {
    let mut out = String::from("categories:\n");
    for s in summaries {
        // Keywords are retrieval tokens (ASCII alphanumerics or single
        // non-Latin letters), so a plain flow list needs no quoting.
        out.push_str(&format!(
            "  {}:\n    count: {}\n    keywords: [{}]\n",
            s.name,
            s.count,
            s.keywords.join(", ")
        ));
    }
    out.push_str(&format!("rebuilt_at: {}\n", entry::format_ts(now)));
    out
}

/// Rewrites [`INDEX_FILE`] from the files (atomically); returns its path.
pub fn rebuild_index(base: &Path, now: DateTime<Utc>) -> Result<PathBuf, MemoryError> {
    let summaries = summarize(base)?;
    let path = base.join(INDEX_FILE);
    write_atomic(&path, render_index(&summaries, now).as_bytes())?;
    Ok(path)
}

/// [`rebuild_index`] when `enabled`, for the store after a change: a failure
/// is logged, never fails the change itself (the file is a summary).
pub fn refresh_index(base: &Path, enabled: bool) {
    if !enabled {
        return;
    }
    if let Err(e) = rebuild_index(base, Utc::now()) {
        tracing::warn!("cannot update {INDEX_FILE}: {e}");
    }
}

/// Reads [`INDEX_FILE`] as [`rebuild_index`] writes it; `None` when it is
/// missing or not in that shape.
pub fn read_index(base: &Path) -> Option<Vec<CategorySummary>> {
    let text = std::fs::read_to_string(base.join(INDEX_FILE)).ok()?;
    let mut out: Vec<CategorySummary> = Vec::new();
    let mut in_categories = false;
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(' ') {
            in_categories = line.trim_end() == "categories:";
            continue;
        }
        if !in_categories {
            continue;
        }
        let trimmed = line.trim();
        if !line.starts_with("    ") {
            let name = trimmed.strip_suffix(':')?;
            out.push(CategorySummary {
                name: name.to_string(),
                count: 0,
                keywords: Vec::new(),
            });
            continue;
        }
        let current = out.last_mut()?;
        if let Some(n) = trimmed.strip_prefix("count:") {
            current.count = n.trim().parse().ok()?;
        } else if let Some(list) = trimmed.strip_prefix("keywords:") {
            let inner = list.trim().strip_prefix('[')?.strip_suffix(']')?;
            current.keywords = inner
                .split(',')
                .map(|k| k.trim().to_string())
                .filter(|k| !k.is_empty())
                .collect();
        }
    }
    Some(out)
}

/// Every entry file of `base`, the files of the categories whose keywords
/// share tokens with `query` first (most shared first), then the rest in
/// [`scan_all`] order. Nothing is dropped: a category summary can be stale
/// or miss a word, and pruning must not hide an entry. Uses
/// [`INDEX_FILE`], or the files when it is missing.
pub fn prune_search_scope(base: &Path, query: &str) -> Result<Vec<String>, MemoryError> {
    let q = recall_token_set(query);
    let summaries = match read_index(base) {
        Some(s) => s,
        None => summarize(base)?,
    };
    let mut ranked: Vec<(usize, String)> = summaries
        .into_iter()
        .map(|s| {
            let overlap = s.keywords.iter().filter(|k| q.contains(*k)).count();
            (overlap, s.name)
        })
        .filter(|(overlap, _)| *overlap > 0)
        .collect();
    // Stable: equal overlaps keep category order.
    ranked.sort_by_key(|r| std::cmp::Reverse(r.0));
    let files = scan_all(base)?;
    let mut out: Vec<String> = Vec::with_capacity(files.len());
    for (_, cat) in &ranked {
        let prefix = format!("{cat}/");
        out.extend(files.iter().filter(|f| f.starts_with(&prefix)).cloned());
    }
    let taken: HashSet<String> = out.iter().cloned().collect();
    out.extend(files.into_iter().filter(|f| !taken.contains(f)));
    Ok(out)
}

/// Moves the flat entry `file` (directly in `base`) into the folder of
/// `category`, dropping a leading `<category>_` from its name so it lands
/// where the store would write it (`project_btc.md` → `project/btc.md`).
/// Refuses files not directly in `base`, unknown categories and an existing
/// target. Returns the new file relative to `base`. The store's index and
/// `MEMORY.md` learn of the move on their next reconcile.
pub fn migrate_flat_entry(base: &Path, file: &str, category: &str) -> Result<String, MemoryError> {
    if !is_category(category) {
        return Err(MemoryError::Invalid(format!(
            "{category:?} is not a memory category (user, feedback, project, reference)"
        )));
    }
    if file.is_empty() || file.contains(['/', '\\']) || file.starts_with('.') {
        return Err(MemoryError::Invalid(format!(
            "{file:?} is not a file of the base memory folder"
        )));
    }
    let from = base.join(file);
    if !from.is_file() {
        return Err(MemoryError::Invalid(format!(
            "{} is not an entry file",
            from.display()
        )));
    }
    let name = file
        .strip_prefix(&format!("{category}_"))
        .filter(|n| !n.is_empty() && *n != ".md")
        .unwrap_or(file);
    let dir = base.join(category);
    std::fs::create_dir_all(&dir).map_err(|e| MemoryError::io("create", &dir, e))?;
    let to = dir.join(name);
    match move_no_replace(&from, &to) {
        Ok(true) => Ok(format!("{category}/{name}")),
        Ok(false) => Err(MemoryError::Invalid(format!(
            "{} already exists; {file} was not moved",
            to.display()
        ))),
        Err(e) => Err(MemoryError::io("move", &from, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FM: &str = "---\nname: n\ntype: project\n---\n\nbody\n";

    fn write(path: &Path, text: &str) {
        if let Some(p) = path.parent() {
            std::fs::create_dir_all(p).unwrap();
        }
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn routing_and_file_names() {
        let base = Path::new("/m/entries");
        assert_eq!(route_entry(base, "feedback"), base.join("feedback"));
        assert_eq!(route_entry(base, "diary"), base);
        assert_eq!(route_entry(base, ""), base);
        assert_eq!(
            entry_file(true, MemoryType::User, "x"),
            "user/x.md".to_string()
        );
        assert_eq!(entry_file(false, MemoryType::User, "x"), "user_x.md");
        assert_eq!(flat_stem("user/x.md"), "user_x");
        assert_eq!(flat_stem("user_x.md"), "user_x");
    }

    #[test]
    fn scan_covers_base_and_categories_sorted_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path();
        write(&base.join("user_b.md"), FM);
        write(&base.join("project/a.md"), FM);
        write(&base.join("feedback/c.md"), FM);
        write(&base.join("MEMORY.md"), "- x\n");
        write(&base.join("project/MEMORY.md"), "- x\n");
        write(&base.join(INDEX_FILE), "categories:\n");
        write(&base.join("notes.txt"), FM);
        write(&base.join("other/d.md"), FM);
        assert_eq!(
            scan_all(base).unwrap(),
            // By file name, not by path (which would put `feedback/` first).
            ["project/a.md", "feedback/c.md", "user_b.md"]
        );
        let e = read_entry(&base.join("project/a.md")).unwrap();
        assert_eq!(e.file, "project/a.md");
        assert_eq!(
            read_entry(&base.join("user_b.md")).unwrap().file,
            "user_b.md"
        );
        assert!(scan_all(&base.join("missing")).unwrap().is_empty());
    }

    #[test]
    fn orphans_renamed_once_never_over_an_existing_file() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path();
        write(&base.join("project/lost"), FM);
        write(&base.join("project/kept"), "---\nname: orphan\n---\nnew\n");
        write(&base.join("project/kept.md"), "original");
        write(&base.join("project/plain"), "no frontmatter");
        write(&base.join("stray"), FM);
        let moved = recover_orphans(base);
        assert_eq!(moved.len(), 2, "{moved:?}");
        assert!(base.join("project/lost.md").is_file());
        assert!(!base.join("project/lost").exists());
        assert!(base.join("stray.md").is_file());
        assert_eq!(
            std::fs::read_to_string(base.join("project/kept.md")).unwrap(),
            "original"
        );
        assert!(base.join("project/kept").exists());
        assert!(base.join("project/plain").exists());
        assert!(recover_orphans(base).is_empty(), "idempotent");
    }

    #[test]
    fn index_round_trips_and_orders_the_search_scope() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path();
        write(
            &base.join("feedback/fees.md"),
            "---\nname: trading fees\nkeywords: [slippage]\n---\nx\n",
        );
        write(
            &base.join("user/style.md"),
            "---\nname: answer style\n---\nx\n",
        );
        write(
            &base.join("project_flat.md"),
            "---\nname: flat one\n---\nx\n",
        );
        let now = entry::parse_ts("2026-03-01T00:00:00Z").unwrap();
        let path = rebuild_index(base, now).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("categories:\n"), "{text}");
        assert!(text.contains("rebuilt_at: 2026-03-01T00:00:00"), "{text}");
        let read = read_index(base).unwrap();
        assert_eq!(read, summarize(base).unwrap());
        let fb = read.iter().find(|s| s.name == "feedback").unwrap();
        assert_eq!(fb.count, 1);
        assert_eq!(fb.keywords, ["fees", "slippage", "trading"]);
        let order = prune_search_scope(base, "what slippage do we assume?").unwrap();
        assert_eq!(order[0], "feedback/fees.md");
        assert_eq!(order.len(), 3);
        let order = prune_search_scope(base, "answer style").unwrap();
        assert_eq!(order[0], "user/style.md");
    }

    #[test]
    fn migrate_moves_base_files_only() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path();
        write(&base.join("project_btc.md"), FM);
        write(&base.join("user/x.md"), FM);
        assert!(migrate_flat_entry(base, "project_btc.md", "diary").is_err());
        assert!(migrate_flat_entry(base, "user/x.md", "project").is_err());
        assert!(migrate_flat_entry(base, "missing.md", "project").is_err());
        assert_eq!(
            migrate_flat_entry(base, "project_btc.md", "project").unwrap(),
            "project/btc.md"
        );
        assert!(!base.join("project_btc.md").exists());
        write(&base.join("project_btc.md"), "newer");
        assert!(migrate_flat_entry(base, "project_btc.md", "project").is_err());
        assert_eq!(
            std::fs::read_to_string(base.join("project/btc.md")).unwrap(),
            FM
        );
    }
}
