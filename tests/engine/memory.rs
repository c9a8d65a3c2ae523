//! Persistent memory (spec §8, §10.1, §10.2), skills (§4.6, §9) and the
//! memory CLI. Test names carry the spec case they re-express (`mc11_…`,
//! `pm16_…`); the pure cases (MC-1..15, PM-1, PM-12, PM-13, SK-1..3) are
//! unit tests next to the code in `src/memory/`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};
use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use vibedesk::agent::context::skill_descriptions;
use vibedesk::agent::recall::{MemoryRecall, memory_snapshot, skill_lines};
use vibedesk::agent::{Loop, LoopDeps};
use vibedesk::llm::{ChatRequest, ChunkStream, LlmError, Provider};
use vibedesk::memory::entry::{format_ts, read_entry};
use vibedesk::memory::maintenance;
use vibedesk::memory::store::{AddOutcome, Reinforce, ReinforceEvent};
use vibedesk::memory::{
    Level, MemoryError, MemoryFlags, MemoryStore, MemoryType, NewEntry, SkillSet,
};
use vibedesk::tools::builtin::memory::register_memory_tools;
use vibedesk::tools::{BackgroundQueue, Registry, ToolContext};

use crate::support::harness::{
    Home, call_turn, registry_with, run_loop, scripted, test_config, text_turn,
};

fn at(s: &str) -> DateTime<Utc> {
    vibedesk::memory::entry::parse_ts(s).unwrap()
}

fn flags(preset: &str) -> MemoryFlags {
    MemoryFlags::preset(preset)
}

fn store(dir: &Path, f: MemoryFlags) -> MemoryStore {
    MemoryStore::open(dir.join("memory"), f).unwrap()
}

fn add(s: &MemoryStore, title: &str, body: &str, t: MemoryType) -> AddOutcome {
    s.add(NewEntry::new(title, body, t), Utc::now()).unwrap()
}

fn add_full(s: &MemoryStore, title: &str, desc: &str, body: &str, now: DateTime<Utc>) -> PathBuf {
    let mut n = NewEntry::new(title, body, MemoryType::Project);
    n.description = desc.into();
    match s.add(n, now).unwrap() {
        AddOutcome::Saved { path, .. } => path,
        AddOutcome::Duplicate => panic!("unexpected duplicate"),
    }
}

fn entry_files(s: &MemoryStore) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(s.entries_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    v.sort();
    v
}

fn archive_files(s: &MemoryStore) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(s.archive_dir()) {
        Ok(rd) => rd.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

fn titles(v: &[vibedesk::memory::Entry]) -> Vec<String> {
    v.iter().map(|e| e.title.clone()).collect()
}

/// Sets frontmatter fields of an entry file by hand (to age it).
fn set_fields(path: &Path, fields: &[(&str, &str)]) {
    let text = std::fs::read_to_string(path).unwrap();
    let out = vibedesk::memory::frontmatter::set_fields(&text, fields).unwrap();
    std::fs::write(path, out).unwrap();
}

const TWELVE: &str = "Bitcoin rallied strongly this week. Trading volume doubled on major exchanges. \
Analysts cited institutional demand for crypto assets. The market structure looks healthier than last year. \
Funding rates stayed neutral across perpetual swaps. Options traders bought upside calls. \
Ethereum lagged the broader crypto market. Stablecoin supply grew for the third month. \
Regulators signalled a clearer framework for custody. Miners sold a smaller share of rewards. \
Retail interest, measured by search trends, stayed muted. The trading desk expects volatility to rise.";

// ----- §10.1 at store level ----------------------------------------------------

#[test]
fn mc11_compression_archives_the_original_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("full"));
    let mut n = NewEntry::new("note", TWELVE, MemoryType::Project);
    n.keywords = vec!["bitcoin".into()];
    s.add(n, Utc::now()).unwrap();
    let path = s.get("note").unwrap().unwrap().path;
    let before = std::fs::read(&path).unwrap();
    let rec = s.compress_entry("note", Level::Daily, Utc::now()).unwrap();
    let after = read_entry(&path).unwrap();
    assert_eq!(after.level, Level::Daily);
    assert!(after.body.len() < TWELVE.len());
    assert!(after.body.starts_with("Keywords: bitcoin\n\n"));
    assert!(after.retention.is_some());
    let archive = rec.archive.unwrap();
    assert!(archive.starts_with(s.archive_dir()));
    assert_eq!(std::fs::read(&archive).unwrap(), before);
    assert!(rec.retention > 0.0 && rec.retention < 1.0);
}

// ----- archive safety (§12.6) ----------------------------------------------------

#[test]
fn compression_aborts_when_the_archive_cannot_be_written() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("full"));
    add(&s, "note", TWELVE, MemoryType::Project);
    let path = s.get("note").unwrap().unwrap().path;
    let before = std::fs::read(&path).unwrap();
    // Root-proof: a *file* where the archive directory should be.
    std::fs::write(s.archive_dir(), b"not a directory").unwrap();
    let err = s
        .compress_entry("note", Level::Daily, Utc::now())
        .unwrap_err();
    assert!(matches!(err, MemoryError::ArchiveFailed { .. }), "{err}");
    assert!(err.to_string().contains("unchanged"));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // The GC pass reports it and leaves the entry alone too.
    set_fields(&path, &[("last_accessed", "2020-01-01T00:00:00Z")]);
    let before = std::fs::read(&path).unwrap();
    let mut f = flags("full");
    f.decay = false;
    let report = s.run_gc_with(&f, false, Utc::now()).unwrap();
    assert!(report.compressions.is_empty());
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn daily_to_digest_never_overwrites_the_raw_archive() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("full"));
    add(&s, "note", TWELVE, MemoryType::Project);
    let path = s.get("note").unwrap().unwrap().path;
    let raw = std::fs::read(&path).unwrap();
    // Same instant for both steps: names must still differ.
    let now = Utc::now();
    let r1 = s.compress_entry("note", Level::Daily, now).unwrap();
    let daily = std::fs::read(&path).unwrap();
    let r2 = s.compress_entry("note", Level::Digest, now).unwrap();
    assert_ne!(r1.archive, r2.archive);
    assert_eq!(std::fs::read(r1.archive.as_ref().unwrap()).unwrap(), raw);
    assert_eq!(std::fs::read(r2.archive.as_ref().unwrap()).unwrap(), daily);
    assert_eq!(archive_files(&s).len(), 2);
    let e = read_entry(&path).unwrap();
    assert_eq!(e.level, Level::Digest);
    assert!(e.body.contains("Key concepts:"));
    // Digest is terminal.
    assert!(s.compress_entry("note", Level::Digest, now).is_err());
    // A GC archive of the same entry gets yet another name.
    set_fields(
        &path,
        &[
            ("created_at", "2020-01-01T00:00:00Z"),
            ("quality_score", "0.01"),
        ],
    );
    let report = s.run_gc(false, now).unwrap();
    assert_eq!(report.actions.len(), 1);
    let files = archive_files(&s);
    assert_eq!(files.len(), 3);
    assert_eq!(std::fs::read(r1.archive.as_ref().unwrap()).unwrap(), raw);
}

// ----- §10.2 -------------------------------------------------------------------

#[test]
fn pm02_add_creates_file_and_index_line() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("off"));
    let AddOutcome::Saved { path, .. } = add(&s, "My Fancy Skill!", "the body", MemoryType::User)
    else {
        panic!()
    };
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.contains("my_fancy_skill_"), "{name}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("---\n"));
    for line in [
        "\nname: My Fancy Skill!\n",
        "\ntype: user\n",
        "\ndescription: My Fancy Skill!\n",
    ] {
        assert!(text.contains(line), "{line:?} missing in {text}");
    }
    assert!(text.ends_with("\n\nthe body"));
    // Timestamps carry a zone (§12.9).
    assert!(text.contains(&format!("created_at: {}", &format_ts(Utc::now())[..10])));
    assert!(
        text.lines()
            .any(|l| l.starts_with("created_at: ") && l.ends_with('Z'))
    );
    let index = std::fs::read_to_string(s.memory_md_path()).unwrap();
    assert!(index.contains("My Fancy Skill!") && index.contains(&name));
}

#[test]
fn pm03_three_types_three_files() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("off"));
    add(&s, "a", "1", MemoryType::User);
    add(&s, "b", "2", MemoryType::Feedback);
    add(&s, "c", "3", MemoryType::Reference);
    assert_eq!(
        entry_files(&s),
        vec!["feedback_b.md", "reference_c.md", "user_a.md"]
    );
    assert!(s.memory_md_path().exists());
    assert_eq!(s.list().unwrap().len(), 3);
}

#[test]
fn pm04_same_title_overwrites() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("off"));
    add(&s, "overwrite", "v1", MemoryType::Project);
    let first = read_entry(&s.entries_dir().join("project_overwrite.md")).unwrap();
    add(&s, "overwrite", "v2", MemoryType::Project);
    assert_eq!(entry_files(&s), vec!["project_overwrite.md"]);
    let e = read_entry(&s.entries_dir().join("project_overwrite.md")).unwrap();
    assert_eq!(e.body, "v2");
    assert_eq!(
        (e.id.as_str(), e.created_at),
        (first.id.as_str(), first.created_at)
    );
    let index = std::fs::read_to_string(s.memory_md_path()).unwrap();
    assert_eq!(index.matches("[overwrite]").count(), 1);
    // A type change keeps one entry per title.
    add(&s, "overwrite", "v3", MemoryType::Reference);
    assert_eq!(entry_files(&s), vec!["reference_overwrite.md"]);
    let index = std::fs::read_to_string(s.memory_md_path()).unwrap();
    assert_eq!(index.matches("[overwrite]").count(), 1);
    assert_eq!(s.indexed_count(), Some(1));
}

