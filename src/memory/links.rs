//! BM25 semantic links between memory entries (docs §8.8, flag `links`).
//!
//! When an entry is saved, its title, description and body are scored as a
//! BM25 query against every other entry; the best matches (score ≥ 0.3, at
//! most `min(top_k, 10)`) go to a sidecar `<stem>.relations.json` beside the
//! entry file. Recall appends linked entries to its results (docs §8.4).
//!
//! A link's `target` is the entry's path relative to the entries folder
//! (`project_x.md`, or `project/x.md` in the category layout): the
//! original's file name, made unambiguous across folders.
//!
//! Tokens are the compression tokenizer's (docs §8.6): 3+ character ASCII
//! runs and single non-Latin characters, duplicates kept, so term frequency
//! counts.

use std::collections::{HashMap, HashSet};
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::MemoryError;
use super::atomic::write_atomic;
use super::entry::{Entry, format_ts};
use super::hierarchy::read_entry;
use super::store::MemoryStore;
use super::tokenize::compression_tokens;

/// BM25 term-frequency saturation.
pub const K1: f64 = 1.5;
/// BM25 length normalisation.
pub const B: f64 = 0.75;
/// Links scoring below this are not kept.
pub const MIN_SCORE: f64 = 0.3;
/// Links kept per entry unless the caller asks otherwise.
pub const DEFAULT_TOP_K: usize = 5;
/// Hard cap on links per entry, whatever `top_k` is.
pub const MAX_LINKS: usize = 10;
/// Sidecar format version.
pub const SIDECAR_VERSION: u32 = 1;
/// Sidecar file suffix, replacing the entry's `.md`.
pub const SIDECAR_SUFFIX: &str = ".relations.json";

/// One link from an entry to another.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// The target entry's file name (as [`super::Entry::file`]).
    pub target: String,
    /// BM25 score, 4 decimals.
    pub score: f64,
}

#[derive(Serialize, Deserialize)]
struct Sidecar {
    version: u32,
    #[serde(default)]
    links: Vec<Link>,
    #[serde(default)]
    updated_at: String,
}

/// Okapi BM25 over a fixed corpus of token lists.
#[derive(Debug)]
pub struct Bm25 {
    docs: Vec<HashMap<String, usize>>,
    lens: Vec<usize>,
    avgdl: f64,
    df: HashMap<String, usize>,
}

impl Bm25 {
    pub fn new<D: AsRef<[S]>, S: AsRef<str>>(corpus: &[D]) -> Self {
        let mut df: HashMap<String, usize> = HashMap::new();
        let mut docs = Vec::with_capacity(corpus.len());
        let mut lens = Vec::with_capacity(corpus.len());
        for doc in corpus {
            let mut tf: HashMap<String, usize> = HashMap::new();
            let doc = doc.as_ref();
            for t in doc {
                *tf.entry(t.as_ref().to_string()).or_insert(0) += 1;
            }
            for t in tf.keys() {
                *df.entry(t.clone()).or_insert(0) += 1;
            }
            lens.push(doc.len());
            docs.push(tf);
        }
        let total: usize = lens.iter().sum();
        let avgdl = if corpus.is_empty() {
            0.0
        } else {
            total as f64 / corpus.len() as f64
        };
        Bm25 {
            docs,
            lens,
            avgdl,
            df,
        }
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// `ln((N − n + 0.5) / (n + 0.5) + 1)`: always positive, larger for rarer terms.
    pub fn idf(&self, term: &str) -> f64 {
        let n = self.df.get(term).copied().unwrap_or(0) as f64;
        let total = self.docs.len() as f64;
        ((total - n + 0.5) / (n + 0.5) + 1.0).ln()
    }

    /// BM25 score of document `doc` for `query` (each query token counts,
    /// repeats included); 0 for an unknown document.
    pub fn score<S: AsRef<str>>(&self, query: &[S], doc: usize) -> f64 {
        let (Some(tf), Some(&len)) = (self.docs.get(doc), self.lens.get(doc)) else {
            return 0.0;
        };
        // All documents empty: no term can match, and this avoids 0/0.
        let ratio = if self.avgdl > 0.0 {
            len as f64 / self.avgdl
        } else {
            1.0
        };
        let norm = K1 * (1.0 - B + B * ratio);
        query
            .iter()
            .map(|q| {
                let f = tf.get(q.as_ref()).copied().unwrap_or(0) as f64;
                if f == 0.0 {
                    0.0
                } else {
                    self.idf(q.as_ref()) * f * (K1 + 1.0) / (f + norm)
                }
            })
            .sum()
    }
}

/// The tokens an entry is linked by: title, description and body.
pub fn entry_tokens(title: &str, description: &str, body: &str) -> Vec<String> {
    compression_tokens(&format!("{title} {description} {body}"))
}

/// The links of a query against `corpus` (`(target, tokens)` pairs, the
/// query's own entry excluded by the caller): scores ≥ [`MIN_SCORE`], best
/// first (ties by target name, so the result is deterministic), at most
/// `min(top_k, MAX_LINKS)`, scores rounded to 4 decimals. No query tokens → [].
pub fn compute_links(
    query: &[String],
    corpus: &[(String, Vec<String>)],
    top_k: usize,
) -> Vec<Link> {
    if query.is_empty() || corpus.is_empty() {
        return Vec::new();
    }
    let docs: Vec<&[String]> = corpus.iter().map(|(_, t)| t.as_slice()).collect();
    let bm25 = Bm25::new(&docs);
    let mut scored: Vec<(f64, &str)> = corpus
        .iter()
        .enumerate()
        .map(|(i, (target, _))| (bm25.score(query, i), target.as_str()))
        .filter(|(s, _)| s.is_finite() && *s >= MIN_SCORE)
        .collect();
    scored.sort_by(|a, b| {
        b.0.partial_cmp(&a.0)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.1.cmp(b.1))
    });
    scored
        .into_iter()
        .take(top_k.min(MAX_LINKS))
        .map(|(s, t)| Link {
            target: t.to_string(),
            score: (s * 10_000.0).round() / 10_000.0,
        })
        .collect()
}

