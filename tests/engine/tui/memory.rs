//! The browser's memory view over a real memory folder written by
//! `MemoryStore` (one entry compressed raw → daily → digest, so it has two
//! archived originals): `update` from opening the view to an entry beside
//! its originals, insta snapshots at 80×24 (stacked) and 160×48 (side by
//! side), and malformed files that must show a notice, never panic.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use crossterm::event::KeyCode;
use tokio::time::Instant;
use vibedesk::memory::entry::parse_ts;
use vibedesk::memory::{Level, MemoryFlags, MemoryStore, MemoryType, NewEntry};
use vibedesk::tui::App;
use vibedesk::tui::app::{Effect, Msg, update};
use vibedesk::tui::browser::View;
use vibedesk::tui::memories;
use vibedesk::tui::memory_view::Pane;

use super::*;

const FEES: &str = "Use ten basis points of fees for every equity backtest. \
Slippage is modelled separately at five basis points. \
The user dislikes zero-fee results because they flatter turnover-heavy strategies. \
Crypto venues charge more, so use twenty-five basis points there. \
Always state the fee assumption next to the Sharpe ratio. \
Round-trip costs must be counted on both legs of a trade. \
Market-impact models are out of scope for now. \
Report turnover alongside every cost figure.";

fn t(s: &str) -> DateTime<Utc> {
    parse_ts(s).unwrap()
}

fn now() -> DateTime<Utc> {
    t("2026-03-01T00:00:00Z")
}

/// A memory folder with two entries: "BTC fee preference" compressed to
/// daily, then digest (two archives), and "AAPL data source", still raw.
fn memory_home() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data").join("memory");
    let store = MemoryStore::open(&dir, MemoryFlags::off()).unwrap();
    let mut fees = NewEntry::new("BTC fee preference", FEES, MemoryType::Feedback);
    fees.description = "Which fees to assume in backtests".into();
    fees.keywords = vec!["fees".into(), "basis points".into()];
    store.add(fees, t("2026-01-05T09:00:00Z")).unwrap();
    let aapl = NewEntry::new(
        "AAPL data source",
        "Use the built-in split-adjusted AAPL prices (2000-2013) unless the user supplies a CSV.",
        MemoryType::Reference,
    );
    store.add(aapl, t("2026-02-01T12:30:00Z")).unwrap();
    store
        .compress_entry(
            "BTC fee preference",
            Level::Daily,
            t("2026-01-20T03:00:00Z"),
        )
        .unwrap();
    store
        .compress_entry(
            "BTC fee preference",
            Level::Digest,
            t("2026-02-20T03:00:00Z"),
        )
        .unwrap();
    (tmp, dir)
}

fn entry_view(a: &App) -> vibedesk::tui::memory_view::EntryView {
    match a.browser().unwrap().view() {
        View::MemoryEntry(v) => v.clone(),
        other => panic!("not an entry view: {other:?}"),
    }
}

/// Opens the memory view and feeds it the listing of `dir`.
fn open_memory(a: &mut App, dir: &Path) {
    assert_eq!(update(a, ctrl('t')), vec![Effect::LoadSessions]);
    assert_eq!(update(a, key(KeyCode::Char('m'))), vec![Effect::LoadMemory]);
    update(a, Msg::Memory(memories::list(dir, now(), true)));
}

/// Opens the selected entry and feeds it its detail; returns its file.
fn open_entry(a: &mut App, dir: &Path) -> String {
    let fx = update(a, key(KeyCode::Enter));
    let [Effect::LoadMemoryEntry(file)] = fx.as_slice() else {
        panic!("Enter asks for the entry: {fx:?}");
    };
    let result = memories::detail(dir, file, now(), true);
    update(
        a,
        Msg::MemoryEntry {
            file: file.clone(),
            result,
        },
    );
    file.clone()
}