/// The original rendered `related_memories: []` on every write, so saving a
/// new version of an entry dropped the ids a person had written there.
#[test]
fn a_replacing_save_keeps_related_memories() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("off"));
    let AddOutcome::Saved { path, .. } = add(&s, "btc regime", "v1", MemoryType::Project) else {
        panic!("not saved")
    };
    set_fields(&path, &[("related_memories", "[ab12cd, 0a33ff]")]);
    assert_eq!(read_entry(&path).unwrap().related, vec!["ab12cd", "0a33ff"]);
    add(&s, "btc regime", "v2", MemoryType::Project);
    let e = read_entry(&path).unwrap();
    assert_eq!(e.body, "v2");
    assert_eq!(e.related, vec!["ab12cd", "0a33ff"]);
    // A new entry starts with none.
    let AddOutcome::Saved { path: other, .. } = add(&s, "eth basis", "v1", MemoryType::Project)
    else {
        panic!("not saved")
    };
    let fresh = read_entry(&other).unwrap();
    assert!(fresh.related.is_empty());
}

#[test]
fn pm05_pm06_non_latin_and_symbol_titles_never_collide() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("off"));
    let titles = [
        "上证指数",
        "深证成指",
        "ตลาดหุ้น",
        "ราคาทอง",
        "سوق الأسهم",
        "سوق الذهب",
        "שוק ההון",
        "фондовый",
        "پول",
        "چول",
        "トヨタ 7203",
        "ソニー 7203",
        "🚀",
        "🎯",
    ];
    for (i, t) in titles.iter().enumerate() {
        add(&s, t, &format!("body {i}"), MemoryType::Project);
    }
    assert_eq!(entry_files(&s).len(), titles.len());
    for t in &titles[..8] {
        let e = s.get(t).unwrap().unwrap();
        assert_eq!(&e.title, t);
        let first: String = t.chars().filter(|c| c.is_alphanumeric()).take(2).collect();
        assert!(e.file.contains(&first), "{} should keep {first}", e.file);
    }
    add(&s, "🚀", "again", MemoryType::Project);
    assert_eq!(entry_files(&s).len(), titles.len());
    let AddOutcome::Saved { file, .. } = add(&s, "???", "q", MemoryType::User) else {
        panic!()
    };
    assert_ne!(file, "user_.md");
}

#[test]
fn pm07_blank_titles_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("off"));
    for t in ["", "   ", "\t\t"] {
        let err = s
            .add(NewEntry::new(t, "x", MemoryType::Project), Utc::now())
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("empty") || msg.contains("whitespace"), "{msg}");
    }
    assert!(entry_files(&s).is_empty());
}

#[test]
fn pm08_bodies_are_cleaned_and_capped_on_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("off"));
    add(
        &s,
        "dirty",
        "a\u{1b}[2Jb\u{0}c\u{7}d\u{9b}e\tf\ng",
        MemoryType::Project,
    );
    let e = s.get("dirty").unwrap().unwrap();
    assert_eq!(e.body, "a[2Jbcde\tf\ng");
    add(&s, "long", &"y".repeat(8_100), MemoryType::Project);
    let e = s.get("long").unwrap().unwrap();
    let raw = std::fs::read_to_string(&e.path).unwrap();
    let body = raw.split("---\n\n").nth(1).unwrap();
    assert!(body.chars().count() <= 8_000 && body.ends_with("chars]\n"));
    assert!(body.contains("[truncated at 8000"));
    add(&s, "exact", &"z".repeat(8_000), MemoryType::Project);
    assert_eq!(s.get("exact").unwrap().unwrap().body, "z".repeat(8_000));
    let small = MemoryStore::open(tmp.path().join("m2"), flags("off"))
        .unwrap()
        .with_max_entry_chars(100);
    small
        .add(
            NewEntry::new("t", "w".repeat(500), MemoryType::Project),
            Utc::now(),
        )
        .unwrap();
    assert!(
        small
            .get("t")
            .unwrap()
            .unwrap()
            .body
            .contains("[truncated at 100 chars]")
    );
}

fn pm09_store(f: MemoryFlags) -> (tempfile::TempDir, MemoryStore) {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), f);
    let now = Utc::now();
    add_full(
        &s,
        "btc-strategy",
        "BTC trading strategy",
        "Momentum entries on Bitcoin with tight stops.",
        now,
    );
    add_full(
        &s,
        "eth-notes",
        "Ethereum notes",
        "Gas fees and staking yields.",
        now,
    );
    add_full(
        &s,
        "a-share",
        "上证指数 观察",
        "上证指数在三千点附近震荡。",
        now,
    );
    add_full(
        &s,
        "cooking",
        "Pasta recipe",
        "Garlic, olive oil, tomato.",
        now,
    );
    add_full(
        &s,
        "body-only",
        "Misc",
        "A line that mentions trading once.",
        now,
    );
    add_full(
        &s,
        "meta-match",
        "trading journal",
        "Nothing else here.",
        now,
    );
    (tmp, s)
}

#[test]
fn pm09_find_relevant_index_and_scan() {
    for fts in [true, false] {
        let mut f = flags("full");
        f.fts_index = fts;
        let (_tmp, s) = pm09_store(f);
        let now = Utc::now();
        let r = s.find_relevant("Bitcoin trading", 5, now).unwrap();
        assert_eq!(r[0].title, "btc-strategy", "fts={fts}: {:?}", titles(&r));
        let r = s.find_relevant("上证指数", 5, now).unwrap();
        assert_eq!(titles(&r), vec!["a-share"], "fts={fts}");
        assert!(s.find_relevant("zebra quantum", 5, now).unwrap().is_empty());
        assert!(s.find_relevant("", 5, now).unwrap().is_empty());
        // Metadata (description) matches outrank body-only matches.
        let r = s.find_relevant("journal trading", 5, now).unwrap();
        let pos = |t: &str| titles(&r).iter().position(|x| x == t).unwrap();
        assert!(
            pos("meta-match") < pos("body-only"),
            "fts={fts}: {:?}",
            titles(&r)
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("full"));
    for i in 0..10 {
        add(
            &s,
            &format!("market note {i}"),
            "market breadth",
            MemoryType::Project,
        );
    }
    assert_eq!(s.find_relevant("market", 3, Utc::now()).unwrap().len(), 3);
}

#[test]
fn pm10_remove() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("full"));
    add(
        &s,
        "gone soon",
        "volatility regime note",
        MemoryType::Project,
    );
    assert!(s.remove("gone soon").unwrap());
    assert!(entry_files(&s).is_empty());
    assert!(
        !std::fs::read_to_string(s.memory_md_path())
            .unwrap()
            .contains("gone soon")
    );
    assert!(!s.remove("gone soon").unwrap());
    assert!(
        s.find_relevant("volatility regime", 5, Utc::now())
            .unwrap()
            .is_empty()
    );
    assert_eq!(s.indexed_count(), Some(0));
}

#[test]
fn pm11_snapshot_is_frozen_per_instance() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = store(tmp.path(), flags("off"));
    assert_eq!(empty.snapshot(), "");
    add(&empty, "first", "1", MemoryType::User);
    assert_eq!(empty.snapshot(), "", "own adds do not change the snapshot");
    let second = store(tmp.path(), flags("off"));
    assert!(second.snapshot().contains("first"));
    assert_eq!(memory_snapshot(&second), second.snapshot());
    add(&second, "second", "2", MemoryType::User);
    assert!(!second.snapshot().contains("second"));
    assert!(second.read_snapshot().contains("second"));
}

#[test]
fn snapshot_keeps_the_newest_200_and_says_how_many_are_hidden() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("off"));
    let t0 = Utc::now();
    for i in 0..205 {
        s.add(
            NewEntry::new(format!("m{i:03}"), "x", MemoryType::Project),
            t0 + Duration::seconds(i),
        )
        .unwrap();
    }
    let snap = s.read_snapshot();
    assert!(snap.starts_with("(5 older memories"));
    assert!(snap.contains("[m204]") && !snap.contains("[m004]"));
    assert_eq!(snap.lines().count(), 201);
    // The index file itself keeps every line (the original cut it to 200).
    assert_eq!(
        std::fs::read_to_string(s.memory_md_path())
            .unwrap()
            .lines()
            .count(),
        205
    );
}

#[test]
fn pm12_legacy_entries_read_from_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("full"));
    std::fs::write(
        s.entries_dir().join("project_legacy.md"),
        "---\nname: Legacy\ndescription: old style\ntype: project\n---\n\nLegacy body about dividends.",
    )
    .unwrap();
    let e = s.get("Legacy").unwrap().unwrap();
    assert_eq!((e.quality, e.access_count, e.id.len()), (0.5, 0, 6));
    assert!(e.keywords.is_empty() && e.related.is_empty());
    // Written outside the store, found by the reconciling index of a new instance.
    let s2 = store(tmp.path(), flags("full"));
    assert_eq!(
        titles(&s2.find_relevant("dividends", 3, Utc::now()).unwrap()),
        vec!["Legacy"]
    );
}