/// `<dir>/<stem>.relations.json` for the entry file `<dir>/<stem>.md`.
pub fn sidecar_path(entry_path: &Path) -> PathBuf {
    let name = entry_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_suffix(".md").unwrap_or(&name);
    entry_path.with_file_name(format!("{stem}{SIDECAR_SUFFIX}"))
}

/// Writes the sidecar of `entry_path` atomically.
pub fn save_links(
    entry_path: &Path,
    links: &[Link],
    now: DateTime<Utc>,
) -> Result<(), MemoryError> {
    let sidecar = Sidecar {
        version: SIDECAR_VERSION,
        links: links.to_vec(),
        updated_at: format_ts(now),
    };
    let json = serde_json::to_string_pretty(&sidecar)
        .map_err(|e| MemoryError::Invalid(format!("cannot encode links: {e}")))?;
    write_atomic(&sidecar_path(entry_path), json.as_bytes())
}

/// The links of `entry_path`: `[]` when the sidecar is missing or unreadable
/// (links are a hint; a bad sidecar must not break recall). Links with an
/// unsafe target (not a plain relative `.md` path) are dropped.
pub fn load_links(entry_path: &Path) -> Vec<Link> {
    let path = sidecar_path(entry_path);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Vec::new();
    };
    match serde_json::from_str::<Sidecar>(&text) {
        Ok(s) => s
            .links
            .into_iter()
            .filter(|l| l.score.is_finite() && is_safe_target(&l.target))
            .collect(),
        Err(e) => {
            tracing::debug!(path = %path.display(), "unreadable links sidecar: {e}");
            Vec::new()
        }
    }
}

/// Deletes the sidecar of `entry_path`; a missing one is fine.
pub fn remove_links(entry_path: &Path) -> Result<(), MemoryError> {
    let path = sidecar_path(entry_path);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(MemoryError::io("remove", path, e)),
    }
}

/// A target the store may join to its entries folder: relative, no `..`,
/// a `.md` file. Sidecars are plain files a user (or another tool) can edit.
pub fn is_safe_target(target: &str) -> bool {
    target.ends_with(".md")
        && Path::new(target)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

/// Every sidecar in `dir` and its immediate sub-folders (flat or
/// category layout), sorted.
pub fn sidecars_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    if let Ok(rd) = std::fs::read_dir(dir) {
        dirs.extend(
            rd.flatten()
                .filter(|d| d.file_type().map(|t| t.is_dir()).unwrap_or(false))
                .map(|d| d.path()),
        );
    }
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        out.extend(rd.flatten().map(|e| e.path()).filter(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy())
                .is_some_and(|n| n.ends_with(SIDECAR_SUFFIX) && !n.starts_with('.'))
        }));
    }
    out.sort();
    out
}

/// The entry file a sidecar belongs to.
pub fn entry_of_sidecar(sidecar: &Path) -> Option<PathBuf> {
    let name = sidecar.file_name()?.to_string_lossy().into_owned();
    let stem = name.strip_suffix(SIDECAR_SUFFIX)?;
    Some(sidecar.with_file_name(format!("{stem}.md")))
}