#[test]
fn the_memory_view_lists_searches_and_opens_an_entry_beside_its_originals() {
    let (_home, dir) = memory_home();
    let listing = memories::list(&dir, now(), true).unwrap();
    let titles: Vec<&str> = listing.rows.iter().map(|r| r.title.as_str()).collect();
    assert_eq!(
        titles,
        ["AAPL data source", "BTC fee preference"],
        "most recently accessed first"
    );
    let fees = &listing.rows[1];
    assert_eq!((fees.level.as_str(), fees.archives), ("digest", 2));
    assert!(fees.retention.is_some() && fees.problem.is_none());
    assert!(fees.importance.unwrap() < fees.quality.unwrap(), "decayed");
    assert_eq!(listing.rows[0].archives, 0);

    let mut a = app();
    assert_eq!(update(&mut a, ctrl('t')), vec![Effect::LoadSessions]);
    update(&mut a, Msg::Sessions(Vec::new()));
    // Tab next to the sessions list, and `m`, both reach the memory view;
    // back on the sessions nothing is re-read.
    assert_eq!(update(&mut a, key(KeyCode::Tab)), vec![Effect::LoadMemory]);
    assert_eq!(update(&mut a, key(KeyCode::Tab)), vec![]);
    assert!(matches!(a.browser().unwrap().view(), View::Sessions));
    assert_eq!(
        update(&mut a, key(KeyCode::Char('m'))),
        vec![Effect::LoadMemory]
    );
    let s = screen(&mut a, 80, 24, Instant::now());
    assert!(s.contains("loading…"), "{s}");
    update(&mut a, Msg::Memory(Ok(listing)));
    let s = screen(&mut a, 80, 24, Instant::now());
    assert!(s.contains("AAPL data source") && s.contains("⊕2"), "{s}");
    // `r` resumes sessions only.
    assert_eq!(update(&mut a, key(KeyCode::Char('r'))), vec![]);

    // `/` searches the whole entry, body included.
    update(&mut a, key(KeyCode::Char('/')));
    type_text(&mut a, "basis points");
    update(&mut a, key(KeyCode::Enter));
    assert_eq!(a.browser().unwrap().selected(), 1);

    let file = open_entry(&mut a, &dir);
    assert!(
        file.starts_with("feedback_btc_fee_preference_") && file.ends_with(".md"),
        "{file}"
    );
    let b = a.browser().unwrap();
    let d = b.memory_entry.as_ref().unwrap();
    let tags: Vec<&str> = d.archives.iter().map(|x| x.copy.tag.as_str()).collect();
    assert_eq!(tags, ["daily", "raw"], "newest first");
    assert_eq!(
        d.archives[1].body.as_deref(),
        Ok(FEES),
        "the raw original, whole"
    );
    assert_ne!(d.row.body, FEES, "the current text is compressed");
    let v = entry_view(&a);
    assert_eq!((v.archive, v.pane), (0, Pane::Current));

    // Side by side when wide, both texts on screen.
    let s = screen(&mut a, 160, 48, Instant::now());
    assert!(
        s.contains("Current text · digest") && s.contains("Archived original 1/2 · daily"),
        "{s}"
    );
    // Tab picks the next original and focuses it; `v` toggles the pane.
    update(&mut a, key(KeyCode::Tab));
    let v = entry_view(&a);
    assert_eq!((v.archive, v.pane), (1, Pane::Original));
    update(&mut a, key(KeyCode::Char('v')));
    assert_eq!(entry_view(&a).pane, Pane::Current);
    update(&mut a, key(KeyCode::Char('v')));
    // Search runs in the focused pane: a sentence compression dropped.
    update(&mut a, key(KeyCode::Char('/')));
    type_text(&mut a, "market-impact");
    update(&mut a, key(KeyCode::Enter));
    let b = a.browser().unwrap();
    assert!(
        b.message.is_none(),
        "found in the raw original: {:?}",
        b.message
    );
    let s = screen(&mut a, 80, 24, Instant::now());
    assert!(s.contains("Market-impact"), "{s}");
    // Shift-Tab wraps to the newest original.
    update(&mut a, key(KeyCode::BackTab));
    assert_eq!(entry_view(&a).archive, 0);

    // A late answer for another entry is dropped.
    update(
        &mut a,
        Msg::MemoryEntry {
            file: "reference_other.md".into(),
            result: Err(memories::MemoryViewError::Gone("reference_other.md".into())),
        },
    );
    assert!(a.browser().unwrap().error.is_none());
    // Esc back to the list, then out to the chat.
    update(&mut a, key(KeyCode::Esc));
    assert!(matches!(a.browser().unwrap().view(), View::Memory));
    update(&mut a, key(KeyCode::Esc));
    assert!(a.browser().is_none());
    // `/memory` opens the browser straight on the memory view.
    type_text(&mut a, "/memory");
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::LoadMemory]
    );
    assert!(matches!(a.browser().unwrap().view(), View::Memory));
    // From there Tab reaches the sessions, loading them.
    assert_eq!(
        update(&mut a, key(KeyCode::Tab)),
        vec![Effect::LoadSessions]
    );
}