#[test]
fn pm14_reinforce() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("on"));
    let now = Utc::now();
    let q = |t: &str| s.get(t).unwrap().unwrap().quality;
    let with_quality = |t: &str, v: &str| {
        add(&s, t, "body", MemoryType::Project);
        let e = s.get(t).unwrap().unwrap();
        set_fields(&e.path, &[("quality_score", v)]);
    };
    with_quality("a", "0.5");
    assert!(
        s.reinforce("a", ReinforceEvent::TaskSuccess, "user", now)
            .unwrap()
            .applied()
    );
    assert!((q("a") - 0.6).abs() < 1e-9);
    with_quality("b", "0.7");
    s.reinforce("b", ReinforceEvent::UserReject, "user", now)
        .unwrap();
    assert!((q("b") - 0.4).abs() < 1e-9);
    with_quality("c", "0.5");
    s.reinforce("c", ReinforceEvent::TaskSuccess, "system", now)
        .unwrap();
    assert!((q("c") - 0.57).abs() < 1e-9);
    with_quality("d", "0.1");
    s.reinforce("d", ReinforceEvent::UserReject, "user", now)
        .unwrap();
    assert_eq!(q("d"), 0.0);
    with_quality("e", "0.0");
    for i in 0..5 {
        assert!(
            s.reinforce("e", ReinforceEvent::TaskSuccess, "user", now)
                .unwrap()
                .applied(),
            "step {i}"
        );
    }
    assert_eq!(
        s.reinforce("e", ReinforceEvent::TaskSuccess, "user", now)
            .unwrap(),
        Reinforce::CapReached
    );
    assert_eq!(
        s.reinforce("nobody", ReinforceEvent::TaskSuccess, "user", now)
            .unwrap(),
        Reinforce::NotFound
    );
    assert!(ReinforceEvent::parse("made_up").is_none());
    let off = store(tmp.path(), flags("off"));
    assert_eq!(
        off.reinforce("a", ReinforceEvent::TaskSuccess, "user", now)
            .unwrap(),
        Reinforce::Disabled
    );
}

#[test]
fn pm15_dedup_window() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("on"));
    let t0 = at("2026-01-01T00:00:00Z");
    let n = || NewEntry::new("Same", "Body", MemoryType::Project);
    assert!(matches!(s.add(n(), t0).unwrap(), AddOutcome::Saved { .. }));
    assert_eq!(
        s.add(n(), t0 + Duration::seconds(29)).unwrap(),
        AddOutcome::Duplicate
    );
    assert_eq!(entry_files(&s).len(), 1);
    assert!(matches!(
        s.add(n(), t0 + Duration::seconds(31)).unwrap(),
        AddOutcome::Saved { .. }
    ));
    // Another instance has its own window.
    let other = store(tmp.path(), flags("on"));
    assert!(matches!(
        other.add(n(), t0 + Duration::seconds(32)).unwrap(),
        AddOutcome::Saved { .. }
    ));
    // Different body: not a duplicate. Quality off: no dedup at all.
    let mut changed = n();
    changed.content = "Other".into();
    assert!(matches!(
        s.add(changed, t0 + Duration::seconds(33)).unwrap(),
        AddOutcome::Saved { .. }
    ));
    let off = store(tmp.path(), flags("off"));
    assert!(matches!(
        off.add(n(), t0).unwrap(),
        AddOutcome::Saved { .. }
    ));
    assert!(matches!(
        off.add(n(), t0).unwrap(),
        AddOutcome::Saved { .. }
    ));
}

fn garbage(s: &MemoryStore, title: &str, quality: &str, when: &str) -> PathBuf {
    let AddOutcome::Saved { path, .. } = add(s, title, "old stuff", MemoryType::Project) else {
        panic!()
    };
    set_fields(
        &path,
        &[
            ("quality_score", quality),
            ("created_at", when),
            ("last_accessed", when),
        ],
    );
    path
}

#[test]
fn pm16_gc_archives_low_importance_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let mut f = flags("on");
    f.compression = false;
    let s = store(tmp.path(), f.clone());
    let now = Utc::now();
    let old = garbage(&s, "garbage", "0.01", "2024-01-01T00:00:00");
    let older = garbage(&s, "tiny", "0.001", "2024-01-01T00:00:00Z");
    add(&s, "fresh", "new stuff", MemoryType::Project);
    let before = std::fs::read(&old).unwrap();

    // Dry run: listed, logged, untouched.
    let dry = s.run_gc(true, now).unwrap();
    assert_eq!(dry.actions.len(), 2);
    assert!(dry.actions.iter().all(|a| a.action == "archive"));
    assert_eq!(std::fs::read(&old).unwrap(), before);
    let log = std::fs::read_to_string(s.gc_log_path()).unwrap();
    assert!(log.contains("mode=dry_run") && log.contains("garbage"));

    let run = s.run_gc(false, now).unwrap();
    assert_eq!(
        run.actions.len(),
        2,
        "importance 0.001 is archived, never deleted"
    );
    assert!(!old.exists() && !older.exists());
    let archived: Vec<String> = archive_files(&s)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        archived
            .iter()
            .any(|n| n.starts_with("project_garbage.gc.")),
        "{archived:?}"
    );
    assert_eq!(
        std::fs::read(run.actions[0].archived_to.as_ref().unwrap()).unwrap(),
        before
    );
    assert!(s.get("fresh").unwrap().is_some());
    assert!(
        !std::fs::read_to_string(s.memory_md_path())
            .unwrap()
            .contains("garbage")
    );
    assert!(
        std::fs::read_to_string(s.gc_log_path())
            .unwrap()
            .contains("mode=execute actions=2")
    );

    // GC off: nothing, with no error.
    let off = s.run_gc_with(&flags("off"), false, now).unwrap();
    assert!(!off.enabled && off.actions.is_empty());
}

#[test]
fn pm17_gc_triggers_compression_only_when_executing() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("full"));
    let now = Utc::now();
    let AddOutcome::Saved { path, .. } = add(&s, "aging", TWELVE, MemoryType::Project) else {
        panic!()
    };
    set_fields(
        &path,
        &[
            ("created_at", &format_ts(now - Duration::days(2))),
            ("last_accessed", &format_ts(now - Duration::days(9))),
        ],
    );
    let before = std::fs::read(&path).unwrap();
    let dry = s.run_gc(true, now).unwrap();
    assert!(dry.actions.is_empty() && dry.compressions.is_empty());
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let run = s.run_gc(false, now).unwrap();
    assert!(run.actions.is_empty());
    assert_eq!(run.compressions.len(), 1);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_ne!(text.as_bytes(), before.as_slice());
    assert!(text.contains("compression_level: daily"));
    assert!(text.contains("compression_retention: "));
    assert!(
        std::fs::read_to_string(s.gc_log_path())
            .unwrap()
            .contains("raw -> daily, retention=")
    );
}

#[test]
fn pm19_index_and_scan_agree_on_tickers_and_decay() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("full"));
    let now = Utc::now();
    add_full(
        &s,
        "GE note",
        "General Electric",
        "GE spun off its healthcare unit.",
        now,
    );
    add_full(&s, "other", "Utilities", "Nothing about that ticker.", now);
    add_full(
        &s,
        "BRK.B",
        "Berkshire class B",
        "Float-funded compounding.",
        now,
    );
    for q in ["GE", "BRK.B", "brk.b holdings"] {
        let fts = s.find_relevant(q, 5, now).unwrap();
        let scan = s.scan_relevant(q, 5, now).unwrap();
        assert_eq!(fts.len(), 1, "{q}: {:?}", titles(&fts));
        assert_eq!(titles(&fts), titles(&scan), "{q}");
    }
    assert!(s.remove("GE note").unwrap());
    assert!(s.find_relevant("GE", 5, now).unwrap().is_empty());

    // Decay: a fresh high-quality entry beats a stale stronger lexical match.
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("full"));
    for i in 0..8 {
        add_full(
            &s,
            &format!("filler {i}"),
            "misc",
            &format!("unrelated note number {i} about equities"),
            now,
        );
    }
    let stale = add_full(&s, "stale", "rates", "yield curve inversion", now);
    set_fields(
        &stale,
        &[("last_accessed", &format_ts(now - Duration::days(200)))],
    );
    let fresh = add_full(&s, "fresh", "rates", "yield curve", now);
    set_fields(&fresh, &[("quality_score", "1.0")]);
    let s = store(tmp.path(), flags("full"));
    assert_eq!(
        s.find_relevant("yield curve inversion", 2, now).unwrap()[0].title,
        "fresh"
    );
    let mut no_decay = flags("full");
    no_decay.decay = false;
    let s = store(tmp.path(), no_decay);
    assert_eq!(
        s.find_relevant("yield curve inversion", 2, now).unwrap()[0].title,
        "stale"
    );
}

