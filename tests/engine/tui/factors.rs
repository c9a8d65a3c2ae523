//! The factor view (docs §17.12) on a real screen: bundled alphas
//! evaluated on a dozen offline stocks over two years, screened, written
//! as a record (§17.9), then opened with `/factors` (the newest record, a
//! named one, none at all) and with `f` on a result naming its
//! `screen_file`, and drawn at 160×48 and 80×24.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use crossterm::event::KeyCode;
use serde_json::json;
use tokio::time::Instant;
use vibedesk::agent::events::{BatchMode, RunStatus, ToolCallStatus};
use vibedesk::research::data::embedded;
use vibedesk::research::factor::alpha101::alpha101;
use vibedesk::research::factor::expr::{OhlcvPanel, evaluate, parse};
use vibedesk::research::factor::record::{
    RECORD_VERSION, ScreenRecord, ScreenUniverse, ScreenedExpr, screen_dir_name, screens_dir,
};
use vibedesk::research::factor::screen::{ScreenOptions, Universe, screen as run_screen};
use vibedesk::tools::events::ToolEvent;
use vibedesk::tui::App;
use vibedesk::tui::app::{Effect, Msg, update};
use vibedesk::tui::factor_view::load;
use vibedesk::tui::overlay::Overlay;

use super::*;

const SYMBOLS: [&str; 12] = [
    "AABA", "ABT", "AIG", "AXP", "BMY", "C", "CAT", "COST", "CSCO", "DUK", "DVN", "FCX",
];
/// Bundled alphas by paper number (cheap ones, different families).
const ALPHAS: [u16; 6] = [1, 3, 6, 12, 41, 101];

/// Screens the alphas (and one factor with no values, which cannot be
/// scored) and writes the record under `data_dir`'s `factor/`.
pub(super) fn write_record(data_dir: &Path) -> (PathBuf, ScreenRecord) {
    let (start, end) = (
        NaiveDate::from_ymd_opt(2015, 1, 1).unwrap(),
        NaiveDate::from_ymd_opt(2016, 12, 31).unwrap(),
    );
    let bars: Vec<_> = SYMBOLS
        .iter()
        .map(|s| embedded::load(s, Some(start), Some(end)).unwrap().bars)
        .collect();
    let series: Vec<(&str, &_)> = SYMBOLS.iter().copied().zip(&bars).collect();
    let panel = OhlcvPanel::from_bars(&series).unwrap();
    let lib: Vec<_> = alpha101()
        .unwrap()
        .into_iter()
        .filter(|a| ALPHAS.contains(&a.number))
        .collect();
    assert_eq!(lib.len(), ALPHAS.len());
    let exprs: Vec<_> = lib.iter().map(|a| parse(&a.expr).unwrap()).collect();
    let values = evaluate(&exprs, &panel, None).unwrap();
    let empty = vec![f64::NAN; panel.close.len()];
    let mut factors: Vec<(&str, &[f64])> = lib
        .iter()
        .zip(&values)
        .map(|(a, v)| (a.name.as_str(), v.as_slice()))
        .collect();
    factors.push(("no_values", &empty));
    let u = Universe {
        dates: &panel.dates,
        symbols: &panel.symbols,
        close: &panel.close,
    };
    let options = ScreenOptions {
        horizons: vec![1, 5, 10],
        ..ScreenOptions::default()
    };
    let screen = run_screen(u, &factors, &options).unwrap();
    let mut expressions: Vec<ScreenedExpr> = lib
        .iter()
        .map(|a| ScreenedExpr {
            name: a.name.clone(),
            paper_number: Some(a.number),
            source: a.expr.clone(),
        })
        .collect();
    expressions.push(ScreenedExpr {
        name: "no_values".into(),
        paper_number: None,
        source: "close * 0 / 0".into(),
    });
    let record = ScreenRecord {
        version: RECORD_VERSION,
        created: "2026-12-07T17:00:00Z".into(),
        library: Some("alpha101".into()),
        universe: ScreenUniverse {
            symbols: panel.symbols.clone(),
            start: panel.dates[0],
            end: *panel.dates.last().unwrap(),
            source: "offline".into(),
        },
        expressions,
        screen,
    };
    let dir = screens_dir(data_dir).join(screen_dir_name(chrono::Utc::now()));
    (record.write(&dir).unwrap(), record)
}