/// Rewrites every sidecar under `dir` whose links point at one of `from`:
/// such links move to `to` (an entry renamed by an overwrite) or are dropped
/// (`None`: the entry was removed or archived). A target already linked
/// keeps its higher score. Returns how many sidecars changed.
pub fn retarget_all(
    dir: &Path,
    from: &[String],
    to: Option<&str>,
    now: DateTime<Utc>,
) -> Result<usize, MemoryError> {
    if from.is_empty() {
        return Ok(0);
    }
    let from: HashSet<&str> = from.iter().map(String::as_str).collect();
    let mut changed = 0;
    for sidecar in sidecars_under(dir) {
        let Some(entry) = entry_of_sidecar(&sidecar) else {
            continue;
        };
        let links = load_links(&entry);
        if !links.iter().any(|l| from.contains(l.target.as_str())) {
            continue;
        }
        // Targets are relative to `dir` (`project_x.md`, `project/x.md`).
        let own = entry
            .strip_prefix(dir)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut out: Vec<Link> = Vec::with_capacity(links.len());
        for mut l in links {
            if from.contains(l.target.as_str()) {
                match to {
                    Some(t) => l.target = t.to_string(),
                    None => continue,
                }
            }
            // Never a link to itself (the renamed entry's own sidecar).
            if l.target == own {
                continue;
            }
            match out.iter_mut().find(|o| o.target == l.target) {
                Some(o) => o.score = o.score.max(l.score),
                None => out.push(l),
            }
        }
        out.sort_by(|a, b| {
            b.score
                .partial_cmp(&a.score)
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        save_links(&entry, &out, now)?;
        changed += 1;
    }
    Ok(changed)
}

/// Entry ids referenced as `[[abcdef]]` (exactly six hex digits) in `text`,
/// lower-cased, first occurrence order, without repeats. Anything else
/// between double brackets is ignored.
pub fn parse_wikilinks(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("[[") {
        let after = &rest[start + 2..];
        let candidate = after.get(..6);
        let closed = after.get(6..8) == Some("]]");
        if let Some(id) = candidate
            && closed
            && id.bytes().all(|b| b.is_ascii_hexdigit())
        {
            let id = id.to_ascii_lowercase();
            if !out.contains(&id) {
                out.push(id);
            }
            rest = &after[8..];
        } else {
            // Step past one '[' only, so `[[[abcdef]]` still finds its link.
            rest = &rest[start + 1..];
        }
    }
    out
}

/// The store's side of links: kept in step with every write, removal and
/// GC archive, and followed by recall. Callers hold the write lock where
/// they write. Link upkeep never fails the operation that triggered it: a
/// lost sidecar only costs recall a hint, so problems are logged.
impl MemoryStore {
    /// After `file` was written with this content (replacing `stale` files
    /// of the same title): recompute its links against every other entry.
    /// Links that pointed at a replaced file now point at `file`; the
    /// original left them dangling, and kept stale sidecars after
    /// overwrites. With the flag off the entry's old sidecar is removed
    /// rather than left describing a body that no longer exists.
    pub(crate) fn relink_after_write(
        &self,
        file: &str,
        title: &str,
        description: &str,
        body: &str,
        stale: &[String],
        now: DateTime<Utc>,
    ) {
        let dir = self.entries_dir();
        let path = dir.join(file);
        for old in stale {
            warn_on(remove_links(&dir.join(old)), old);
        }
        if let Err(e) = retarget_all(dir, stale, Some(file), now) {
            tracing::warn!(file, "links to the replaced entry not updated: {e}");
        }
        if !self.flags().links {
            warn_on(remove_links(&path), file);
            return;
        }
        let entries = match self.list() {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(file, "links not computed: {e}");
                return;
            }
        };
        let corpus: Vec<(String, Vec<String>)> = entries
            .into_iter()
            .filter(|e| e.file != file)
            .map(|e| {
                let tokens = entry_tokens(&e.title, &e.description, &e.body);
                (e.file, tokens)
            })
            .collect();
        let links = compute_links(
            &entry_tokens(title, description, body),
            &corpus,
            DEFAULT_TOP_K,
        );
        warn_on(save_links(&path, &links, now), file);
    }

    /// After `files` were removed or archived: drop their sidecars and every
    /// link to them (the original deleted only the GC'd entry's own
    /// sidecar, and nothing on `forget`).
    pub(crate) fn forget_links(&self, files: &[String]) {
        let dir = self.entries_dir();
        for f in files {
            warn_on(remove_links(&dir.join(f)), f);
        }
        if let Err(e) = retarget_all(dir, files, None, Utc::now()) {
            tracing::warn!("links to removed entries not dropped: {e}");
        }
    }

    /// The links of `entry` whose target still exists, best first; `[]`
    /// with the flag off.
    pub fn links_of(&self, entry: &Entry) -> Vec<Link> {
        if !self.flags().links {
            return Vec::new();
        }
        load_links(&entry.path)
            .into_iter()
            .filter(|l| self.entries_dir().join(&l.target).is_file())
            .collect()
    }

    /// Link expansion (docs §8.4): appends the entries `found` links to,
    /// in result order then score order, until `max`. Then, which the
    /// original never did, entries named by id in a result's
    /// `related_memories` or as `[[abcdef]]` wikilinks in its body.
    pub(crate) fn expand_with_links(&self, found: &mut Vec<Entry>, max: usize) {
        if !self.flags().links || found.is_empty() || found.len() >= max {
            return;
        }
        let mut have: HashSet<String> = found.iter().map(|e| e.file.clone()).collect();
        let mut listing: Option<Vec<Entry>> = None;
        let mut extra: Vec<Entry> = Vec::new();
        'results: for e in found.iter() {
            for l in load_links(&e.path) {
                if found.len() + extra.len() >= max {
                    break 'results;
                }
                if have.contains(&l.target) {
                    continue;
                }
                if let Some(t) = self.resolve_target(&l.target, &mut listing)
                    && have.insert(t.file.clone())
                {
                    extra.push(t);
                }
            }
        }
        let ids: Vec<String> = found
            .iter()
            .flat_map(|e| {
                e.related
                    .iter()
                    .map(|r| r.to_ascii_lowercase())
                    .chain(parse_wikilinks(&e.body))
                    .collect::<Vec<_>>()
            })
            .collect();
        if !ids.is_empty() && found.len() + extra.len() < max {
            let all = self.listing(&mut listing);
            for id in ids {
                if found.len() + extra.len() >= max {
                    break;
                }
                if let Some(t) = all.iter().find(|e| e.id == id)
                    && have.insert(t.file.clone())
                {
                    extra.push(t.clone());
                }
            }
        }
        found.extend(extra);
    }

    /// A link target as an entry: by relative path, else by stem (an entry
    /// moved between the flat and the category layout keeps neither).
    fn resolve_target(&self, target: &str, listing: &mut Option<Vec<Entry>>) -> Option<Entry> {
        if !is_safe_target(target) {
            return None;
        }
        if let Ok(e) = read_entry(&self.entries_dir().join(target)) {
            return Some(e);
        }
        let stem = target.strip_suffix(".md").unwrap_or(target);
        self.listing(listing)
            .iter()
            .find(|e| e.stem() == stem)
            .cloned()
    }

    fn listing<'a>(&self, cache: &'a mut Option<Vec<Entry>>) -> &'a [Entry] {
        cache.get_or_insert_with(|| self.list().unwrap_or_default())
    }
}