#[test]
fn pm20_gc_and_compression_keep_the_index_in_step() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("full"));
    let now = Utc::now();
    garbage(&s, "garbage", "0.01", "2024-01-01T00:00:00Z");
    add(&s, "compressible", TWELVE, MemoryType::Project);
    assert_eq!(s.indexed_count(), Some(2));
    s.run_gc(false, now).unwrap();
    assert_eq!(s.indexed_count(), Some(1));
    assert!(s.find_relevant("old stuff", 5, now).unwrap().is_empty());
    // "Miners" is a middle sentence the daily level drops.
    assert_eq!(s.find_relevant("miners rewards", 5, now).unwrap().len(), 1);
    s.compress_entry("compressible", Level::Digest, now)
        .unwrap();
    let e = s.get("compressible").unwrap().unwrap();
    assert!(!e.body.contains("Miners"));
    assert!(
        s.find_relevant("miners rewards", 5, now)
            .unwrap()
            .is_empty(),
        "stale body still indexed"
    );
    assert_eq!(s.indexed_count(), Some(s.count().unwrap()));
}

// ----- index consistency and rebuild ------------------------------------------------

#[test]
fn index_is_rebuilt_when_deleted_or_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("full"));
    add(&s, "alpha", "carry trade unwind", MemoryType::Project);
    add(&s, "beta", "momentum crash", MemoryType::Project);
    let db = s.index_path();
    assert!(db.exists());

    // Deleted under a live store: the next use rebuilds.
    std::fs::remove_file(&db).unwrap();
    assert_eq!(
        titles(&s.find_relevant("carry", 3, Utc::now()).unwrap()),
        vec!["alpha"]
    );
    assert!(db.exists());
    assert_eq!(s.indexed_count(), Some(2));

    // Deleted while closed.
    drop(s);
    vibedesk::memory::index::remove_db_files(&db);
    let s = store(tmp.path(), flags("full"));
    assert_eq!(s.indexed_count(), Some(2));
    drop(s);

    // Corrupt: not a database at all.
    vibedesk::memory::index::remove_db_files(&db);
    std::fs::write(&db, b"this is not sqlite").unwrap();
    let s = store(tmp.path(), flags("full"));
    assert_eq!(
        titles(&s.find_relevant("momentum", 3, Utc::now()).unwrap()),
        vec!["beta"]
    );

    // An entry deleted behind the store's back never comes back from the index.
    std::fs::remove_file(s.get("alpha").unwrap().unwrap().path).unwrap();
    assert!(s.find_relevant("carry", 3, Utc::now()).unwrap().is_empty());
    assert_eq!(s.rebuild_index().unwrap(), 1);
}

#[test]
fn index_matches_files_after_every_kind_of_write() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("full"));
    let now = Utc::now();
    let check = |s: &MemoryStore| assert_eq!(s.indexed_count(), Some(s.count().unwrap()));
    add(&s, "one", TWELVE, MemoryType::Project);
    check(&s);
    add(&s, "two", "second body", MemoryType::User);
    check(&s);
    add(&s, "two", "second body changed", MemoryType::Feedback);
    check(&s);
    s.compress_entry("one", Level::Daily, now).unwrap();
    check(&s);
    let e = s.get("two").unwrap().unwrap();
    s.track_access(&e, now).unwrap();
    assert_eq!(s.get("two").unwrap().unwrap().access_count, 1);
    check(&s);
    garbage(&s, "three", "0.01", "2023-01-01T00:00:00Z");
    s.run_gc(false, now).unwrap();
    check(&s);
    s.remove("two").unwrap();
    check(&s);
    assert_eq!(s.count().unwrap(), 1);
}

// ----- CJK round trips -------------------------------------------------------------

#[test]
fn cjk_round_trips() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("full"));
    let title = "沪深300 动量策略";
    let body = "在沪深300成分股上测试二十日动量，夏普比率为1.35，最大回撤12%。";
    let AddOutcome::Saved { file, .. } = add(&s, title, body, MemoryType::Project) else {
        panic!()
    };
    assert!(file.contains("沪深300"), "{file}");
    let e = s.get(title).unwrap().unwrap();
    assert_eq!((e.title.as_str(), e.body.as_str()), (title, body));
    let toks = vibedesk::memory::tokenize::recall_tokens("动量策略");
    assert_eq!(toks, vec!["动", "量", "策", "略"]);
    add(
        &s,
        "英文笔记",
        "Pure English note about carry.",
        MemoryType::Project,
    );
    let r = s
        .find_relevant("沪深300的动量效果怎么样？", 3, Utc::now())
        .unwrap();
    assert_eq!(r[0].title, title);
    let scan = s.scan_relevant("动量", 3, Utc::now()).unwrap();
    assert_eq!(scan[0].title, title);
    let daily = s.compress_entry(title, Level::Digest, Utc::now()).unwrap();
    assert_eq!(daily.to, "digest");
    assert!(s.get(title).unwrap().unwrap().body.contains("  - "));
}

// ----- import ----------------------------------------------------------------------

#[test]
fn import_copies_a_vibe_trading_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let vt = tmp.path().join("vt-memory");
    std::fs::create_dir_all(vt.join("user")).unwrap();
    let flat = "---\nname: BTC plan\ndescription: BTC trading strategy\ntype: project\nid: ab12cd\ncreated_at: 2025-01-02T03:04:05\nupdated_at: 2025-01-02T03:04:05\nkeywords: [btc, trend]\nquality_score: 0.8\naccess_count: 2\nlast_accessed: 2025-01-03T00:00:00\nimportance: 0.5\nrelated_memories: []\ncategory: project\ncompression_level: raw\n---\n\nBuy breakouts above the 50-day high.";
    std::fs::write(vt.join("project_btc_plan.md"), flat).unwrap();
    std::fs::write(
        vt.join("user").join("lang.md"),
        "---\nname: 语言偏好\ndescription: reply in Chinese\ntype: user\n---\n\n用中文回答。",
    )
    .unwrap();
    std::fs::write(
        vt.join("MEMORY.md"),
        "- [BTC plan](project_btc_plan.md) — BTC trading strategy",
    )
    .unwrap();
    std::fs::write(vt.join("notes.md"), "just a markdown file").unwrap();

    let s = store(tmp.path(), flags("full"));
    let dry = s.import_dir(&vt, true).unwrap();
    assert_eq!(dry.imported.len(), 2);
    assert!(entry_files(&s).is_empty());
    let report = s.import_dir(&vt, false).unwrap();
    assert_eq!(report.imported.len(), 2, "{report:?}");
    assert_eq!(report.skipped.len(), 1);
    let e = s.get("BTC plan").unwrap().unwrap();
    assert_eq!(
        std::fs::read_to_string(&e.path).unwrap(),
        flat,
        "copied byte for byte"
    );
    // Naive timestamps are UTC as written (§12.9), never local time.
    assert_eq!(e.created_at, at("2025-01-02T03:04:05Z"));
    assert_eq!((e.quality, e.access_count), (0.8, 2));
    assert_eq!(e.keywords, vec!["btc", "trend"]);
    let u = s.get("语言偏好").unwrap().unwrap();
    // `full` turns the hierarchy on: `user/<slug>.md`.
    assert!(u.file.starts_with("user/"), "{}", u.file);
    assert_eq!(
        titles(&s.find_relevant("BTC", 3, Utc::now()).unwrap()),
        vec!["BTC plan"]
    );
    assert!(s.read_snapshot().contains("[BTC plan]"));
    // Again: nothing overwritten.
    let again = s.import_dir(&vt, false).unwrap();
    assert!(again.imported.is_empty());
    assert!(again.skipped.iter().any(|(_, r)| r == "already imported"));
}

// ----- maintenance -----------------------------------------------------------------

#[test]
fn maintenance_runs_at_most_daily_and_records_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let f = flags("full");
    let s = store(tmp.path(), f.clone());
    let now = Utc::now();
    garbage(&s, "stale", "0.01", "2024-01-01T00:00:00Z");
    let AddOutcome::Saved { path, .. } = add(&s, "aging", TWELVE, MemoryType::Project) else {
        panic!()
    };
    set_fields(
        &path,
        &[("last_accessed", &format_ts(now - Duration::days(10)))],
    );

    let first = maintenance::run_due(&s, now, &f);
    assert!(first.ran, "{first:?}");
    let gc = first.gc.as_ref().unwrap();
    assert_eq!(gc.actions.len(), 1);
    assert_eq!(gc.compressions.len(), 1);
    assert!(
        first
            .summary()
            .unwrap()
            .contains("1 archived, 1 compressed")
    );
    let record = maintenance::read_record(&s).unwrap();
    assert_eq!(record.last_run, format_ts(now));
    assert_eq!((record.archived, record.compressed), (1, 1));

    let soon = maintenance::run_due(&s, now + Duration::hours(23), &f);
    assert!(!soon.ran && soon.skipped.is_some());
    let later = maintenance::run_due(&s, now + Duration::hours(25), &f);
    assert!(later.ran);
    assert_eq!(later.previous_run, Some(at(&format_ts(now))));

    // Compression on, GC off: nothing runs, and the user is told.
    let mut bad = flags("off");
    bad.compression = true;
    let r = maintenance::run_due(&s, now + Duration::days(3), &bad);
    assert!(!r.ran);
    assert!(
        r.warnings.iter().any(|w| w.contains("will not run")),
        "{:?}",
        r.warnings
    );
    assert_eq!(maintenance::warnings(&bad).len(), 1);
}