/// The names of the scored factors in ranking order.
fn ranked_names(r: &ScreenRecord) -> Vec<String> {
    r.screen
        .ranking
        .iter()
        .map(|i| r.screen.factors[*i].name.clone())
        .filter(|n| n != "no_values")
        .collect()
}

/// `/factors [arg]` typed and sent: the load it asks for.
fn slash_factors(a: &mut App, arg: &str) -> (u64, Option<PathBuf>) {
    type_text(a, &format!("/factors{arg}"));
    let fx = update(a, key(KeyCode::Enter));
    let [Effect::LoadFactors { id, path }] = fx.as_slice() else {
        panic!("{fx:?}")
    };
    (*id, path.clone())
}

/// The screen row of `name` in the list (the left 60 columns, below the
/// title, the tabs and the list's header).
fn row_of(s: &str, name: &str) -> usize {
    let needle = format!(" {name} ");
    s.lines()
        .enumerate()
        .skip(4)
        .find(|(_, l)| l.chars().take(60).collect::<String>().contains(&needle))
        .map(|(i, _)| i)
        .unwrap_or_else(|| panic!("{name} not in the list:\n{s}"))
}

#[test]
fn factors_opens_the_newest_record_and_draws_it() {
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("data");
    let (file, record) = write_record(&data);
    let names = ranked_names(&record);
    assert!(names.len() >= 4, "{names:?}");
    let mut a = app();
    let (id, path) = slash_factors(&mut a, "");
    assert_eq!(path, None, "the newest record, found by the runtime");
    let loaded = load(&data, None).unwrap();
    assert_eq!(loaded.path, file);
    update(
        &mut a,
        Msg::FactorsLoaded {
            id,
            result: Ok(Box::new(loaded)),
        },
    );
    let s = screen(&mut a, 160, 48, Instant::now());
    assert!(
        s.contains("alpha101") && s.contains("12 symbols") && s.contains("7 factors, 6 scored"),
        "{s}"
    );
    // The list in ranking order, the unscored one last with its error.
    let rows: Vec<usize> = names.iter().map(|n| row_of(&s, n)).collect();
    assert!(rows.windows(2).all(|w| w[0] < w[1]), "{rows:?}\n{s}");
    assert!(row_of(&s, "no_values") > rows[rows.len() - 1]);
    assert!(s.contains("not scored"), "{s}");
    // The best factor's rank IC mean, in its row and over its chart.
    let best = &record.screen.factors[record.screen.ranking[0]];
    let h1 = &best.stats.as_ref().unwrap().horizons[0];
    let mean = format!("{:.4}", h1.rank_ic_stats.mean);
    assert!(s.contains(&format!("rank IC (1d) mean {mean}")), "{s}");
    assert!(s.contains(&format!("mean {mean}")), "{s}");
    assert!(s.contains("Q1 ") && s.contains("Q5 "), "the legend\n{s}");
    assert!(s.contains("IC decay") && s.contains("10d"), "{s}");
    // j moves the selection: the charts follow the second factor.
    update(&mut a, key(KeyCode::Char('j')));
    let s = screen(&mut a, 160, 48, Instant::now());
    assert!(s.contains(&format!("{} · rank IC (1d)", names[1])), "{s}");
    // 2: the heatmap, names on the rows, numbers on the columns.
    update(&mut a, key(KeyCode::Char('2')));
    let s = screen(&mut a, 160, 48, Instant::now());
    assert!(s.contains("Correlation of the rank IC series"), "{s}");
    assert!(s.contains(&format!(" 1 {}", names[0])), "{s}");
    assert!(
        s.contains("#1") && s.contains("+1.00") && s.contains("scale"),
        "{s}"
    );
    // Small terminals still draw, and q closes.
    for (w, h) in [(80, 24), (40, 10), (20, 5)] {
        let s = screen(&mut a, w, h, Instant::now());
        assert!(!s.is_empty());
    }
    update(&mut a, key(KeyCode::Char('1')));
    let s = screen(&mut a, 80, 24, Instant::now());
    assert!(s.contains(&names[0]), "{s}");
    update(&mut a, key(KeyCode::Char('q')));
    assert!(a.overlays.is_empty());
}