fn warn_on(result: Result<(), MemoryError>, file: &str) {
    if let Err(e) = result {
        tracing::warn!(file, "memory links: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<String> {
        compression_tokens(s)
    }

    #[test]
    fn pm21_idf_is_larger_for_rarer_terms() {
        let bm = Bm25::new(&[
            toks("bitcoin trading strategy"),
            toks("bitcoin mining costs"),
            toks("bitcoin halving cycle"),
        ]);
        assert!(bm.idf("halving") > bm.idf("bitcoin"));
        assert!(
            bm.idf("bitcoin") > 0.0,
            "the +1 keeps common terms positive"
        );
        assert!(bm.idf("unseen") > bm.idf("halving"));
    }

    #[test]
    fn pm21_identical_query_scores_positive_and_no_overlap_scores_zero() {
        let doc = toks("yield curve inversion signals recession");
        let bm = Bm25::new(std::slice::from_ref(&doc));
        assert!(bm.score(&doc, 0) > 0.0);
        assert_eq!(bm.score(&toks("equity momentum factor"), 0), 0.0);
        assert_eq!(bm.score(&doc, 7), 0.0, "unknown document");
        let empty: Vec<Vec<String>> = vec![Vec::new()];
        assert_eq!(Bm25::new(&empty).score(&doc, 0), 0.0);
    }

    #[test]
    fn pm21_links_threshold_cap_and_empty_query() {
        let query = toks("bitcoin halving supply shock miners rewards");
        let mut corpus: Vec<(String, Vec<String>)> = (0..15)
            .map(|i| {
                (
                    format!("project_btc{i:02}.md"),
                    toks(&format!("bitcoin halving supply shock note {i}")),
                )
            })
            .collect();
        corpus.push(("project_other.md".into(), toks("utilities dividend yield")));
        let links = compute_links(&query, &corpus, 15);
        assert_eq!(links.len(), MAX_LINKS, "{links:?}");
        assert!(links.iter().all(|l| l.score >= MIN_SCORE));
        assert!(!links.iter().any(|l| l.target == "project_other.md"));
        assert!(links.windows(2).all(|w| w[0].score >= w[1].score));
        assert_eq!(compute_links(&query, &corpus, 3).len(), 3);
        assert!(compute_links(&[], &corpus, 5).is_empty());
        // One shared term in a two-document corpus scores below 0.3.
        let weak = vec![
            ("a.md".to_string(), toks("bitcoin")),
            ("b.md".to_string(), toks("bitcoin")),
        ];
        let single = toks("bitcoin");
        let bm = Bm25::new(&[toks("bitcoin"), toks("bitcoin")]);
        assert!(bm.score(&single, 0) < MIN_SCORE);
        assert!(compute_links(&single, &weak, 5).is_empty());
    }

    #[test]
    fn pm21_sidecar_round_trip_missing_and_remove() {
        let tmp = tempfile::tempdir().unwrap();
        let entry = tmp.path().join("project_btc.md");
        assert_eq!(
            sidecar_path(&entry),
            tmp.path().join("project_btc.relations.json")
        );
        assert!(load_links(&entry).is_empty(), "missing sidecar → []");
        remove_links(&entry).unwrap();
        let links = vec![
            Link {
                target: "project_eth.md".into(),
                score: 1.2346,
            },
            Link {
                target: "user_x.md".into(),
                score: 0.5,
            },
        ];
        save_links(&entry, &links, Utc::now()).unwrap();
        assert_eq!(load_links(&entry), links);
        let raw: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(sidecar_path(&entry)).unwrap()).unwrap();
        assert_eq!(raw["version"], 1);
        assert!(raw["updated_at"].as_str().is_some_and(|s| !s.is_empty()));
        assert_eq!(raw["links"][0]["target"], "project_eth.md");
        remove_links(&entry).unwrap();
        assert!(!sidecar_path(&entry).exists());
        remove_links(&entry).unwrap();
        // Garbage and unsafe targets are ignored, not errors.
        std::fs::write(sidecar_path(&entry), "{not json").unwrap();
        assert!(load_links(&entry).is_empty());
        save_links(
            &entry,
            &[
                Link {
                    target: "../../etc/passwd.md".into(),
                    score: 1.0,
                },
                Link {
                    target: "/abs.md".into(),
                    score: 1.0,
                },
            ],
            Utc::now(),
        )
        .unwrap();
        assert!(load_links(&entry).is_empty());
    }

    #[test]
    fn retarget_moves_or_drops_links() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("project_a.md");
        let l = |t: &str, s: f64| Link {
            target: t.into(),
            score: s,
        };
        save_links(
            &a,
            &[l("project_b.md", 0.9), l("user_b.md", 0.5)],
            Utc::now(),
        )
        .unwrap();
        let n = retarget_all(
            tmp.path(),
            &["project_b.md".into()],
            Some("user_b.md"),
            Utc::now(),
        )
        .unwrap();
        assert_eq!(n, 1);
        assert_eq!(load_links(&a), vec![l("user_b.md", 0.9)]);
        retarget_all(tmp.path(), &["user_b.md".into()], None, Utc::now()).unwrap();
        assert!(load_links(&a).is_empty());
        assert_eq!(
            retarget_all(tmp.path(), &["nothing.md".into()], None, Utc::now()).unwrap(),
            0
        );
    }

    #[test]
    fn pm21_wikilinks_parsed_deduped_invalid_ignored() {
        let text = "see [[abcdef]] and [[ABCDEF]] and [[0a1b2c]], again [[abcdef]]; \
                    not [[abcde]] [[abcdefa]] [[ghijkl]] [abcdef] [[ abcdef]] [[abc]]d] \
                    but [[[123456]]] and 中[[fedcba]]文 [[éééé]]";
        assert_eq!(
            parse_wikilinks(text),
            vec!["abcdef", "0a1b2c", "123456", "fedcba"]
        );
        assert!(parse_wikilinks("").is_empty());
        assert!(parse_wikilinks("[[").is_empty());
    }
}