// ----- session search --------------------------------------------------------------

fn write_session(dir: &Path, id: &str, title: &str, messages: &[(&str, &str)]) {
    let d = dir.join(id);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("session.json"),
        json!({"id": id, "title": title}).to_string(),
    )
    .unwrap();
    let mut text = String::new();
    for (role, content) in messages {
        text.push_str(
            &json!({"role": role, "content": content, "ts": "2026-01-01T00:00:00.000Z"})
                .to_string(),
        );
        text.push('\n');
    }
    std::fs::write(d.join("messages.jsonl"), text).unwrap();
}

#[test]
fn session_search_indexes_incrementally() {
    let tmp = tempfile::tempdir().unwrap();
    let sessions = tmp.path().join("sessions");
    write_session(
        &sessions,
        "s1",
        "AAPL study",
        &[
            ("user", "Backtest an SMA crossover on AAPL"),
            ("assistant", "Sharpe 0.61 over 2003-2013."),
        ],
    );
    write_session(
        &sessions,
        "s2",
        "crypto",
        &[("user", "比特币的波动率是多少？")],
    );
    let s = store(tmp.path(), flags("full"));
    let r = s
        .search_sessions(&sessions, "SMA crossover", 3, None)
        .unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].session_id.as_str(), r[0].title.as_str()),
        ("s1", "AAPL study")
    );
    assert!(r[0].matches[0].snippet.contains("SMA crossover"));
    assert_eq!(
        s.search_sessions(&sessions, "波动率", 3, None).unwrap()[0].session_id,
        "s2"
    );
    assert!(
        s.search_sessions(&sessions, "SMA", 3, Some("s1"))
            .unwrap()
            .is_empty()
    );

    // Appended lines are picked up; a torn last line waits for its newline.
    let log = sessions.join("s2").join("messages.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str(
        &json!({"role": "assistant", "content": "Rolling volatility of BTC-USD was 62%."})
            .to_string(),
    );
    text.push_str("\n{\"role\":\"user\",\"content\":\"half a li");
    std::fs::write(&log, text).unwrap();
    let r = s
        .search_sessions(&sessions, "BTC-USD rolling", 3, None)
        .unwrap();
    assert_eq!(r[0].session_id, "s2");
    assert!(
        s.search_sessions(&sessions, "half", 3, None)
            .unwrap()
            .is_empty()
    );

    // A deleted session disappears from the index.
    std::fs::remove_dir_all(sessions.join("s1")).unwrap();
    assert!(
        s.search_sessions(&sessions, "SMA crossover", 3, None)
            .unwrap()
            .is_empty()
    );
    let sync = s.sync_sessions(&sessions).unwrap();
    assert_eq!(sync.sessions, 1);
}

/// The search oracle (issue 35 item 7): a secret in a session is redacted
/// before the index sees it, so searching for it finds nothing (a hit count
/// of 1 would confirm a guess even though every snippet is redacted); an
/// index an earlier version built from raw text is rebuilt on open.
#[test]
fn a_secret_in_a_session_is_not_in_the_search_index() {
    let tmp = tempfile::tempdir().unwrap();
    let sessions = tmp.path().join("sessions");
    let key = "sk-proj-Q7xTr9LmZ2vB8nK4wP1sD6fG";
    let password = "Tr0ub4dor&3xq";
    let said = format!(
        "Use my key {key} and my password is {password}; then run the zanzibar momentum backtest."
    );
    write_session(&sessions, "s1", "keys", &[("user", said.as_str())]);
    let s = store(tmp.path(), flags("full"));
    let found = s.search_sessions(&sessions, "zanzibar", 3, None).unwrap();
    assert_eq!(
        found.len(),
        1,
        "a normal word of the message still finds it"
    );
    let snippet = &found[0].matches[0].snippet;
    assert!(
        !snippet.contains(key) && !snippet.contains(password),
        "{snippet}"
    );
    for secret in [key, password, "Q7xTr9LmZ2vB8nK4wP1sD6fG", "Tr0ub4dor"] {
        let hits = s.search_sessions(&sessions, secret, 3, None).unwrap();
        assert!(hits.is_empty(), "{secret} found: {hits:?}");
    }
    drop(s);

    // An index built from raw text (schema 2) leaves on open: the raw row
    // planted here would be found, were the index not rebuilt.
    let db = tmp.path().join("memory").join("index.sqlite");
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute(
            "INSERT INTO messages(id, session_id, line, role, ts, text) VALUES (999, 's1', 1, 'user', '', ?1)",
            [said.as_str()],
        )
        .unwrap();
        let terms = vibedesk::memory::tokenize::index_text(&said);
        c.execute(
            "INSERT INTO messages_fts(rowid, terms) VALUES (999, ?1)",
            [terms.as_str()],
        )
        .unwrap();
        c.execute_batch("PRAGMA user_version = 2").unwrap();
    }
    let s = store(tmp.path(), flags("full"));
    for secret in [key, password] {
        let hits = s.search_sessions(&sessions, secret, 3, None).unwrap();
        assert!(hits.is_empty(), "{secret} survived the rebuild: {hits:?}");
    }
    assert_eq!(
        s.search_sessions(&sessions, "zanzibar", 3, None)
            .unwrap()
            .len(),
        1
    );
}

/// The same for memory entries, through the index and the scan alike.
#[test]
fn a_secret_in_a_memory_is_not_found_by_recall() {
    let password = "Tr0ub4dor&3xq";
    for preset in ["full", "off"] {
        let tmp = tempfile::tempdir().unwrap();
        let mut f = flags("full");
        f.fts_index = preset == "full";
        let s = store(tmp.path(), f);
        add(
            &s,
            "zanzibar database",
            &format!("The zanzibar database password is {password} for now."),
            MemoryType::Reference,
        );
        let now = Utc::now();
        let found = s.find_relevant("zanzibar", 5, now).unwrap();
        assert_eq!(found.len(), 1, "index {preset}: a normal word finds it");
        for secret in [password, "Tr0ub4dor"] {
            let hits = s.find_relevant(secret, 5, now).unwrap();
            assert!(hits.is_empty(), "index {preset}: {secret} found");
        }
    }
}

// ----- tools -------------------------------------------------------------------------

fn ctx(root: &Path) -> ToolContext {
    ToolContext {
        call_id: "c1".into(),
        session_id: "current".into(),
        run_dir: root.to_path_buf(),
        workspace: root.to_path_buf(),
        cancel: CancellationToken::new(),
        background: BackgroundQueue::default(),
    }
}