#[test]
fn factors_without_a_record_or_with_a_bad_file_says_why() {
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("data");
    let mut a = app();
    let (id, _) = slash_factors(&mut a, "");
    let err = load(&data, None).unwrap_err();
    update(
        &mut a,
        Msg::FactorsLoaded {
            id,
            result: Err(err),
        },
    );
    let s = screen(&mut a, 120, 30, Instant::now());
    assert!(
        s.contains("no factor view: no screen record under") && s.contains("factor screen"),
        "{s}"
    );
    update(&mut a, key(KeyCode::Esc));
    let bad = home.path().join("bad.json");
    std::fs::write(&bad, "{\"not\": \"a screen\"}").unwrap();
    let (id, path) = slash_factors(&mut a, &format!(" {}", bad.display()));
    assert_eq!(path.as_deref(), Some(bad.as_path()));
    let err = load(&data, path.as_deref()).unwrap_err();
    update(
        &mut a,
        Msg::FactorsLoaded {
            id,
            result: Err(err),
        },
    );
    let s = screen(&mut a, 160, 30, Instant::now());
    assert!(s.contains("is not a screen record"), "{s}");
}

#[test]
fn f_on_a_result_naming_a_screen_file_opens_it() {
    let home = tempfile::tempdir().unwrap();
    let (file, _) = write_record(&home.path().join("data"));
    let mut a = app();
    // Without such a result, f says how.
    update(&mut a, key(KeyCode::Tab));
    assert!(update(&mut a, key(KeyCode::Char('f'))).is_empty());
    update(&mut a, key(KeyCode::Tab));
    let t = Instant::now();
    type_text(&mut a, "screen the alphas");
    update(&mut a, key(KeyCode::Enter));
    // The cell keeps the event's preview, the head of the answer (200
    // characters): the path must be early in it, as `run_dir` is in a
    // backtest's.
    let output = json!({
        "status": "ok",
        "screen_file": file.display().to_string(),
        "ranking": (0..40).map(|i| format!("alpha{i:03}")).collect::<Vec<_>>(),
    });
    let preview: String = output.to_string().chars().take(200).collect();
    assert!(!preview.ends_with('}'), "cut, as a real preview is");
    feed(
        &mut a,
        &[
            run_started(),
            batch(
                1,
                0,
                BatchMode::Parallel,
                &[("c1", "factor_screen", json!({}))],
            ),
            started(1, "c1", "factor_screen", true, Some(60.0)),
            tool(ToolEvent::ToolCallFinished {
                iter: 1,
                call_id: "c1".into(),
                tool: "factor_screen".into(),
                status: ToolCallStatus::Ok,
                elapsed_ms: 30,
                preview,
                error_code: None,
                output: Some(output),
            }),
            run_finished(RunStatus::Success, "final answer delivered"),
        ],
        t,
    );
    update(&mut a, Msg::TurnDone { error: None });
    update(&mut a, key(KeyCode::Tab));
    let fx = update(&mut a, key(KeyCode::Char('f')));
    let [Effect::LoadFactors { path, .. }] = fx.as_slice() else {
        panic!("{fx:?}")
    };
    assert_eq!(path.as_deref(), Some(file.as_path()));
    assert!(matches!(a.overlays.top(), Some(Overlay::Factors(_))));
}