#[test]
fn an_entry_never_compressed_says_it_has_no_original() {
    let (_home, dir) = memory_home();
    let mut a = app();
    open_memory(&mut a, &dir);
    open_entry(&mut a, &dir);
    let s = screen(&mut a, 160, 48, Instant::now());
    assert!(
        s.contains("Originals: none") && s.contains("never been compressed"),
        "{s}"
    );
    // Tab with nothing to pick still focuses the (empty) original pane.
    update(&mut a, key(KeyCode::Tab));
    assert_eq!(entry_view(&a).pane, Pane::Original);
}

#[test]
fn malformed_and_missing_memory_files_show_notices() {
    let (_home, dir) = memory_home();
    let entries = dir.join("entries");
    std::fs::write(
        entries.join("project_loose_note.md"),
        "just a note, no frontmatter",
    )
    .unwrap();
    std::fs::write(
        entries.join("project_odd.md"),
        b"---\nname: Odd one\ncompression_level: weekly\nquality_score: lots\n---\nbody \xff\xfe here".as_slice(),
    )
    .unwrap();
    // Not archive copies: ignored, not miscounted.
    let archive = dir.join("archive");
    std::fs::write(archive.join("project_odd.weekly.20260101T000000Z.md"), "x").unwrap();
    std::fs::write(archive.join("README"), "x").unwrap();

    let listing = memories::list(&dir, now(), true).unwrap();
    assert_eq!(listing.rows.len(), 4);
    let by_file = |f: &str| listing.rows.iter().find(|r| r.file == f).unwrap().clone();
    let loose = by_file("project_loose_note.md");
    assert!(loose.problem.as_deref().unwrap().contains("no frontmatter"));
    assert_eq!(loose.title, "project_loose_note");
    let odd = by_file("project_odd.md");
    let p = odd.problem.clone().unwrap();
    assert!(p.contains("UTF-8") && p.contains("weekly"), "{p}");
    assert_eq!((odd.level.as_str(), odd.archives), ("raw", 0));

    let mut a = app();
    open_memory(&mut a, &dir);
    let s = screen(&mut a, 80, 24, Instant::now());
    assert_eq!(s.matches('⚠').count(), 2, "{s}");
    // Open the odd one: its notice is on the entry's screen too.
    update(&mut a, key(KeyCode::Char('/')));
    type_text(&mut a, "odd one");
    update(&mut a, key(KeyCode::Enter));
    open_entry(&mut a, &dir);
    let s = screen(&mut a, 80, 24, Instant::now());
    assert!(s.contains("⚠ not valid UTF-8"), "{s}");
    update(&mut a, key(KeyCode::Esc));

    // An entry that disappeared between the list and Enter.
    std::fs::remove_file(entries.join("project_loose_note.md")).unwrap();
    update(&mut a, key(KeyCode::Char('/')));
    type_text(&mut a, "just a note");
    update(&mut a, key(KeyCode::Enter));
    open_entry(&mut a, &dir);
    let s = screen(&mut a, 80, 24, Instant::now());
    assert!(s.contains("no longer exists"), "{s}");
    for bad in ["../secrets.md", "a/b.md", "x.txt"] {
        assert!(memories::detail(&dir, bad, now(), true).is_err(), "{bad}");
    }

    // No memory folder at all: an empty list that says where it looked.
    let nowhere = dir.join("missing");
    let empty = memories::list(&nowhere, now(), true).unwrap();
    assert!(empty.rows.is_empty());
    let mut a = app();
    update(&mut a, ctrl('t'));
    update(&mut a, key(KeyCode::Char('m')));
    update(&mut a, Msg::Memory(Ok(empty)));
    let s = screen(&mut a, 160, 48, Instant::now());
    assert!(s.contains("no memories yet"), "{s}");
    // A listing error is shown, not swallowed.
    update(
        &mut a,
        Msg::Memory(Err(memories::MemoryViewError::Listing(
            "permission denied".into(),
        ))),
    );
    let s = screen(&mut a, 80, 24, Instant::now());
    assert!(s.contains("permission denied"), "{s}");
}