#[tokio::test]
async fn tools_remember_recall_forget_reinforce_and_load_skill() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Arc::new(store(tmp.path(), flags("full")));
    let skills = Arc::new(SkillSet::load(None));
    let sessions = tmp.path().join("sessions");
    write_session(
        &sessions,
        "old",
        "earlier",
        &[("user", "We studied the carry trade in JPY.")],
    );
    let mut reg = Registry::new();
    register_memory_tools(&mut reg, s.clone(), skills, sessions).unwrap();
    assert_eq!(
        reg.names(),
        vec!["remember", "recall", "session_search", "load_skill"]
    );
    assert!(!reg.get("remember").unwrap().readonly());
    assert!(reg.get("recall").unwrap().readonly());
    let c = ctx(tmp.path());
    let call = |name: &str, args: Value| {
        let tool = reg.get(name).unwrap().clone();
        let c = c.clone();
        async move { tool.call(args, &c).await }
    };
    let v = |r: Result<String, vibedesk::tools::ToolError>| -> Value {
        serde_json::from_str(&r.unwrap()).unwrap()
    };

    let saved = v(call("remember", json!({"title": "JPY carry", "content": "Carry works until it unwinds.", "memory_type": "project", "keywords": ["jpy", "carry"]})).await);
    assert_eq!(saved["status"], "ok");
    assert_eq!(saved["message"], "Saved: JPY carry");
    let dup = v(call(
        "remember",
        json!({"title": "JPY carry", "content": "Carry works until it unwinds."}),
    )
    .await);
    assert_eq!(dup["status"], "skipped");
    let got = v(call("remember", json!({"action": "recall", "query": "carry"})).await);
    assert_eq!(
        (got["count"].as_u64(), got["memories"][0]["title"].as_str()),
        (Some(1), Some("JPY carry"))
    );
    assert_eq!(
        s.get("JPY carry").unwrap().unwrap().access_count,
        1,
        "explicit recall counts"
    );
    let got = v(call("recall", json!({"query": "JPY", "max_results": 2})).await);
    assert_eq!(got["memories"][0]["type"], "project");
    let re = v(call("remember", json!({"action": "reinforce", "title": "JPY carry", "event": "user_confirm", "source": "user"})).await);
    assert_eq!(re["status"], "ok");
    let bad = call(
        "remember",
        json!({"action": "reinforce", "title": "JPY carry", "event": "passive_decay"}),
    )
    .await;
    assert!(bad.is_err());
    let found = v(call("session_search", json!({"query": "carry trade"})).await);
    assert_eq!(found["results"][0]["session_id"], "old");
    let none = v(call("session_search", json!({"query": "nonexistentword"})).await);
    assert_eq!(none["results"].as_array().unwrap().len(), 0);
    let gone = v(call(
        "remember",
        json!({"action": "forget", "title": "JPY carry"}),
    )
    .await);
    assert_eq!(gone["message"], "Removed: JPY carry");
    let again = v(call(
        "remember",
        json!({"action": "forget", "title": "JPY carry"}),
    )
    .await);
    assert_eq!(again["status"], "not_found");
    assert!(call("remember", json!({"title": "  "})).await.is_err());

    let skill = v(call("load_skill", json!({"name": "backtest-design"})).await);
    assert_eq!(skill["status"], "ok");
    assert!(
        skill["content"]
            .as_str()
            .unwrap()
            .starts_with("<skill name=\"backtest-design\">")
    );
    let sec = v(call(
        "load_skill",
        json!({"name": "backtest-design", "section": "Pitfalls"}),
    )
    .await);
    assert_eq!(sec["mode"], "section");
    let err = call("load_skill", json!({"name": "nope"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Unknown skill 'nope'"));
    assert!(
        call(
            "load_skill",
            json!({"name": "backtest-design", "offset": "x"})
        )
        .await
        .is_err()
    );
    assert!(
        call(
            "load_skill",
            json!({"name": "backtest-design", "offset": 10_000_000})
        )
        .await
        .is_err()
    );
}

#[test]
fn user_skills_override_builtins_in_the_prompt() {
    let tmp = tempfile::tempdir().unwrap();
    let user = vibedesk::memory::user_skills_dir(tmp.path());
    std::fs::create_dir_all(user.join("risk-review")).unwrap();
    std::fs::write(
        user.join("risk-review").join("SKILL.md"),
        "---\nname: risk-review\ndescription: my own risk checklist\ncategory: risk-analysis\n---\n# Mine\n",
    )
    .unwrap();
    std::fs::create_dir_all(user.join("my-flow")).unwrap();
    std::fs::write(
        user.join("my-flow").join("SKILL.md"),
        "---\nname: my-flow\ndescription: d\n---\nbody",
    )
    .unwrap();
    let set = SkillSet::load(Some(&user));
    let lines = skill_lines(&set);
    assert_eq!(lines.len(), vibedesk::memory::skills::BUILTIN.len() + 1);
    let text = skill_descriptions(&lines);
    assert!(text.contains("risk-review: my own risk checklist"));
    assert_eq!(text.matches("risk-review:").count(), 1);
    assert!(text.contains("### other\n  - my-flow: d"));
}

// ----- recall in the turn's context ------------------------------------------------

/// A provider that records every request and replays a script.
struct Capture {
    inner: Arc<dyn Provider>,
    seen: Mutex<Vec<ChatRequest>>,
}

impl Provider for Capture {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    fn stream(&self, request: ChatRequest) -> BoxFuture<'_, Result<ChunkStream, LlmError>> {
        self.seen.lock().unwrap().push(request.clone());
        self.inner.stream(request)
    }
}

#[tokio::test]
async fn recall_snapshot_and_skills_reach_the_model() {
    let home = Home::new();
    let f = flags("full");
    let mem_dir = vibedesk::memory::memory_dir(&home.paths.data_dir);
    {
        let s = MemoryStore::open(&mem_dir, f.clone()).unwrap();
        let mut n = NewEntry::new(
            "AAPL split history",
            "AAPL split 7:1 in June 2014 and 4:1 in August 2020.",
            MemoryType::Reference,
        );
        n.description = "stock splits of Apple".into();
        s.add(n, Utc::now()).unwrap();
    }
    // A new store per session: its snapshot is the session-start one.
    let s = Arc::new(MemoryStore::open(&mem_dir, f).unwrap());
    let skills = Arc::new(SkillSet::load(Some(&vibedesk::memory::user_skills_dir(
        &home.paths.data_dir,
    ))));
    let provider = Arc::new(Capture {
        inner: scripted(json!([
            call_turn(&[(
                "c1",
                "remember",
                json!({"title": "user prefers tables", "content": "Answer with pipe tables.", "memory_type": "user"})
            )]),
            text_turn("Noted."),
        ])),
        seen: Mutex::new(Vec::new()),
    });
    let base = registry_with(vec![]);
    let mut reg = (*base).clone();
    register_memory_tools(
        &mut reg,
        s.clone(),
        skills.clone(),
        home.paths.sessions_dir(),
    )
    .unwrap();
    let mut deps = LoopDeps::new(
        provider.clone(),
        Arc::new(reg),
        test_config(),
        home.paths.runs_dir(),
    );
    deps.recall = Some(Arc::new(MemoryRecall::new(s.clone())));
    deps.skills = skill_lines(&skills);
    deps.memory_snapshot = memory_snapshot(&s);
    let mut lp = Loop::new(deps);
    let ran = run_loop(
        &mut lp,
        &home,
        "When did AAPL split?",
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.outcome.content, "Noted.");

    let seen = provider.seen.lock().unwrap();
    let first = &seen[0];
    let system = &first.messages[0].content;
    assert!(system.contains("## Persistent Memory (cross-session)"));
    assert!(system.contains("[AAPL split history]"));
    assert!(
        system.contains(&format!("{} skills", skills.len())),
        "skill count from the loader"
    );
    assert!(
        system.contains("\n- walk-forward-validation: "),
        "one line per skill"
    );
    let user = &first.messages.last().unwrap().content;
    assert!(
        user.starts_with(
            "<recalled-memories>\n- **AAPL split history** (reference): AAPL split 7:1"
        ),
        "{user}"
    );
    assert!(user.ends_with("</recalled-memories>\n\nWhen did AAPL split?"));
    // The remember call really saved, and the frozen snapshot did not change mid-run.
    assert!(s.get("user prefers tables").unwrap().is_some());
    assert!(!seen[1].messages[0].content.contains("user prefers tables"));
}

// ----- the CLI -------------------------------------------------------------------------

const BIN: &str = env!("CARGO_BIN_EXE_vibedesk");

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/memory")
}

fn cli(home: &Path, args: &[&str], stdin: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new(BIN)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("VIBEDESK_HOME", home)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

/// `vibedesk memory compress --text` reproduces the original's outputs
/// (tests/fixtures/memory, made with its compression.py).
#[test]
fn cli_compress_text_reproduces_the_original() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixtures();
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("manifest.json")).unwrap())
            .unwrap();
    let mut checked = 0;
    for case in manifest["cases"].as_array().unwrap() {
        let level = case["level"].as_str().unwrap();
        if level == "daily_then_digest" {
            continue;
        }
        let input = std::fs::read(root.join(case["input"].as_str().unwrap())).unwrap();
        let want = std::fs::read_to_string(root.join(case["expected"].as_str().unwrap())).unwrap();
        let kw: Vec<&str> = case["keywords"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        let joined = kw.join(",");
        let mut args = vec!["memory", "compress", "--text", "--level", level];
        if !kw.is_empty() {
            args.extend(["--keywords", joined.as_str()]);
        }
        let out = cli(tmp.path(), &args, &input);
        assert!(
            out.status.success(),
            "{}: {}",
            case["id"],
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            format!("{want}\n"),
            "case {}",
            case["id"]
        );
        checked += 1;
    }
    assert!(checked >= 100);
    // --json carries the retention estimate.
    let input = std::fs::read(root.join("inputs/en_2000.txt")).unwrap();
    let out = cli(
        tmp.path(),
        &[
            "memory", "compress", "--text", "--level", "digest", "--json",
        ],
        &input,
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let want = std::fs::read_to_string(root.join("expected/en_2000.digest.txt")).unwrap();
    assert_eq!(v["text"], want.as_str());
    let case = manifest["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "en_2000.digest")
        .unwrap();
    assert!((v["retention"].as_f64().unwrap() - case["retention"].as_f64().unwrap()).abs() < 1e-12);
    // Pure mode touches no store.
    assert!(!tmp.path().join("data").exists());
    let bad = cli(
        tmp.path(),
        &["memory", "compress", "--text", "--level", "weekly"],
        b"x",
    );
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn cli_memory_commands_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let h = tmp.path();
    let ok = |args: &[&str], stdin: &[u8]| {
        let out = cli(h, args, stdin);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    ok(
        &[
            "memory",
            "add",
            "--title",
            "600519.SH note",
            "--type",
            "reference",
            "--keywords",
            "moutai,baijiu",
        ],
        "贵州茅台的估值处于历史低位。".as_bytes(),
    );
    ok(
        &[
            "memory",
            "add",
            "--title",
            "GE",
            "--content",
            "General Electric split into three companies.",
        ],
        b"",
    );
    let list = ok(&["memory", "list"], b"");
    assert!(list.contains("600519.SH note") && list.contains("reference"));
    let listed: Value = serde_json::from_str(&ok(&["memory", "list", "--json"], b"")).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2);
    assert!(ok(&["memory", "search", "600519.SH"], b"").contains("600519.SH note"));
    assert!(ok(&["memory", "search", "GE"], b"").starts_with("GE ("));
    assert!(ok(&["memory", "show", "GE"], b"").contains("General Electric"));
    assert!(ok(&["memory", "gc", "--dry-run"], b"").contains("nothing to do"));
    let planned = ok(&["memory", "compress", "--dry-run"], b"");
    assert!(planned.contains("nothing to do"));
    ok(&["memory", "compress", "GE", "--level", "digest"], b"");
    assert!(ok(&["memory", "show", "GE"], b"").contains("compression_level: digest"));
    assert!(ok(&["memory", "reindex"], b"").contains("indexed 2 memories"));
    assert!(ok(&["memory", "gc"], b"").contains("nothing to do"));
    assert!(h.join("data/memory/.maintenance.json").exists());
    ok(&["memory", "forget", "GE"], b"");
    assert!(!ok(&["memory", "list"], b"").contains("GE "));
    // Warnings reach the user.
    let mut c = std::process::Command::new(BIN);
    let out = c
        .args(["memory", "list"])
        .env_clear()
        .env("VIBEDESK_HOME", h)
        .env("VIBEDESK_MEMORY", "off")
        .env("VIBEDESK_MEMORY_COMPRESSION", "on")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("will not run"));
}

// ----- §8.8 semantic links (PM-21, links parts of PM-9, PM-20, §8.9) ----------------

fn sidecar_of(s: &MemoryStore, title: &str) -> PathBuf {
    vibedesk::memory::links::sidecar_path(&s.get(title).unwrap().unwrap().path)
}

fn link_targets(s: &MemoryStore, title: &str) -> Vec<String> {
    let e = s.get(title).unwrap().unwrap();
    vibedesk::memory::links::load_links(&e.path)
        .into_iter()
        .map(|l| l.target)
        .collect()
}

fn file_of(s: &MemoryStore, title: &str) -> String {
    s.get(title).unwrap().unwrap().file
}

#[test]
fn pm21_similar_entries_are_linked_expanded_and_kept_in_step() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("full"));
    let now = Utc::now();
    add_full(
        &s,
        "BTC halving",
        "bitcoin halving supply",
        "Bitcoin halving cuts miner rewards and supply growth.",
        now,
    );
    add_full(
        &s,
        "Utilities",
        "regulated utilities",
        "Regulated utilities pay steady dividends.",
        now,
    );
    add_full(
        &s,
        "Aftermath",
        "what followed",
        "After the bitcoin halving, miner rewards fell and supply growth slowed.",
        now,
    );
    // The sidecar: version 1, 4-decimal scores ≥ 0.3, the similar entry only.
    let raw: Value =
        serde_json::from_str(&std::fs::read_to_string(sidecar_of(&s, "Aftermath")).unwrap())
            .unwrap();
    assert_eq!(raw["version"], 1);
    assert!(raw["updated_at"].as_str().is_some_and(|t| !t.is_empty()));
    let links = raw["links"].as_array().unwrap();
    assert_eq!(links.len(), 1, "{raw}");
    assert_eq!(links[0]["target"], file_of(&s, "BTC halving").as_str());
    let score = links[0]["score"].as_f64().unwrap();
    assert!(score >= 0.3);
    assert!(((score * 10_000.0).round() - score * 10_000.0).abs() < 1e-6);

    // Expansion: "aftermath" matches one entry; its link fills a place.
    assert_eq!(
        titles(&s.find_relevant("aftermath", 5, now).unwrap()),
        vec!["Aftermath", "BTC halving"]
    );
    assert_eq!(s.find_relevant("aftermath", 1, now).unwrap().len(), 1);
    assert!(
        s.find_relevant("nothing matches", 5, now)
            .unwrap()
            .is_empty()
    );
    let mut no_links = flags("full");
    no_links.links = false;
    let plain = store(tmp.path(), no_links);
    assert_eq!(
        titles(&plain.find_relevant("aftermath", 5, now).unwrap()),
        vec!["Aftermath"]
    );
    drop(plain);

    // A `[[id]]` wikilink in a result's body is followed too.
    let util_id = s.get("Utilities").unwrap().unwrap().id;
    add_full(
        &s,
        "Pointer",
        "cross reference",
        &format!("Compare with [[{util_id}]] before deciding."),
        now,
    );
    let got = titles(&s.find_relevant("pointer", 5, now).unwrap());
    assert_eq!(got[0], "Pointer");
    assert!(got.contains(&"Utilities".to_string()), "{got:?}");

    // Overwrite under another type: links to the old file follow the new one,
    // and the old file's sidecar goes.
    let old_file = file_of(&s, "BTC halving");
    let old_sidecar = sidecar_of(&s, "BTC halving");
    let mut n = NewEntry::new(
        "BTC halving",
        "Bitcoin halving cuts miner rewards; supply growth halves.",
        MemoryType::Reference,
    );
    n.description = "bitcoin halving supply".into();
    s.add(n, now).unwrap();
    let new_file = file_of(&s, "BTC halving");
    assert_ne!(old_file, new_file);
    assert!(!old_sidecar.exists());
    assert!(sidecar_of(&s, "BTC halving").exists());
    assert_eq!(link_targets(&s, "Aftermath"), vec![new_file.clone()]);
    assert!(
        link_targets(&s, "BTC halving").contains(&file_of(&s, "Aftermath")),
        "the rewritten entry links back"
    );

    // Remove: own sidecar gone, links to it dropped everywhere.
    let sidecar = sidecar_of(&s, "BTC halving");
    assert!(s.remove("BTC halving").unwrap());
    assert!(!sidecar.exists());
    assert!(!link_targets(&s, "Aftermath").contains(&new_file));
    assert_eq!(
        titles(&s.find_relevant("aftermath", 5, now).unwrap()),
        vec!["Aftermath"]
    );
    // Remove tolerates a sidecar that is already gone.
    std::fs::remove_file(sidecar_of(&s, "Utilities")).unwrap();
    assert!(s.remove("Utilities").unwrap());
    assert!(s.get("Utilities").unwrap().is_none());
}

#[test]
fn pm20_gc_archive_removes_the_relations_sidecar_and_links_to_it() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), flags("full"));
    let now = Utc::now();
    garbage(&s, "garbage", "0.01", "2024-01-01T00:00:00Z");
    add(&s, "stuff notes", "old stuff again", MemoryType::Project);
    let garbage_file = file_of(&s, "garbage");
    let garbage_sidecar = sidecar_of(&s, "garbage");
    assert!(garbage_sidecar.exists());
    assert_eq!(link_targets(&s, "stuff notes"), vec![garbage_file.clone()]);
    let run = s.run_gc(false, now).unwrap();
    assert_eq!(run.actions.len(), 1, "{:?}", run.actions);
    assert!(!garbage_sidecar.exists());
    assert!(link_targets(&s, "stuff notes").is_empty());
    assert!(
        !archive_files(&s)
            .iter()
            .any(|p| p.to_string_lossy().ends_with(".relations.json"))
    );
}

#[tokio::test]
async fn pm21_remember_recall_returns_related_links() {
    let tmp = tempfile::tempdir().unwrap();
    let s = Arc::new(store(tmp.path(), flags("full")));
    let mut reg = Registry::new();
    register_memory_tools(
        &mut reg,
        s.clone(),
        Arc::new(SkillSet::load(None)),
        tmp.path().join("sessions"),
    )
    .unwrap();
    let c = ctx(tmp.path());
    let tool = reg.get("remember").unwrap().clone();
    let call = async |args: Value| -> Value {
        serde_json::from_str(&tool.call(args, &c).await.unwrap()).unwrap()
    };
    for i in 0..5 {
        let saved = call(json!({"title": format!("carry note {i}"), "content": format!("JPY carry trade unwinds when volatility spikes, case {i}.")})).await;
        assert_eq!(saved["status"], "ok");
    }
    call(json!({"title": "lonely", "content": "Ornithology field guide."})).await;
    let got = call(json!({"action": "recall", "query": "carry note 4"})).await;
    let first = &got["memories"][0];
    assert_eq!(first["title"], "carry note 4");
    let related = first["related"].as_array().unwrap();
    assert_eq!(related.len(), 3, "at most 3 shown: {first}");
    for r in related {
        assert!(r["target"].as_str().unwrap().contains("carry_note"));
        let score = r["score"].as_f64().unwrap();
        assert!(score >= 0.3);
        assert!(((score * 100.0).round() - score * 100.0).abs() < 1e-9);
    }
    let got = call(json!({"action": "recall", "query": "ornithology"})).await;
    assert_eq!(got["memories"][0]["title"], "lonely");
    assert!(got["memories"][0].get("related").is_none());
}

// ----- hierarchy (PM-18, PM-22) ------------------------------------------------------

fn hierarchy_flags() -> MemoryFlags {
    let mut f = flags("off");
    f.hierarchy = true;
    f
}

const ORPHAN: &str = "---\nname: shared-slug\ndescription: written without a suffix\ntype: project\n---\n\nshared body text\n";