/// Unreadable frontmatter values (issue 16 item 6) are said in one line on
/// the memory view's bottom line: how many files, the first example naming
/// its field, and the folder to fix them in; the entry still loads.
#[test]
fn unreadable_frontmatter_values_are_one_notice_in_the_memory_view() {
    let (_home, dir) = memory_home();
    let entries = dir.join("entries");
    std::fs::write(
        entries.join("project_bogus.md"),
        "---\nname: Bogus type\ntype: : : bogus\ncreated_at: yesterday\nlast_accessed: 2026-02-01T00:00:00Z\n---\nstill a body",
    )
    .unwrap();
    let listing = memories::list(&dir, now(), true).unwrap();
    let bogus = listing
        .rows
        .iter()
        .find(|r| r.file == "project_bogus.md")
        .unwrap();
    assert_eq!(bogus.title, "Bogus type", "the entry still loads");
    let p = bogus.problem.as_deref().unwrap();
    assert!(
        p.contains("type ': : bogus'") && p.contains("created_at 'yesterday'"),
        "{p}"
    );
    let notice = listing.notice.clone().unwrap();
    assert!(
        notice
            .starts_with("1 memory file(s) have problems, e.g. project_bogus.md: type ': : bogus'"),
        "{notice}"
    );
    assert!(notice.contains(&entries.display().to_string()), "{notice}");

    let mut a = app();
    open_memory(&mut a, &dir);
    assert_eq!(a.browser().unwrap().message.as_ref(), Some(&notice));
    let s = screen(&mut a, 160, 48, Instant::now());
    assert!(s.contains("1 memory file(s) have problems"), "{s}");
    // A clean folder says nothing.
    let (_clean_home, clean) = memory_home();
    assert!(
        memories::list(&clean, now(), true)
            .unwrap()
            .notice
            .is_none()
    );
}

#[test]
fn memory_view_snapshots() {
    let (_home, dir) = memory_home();
    let mut a = app();
    let at = Instant::now();
    open_memory(&mut a, &dir);
    update(&mut a, key(KeyCode::Down));
    for (w, h) in [(80, 24), (160, 48)] {
        insta::assert_snapshot!(format!("memory_list_{w}x{h}"), screen(&mut a, w, h, at));
    }
    open_entry(&mut a, &dir);
    for (w, h) in [(80, 24), (160, 48)] {
        insta::assert_snapshot!(format!("memory_entry_{w}x{h}"), screen(&mut a, w, h, at));
    }
    // The older (raw) original, focused: stacked it takes most rows.
    update(&mut a, key(KeyCode::Tab));
    for (w, h) in [(80, 24), (160, 48)] {
        insta::assert_snapshot!(
            format!("memory_entry_raw_original_{w}x{h}"),
            screen(&mut a, w, h, at)
        );
    }
}