#[test]
fn pm18_hierarchy_routes_adds_and_recovers_orphans() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), hierarchy_flags());
    let base = s.entries_dir().to_path_buf();
    let AddOutcome::Saved { path, file, .. } =
        add(&s, "btc_plan", "buy breakouts", MemoryType::Project)
    else {
        panic!("duplicate")
    };
    assert_eq!(path, base.join("project").join("btc_plan.md"));
    assert_eq!(file, "project/btc_plan.md");
    assert!(path.is_file());
    let listed = s.list().unwrap();
    assert_eq!(titles(&listed), vec!["btc_plan"]);
    assert_eq!(listed[0].file, "project/btc_plan.md");
    assert_eq!(s.get("btc_plan").unwrap().unwrap().path, path);
    assert_eq!(s.get("project_btc_plan").unwrap().unwrap().path, path);
    assert_eq!(
        titles(&s.find_relevant("breakouts", 3, Utc::now()).unwrap()),
        vec!["btc_plan"]
    );
    let md = std::fs::read_to_string(s.memory_md_path()).unwrap();
    assert!(md.contains("(entries/project/btc_plan.md)"), "{md}");
    let yaml = std::fs::read_to_string(base.join(".hierarchy.yaml")).unwrap();
    assert!(yaml.contains("  project:\n    count: 1\n"), "{yaml}");

    // A suffix-less orphan with frontmatter is renamed, then the same title
    // writes that very path: one file.
    std::fs::write(base.join("project/shared-slug"), ORPHAN).unwrap();
    let listed = s.list().unwrap();
    let orphan = listed.iter().find(|e| e.title == "shared-slug").unwrap();
    assert_eq!(orphan.file, "project/shared-slug.md");
    assert!(!base.join("project/shared-slug").exists());
    let AddOutcome::Saved { path, replaced, .. } =
        add(&s, "shared-slug", "new body", MemoryType::Project)
    else {
        panic!("duplicate")
    };
    assert_eq!(path, base.join("project/shared-slug.md"));
    assert!(replaced);
    let shared: Vec<String> = std::fs::read_dir(base.join("project"))
        .unwrap()
        .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("shared"))
        .collect();
    assert_eq!(shared, vec!["shared-slug.md"]);
    assert!(
        s.get("shared-slug")
            .unwrap()
            .unwrap()
            .body
            .contains("new body")
    );
    // Also when the save comes before any listing has seen the orphan.
    std::fs::write(
        base.join("project/lonely-slug"),
        ORPHAN.replace("shared-slug", "lonely-slug"),
    )
    .unwrap();
    let AddOutcome::Saved { path, replaced, .. } =
        add(&s, "lonely-slug", "saved at once", MemoryType::Project)
    else {
        panic!("duplicate")
    };
    assert_eq!(path, base.join("project/lonely-slug.md"));
    assert!(replaced);
    assert!(!base.join("project/lonely-slug").exists());

    // Never over an existing .md; other files untouched; idempotent.
    std::fs::write(
        base.join("project/kept.md"),
        "---\nname: kept\n---\n\noriginal\n",
    )
    .unwrap();
    std::fs::write(
        base.join("project/kept"),
        "---\nname: intruder\n---\n\nnew\n",
    )
    .unwrap();
    std::fs::write(base.join("project/readme"), "plain notes, no frontmatter").unwrap();
    let first = titles(&s.list().unwrap());
    let second = titles(&s.list().unwrap());
    assert_eq!(first, second);
    assert!(first.contains(&"kept".to_string()) && !first.contains(&"intruder".to_string()));
    assert!(
        std::fs::read_to_string(base.join("project/kept.md"))
            .unwrap()
            .contains("original")
    );
    assert!(base.join("project/kept").is_file());
    assert!(base.join("project/readme").is_file());
    assert!(!base.join("project/readme.md").exists());

    // Remove keeps the summary current.
    assert!(s.remove("btc_plan").unwrap());
    assert!(!base.join("project/btc_plan.md").exists());
    let yaml = std::fs::read_to_string(base.join(".hierarchy.yaml")).unwrap();
    assert!(yaml.contains("  project:\n    count: 3\n"), "{yaml}");
}

#[test]
fn pm18_layouts_read_each_other_and_gc_compression_work_in_folders() {
    let tmp = tempfile::tempdir().unwrap();
    let flat = store(tmp.path(), flags("off"));
    add(&flat, "old_flat", "carry trade note", MemoryType::User);
    drop(flat);
    let mut f = hierarchy_flags();
    f.gc = true;
    f.compression = true;
    let s = store(tmp.path(), f.clone());
    // The flat entry stays visible; re-saving it moves it to its folder.
    assert_eq!(s.get("old_flat").unwrap().unwrap().file, "user_old_flat.md");
    add(&s, "old_flat", "carry trade note v2", MemoryType::User);
    let e = s.get("old_flat").unwrap().unwrap();
    assert_eq!(e.file, "user/old_flat.md");
    assert!(!s.entries_dir().join("user_old_flat.md").exists());
    assert_eq!(s.count().unwrap(), 1);

    // Compression and GC archive a category entry under its flat stem.
    add(&s, "note", TWELVE, MemoryType::Project);
    let rec = s.compress_entry("note", Level::Daily, Utc::now()).unwrap();
    let archive = rec.archive.unwrap();
    let name = archive.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("project_note.raw."), "{name}");
    let path = s.get("note").unwrap().unwrap().path;
    set_fields(
        &path,
        &[
            ("created_at", "2020-01-01T00:00:00Z"),
            ("quality_score", "0.01"),
        ],
    );
    let report = s.run_gc_with(&f, false, Utc::now()).unwrap();
    assert_eq!(report.actions.len(), 1, "{report:?}");
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(!path.exists());
    assert_eq!(titles(&s.list().unwrap()), vec!["old_flat"]);
    assert_eq!(s.rebuild_index().unwrap(), 1);
    drop(s);

    // Back to flat: the category entry is still read (and still shown by the
    // workstation's read-only view).
    let s = store(tmp.path(), flags("off"));
    assert_eq!(s.get("old_flat").unwrap().unwrap().file, "user/old_flat.md");
    let view =
        vibedesk::tui::memories::list(&tmp.path().join("memory"), Utc::now(), false).unwrap();
    assert_eq!(view.rows.len(), 1);
    assert_eq!(view.rows[0].file, "user/old_flat.md");
    let detail = vibedesk::tui::memories::detail(
        &tmp.path().join("memory"),
        "user/old_flat.md",
        Utc::now(),
        false,
    )
    .unwrap();
    assert_eq!(detail.row.title, "old_flat");
    assert!(
        vibedesk::tui::memories::detail(&tmp.path().join("memory"), "misc/x.md", Utc::now(), false)
            .is_err()
    );
}

#[test]
fn pm22_hierarchy_helpers() {
    use vibedesk::memory::hierarchy;
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path(), hierarchy_flags());
    let base = s.entries_dir().to_path_buf();
    assert_eq!(hierarchy::route_entry(&base, "diary"), base);
    assert_eq!(hierarchy::route_entry(&base, "user"), base.join("user"));

    let mut n = NewEntry::new("trading_fees", "ten basis points", MemoryType::Feedback);
    n.keywords = vec!["slippage".into()];
    s.add(n, Utc::now()).unwrap();
    add(&s, "answer_style", "short answers", MemoryType::User);
    std::fs::write(
        base.join("project_legacy.md"),
        "---\nname: legacy\ntype: project\n---\n\nold\n",
    )
    .unwrap();
    let files = hierarchy::scan_all(&base).unwrap();
    assert_eq!(
        files,
        vec![
            "user/answer_style.md",
            "project_legacy.md",
            "feedback/trading_fees.md"
        ]
    );
    assert!(base.join(".hierarchy.yaml").is_file());
    std::fs::write(base.join("MEMORY.md"), "- stray\n").unwrap();
    assert_eq!(hierarchy::scan_all(&base).unwrap(), files);

    let now = at("2026-03-01T12:00:00Z");
    let yaml = std::fs::read_to_string(hierarchy::rebuild_index(&base, now).unwrap()).unwrap();
    assert!(yaml.starts_with("categories:\n"), "{yaml}");
    let feedback = yaml.split("  feedback:\n").nth(1).unwrap();
    assert!(
        feedback.starts_with("    count: 1\n    keywords: ["),
        "{yaml}"
    );
    let keywords = feedback.lines().nth(1).unwrap();
    assert!(
        keywords.contains("slippage") && keywords.contains("fees"),
        "{yaml}"
    );
    assert!(
        yaml.contains("  reference:\n    count: 0\n    keywords: []\n"),
        "{yaml}"
    );
    assert!(yaml.contains("rebuilt_at: 2026-03-01T12:00:00"), "{yaml}");

    let order = hierarchy::prune_search_scope(&base, "how much slippage?").unwrap();
    assert_eq!(order[0], "feedback/trading_fees.md");
    assert_eq!(order.len(), 3);
    let order = hierarchy::prune_search_scope(&base, "answer style").unwrap();
    assert_eq!(order[0], "user/answer_style.md");

    assert!(hierarchy::migrate_flat_entry(&base, "project_legacy.md", "misc").is_err());
    assert!(hierarchy::migrate_flat_entry(&base, "user/answer_style.md", "project").is_err());
    assert_eq!(
        hierarchy::migrate_flat_entry(&base, "project_legacy.md", "project").unwrap(),
        "project/legacy.md"
    );
    assert!(!base.join("project_legacy.md").exists());
    assert_eq!(s.get("legacy").unwrap().unwrap().file, "project/legacy.md");
}
