//! `update(state, msg) -> effects` driven by message sequences.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use vibedesk::agent::events::{AgentEvent, BatchMode, RunStatus, ToolCallStatus};
use vibedesk::agent::{EventSink, LoopConfig, LoopDeps};
use vibedesk::llm::scripted::{Script, ScriptedProvider};
use vibedesk::session::Session;
use vibedesk::store::Paths;
use vibedesk::tools::builtin::default_registry;
use vibedesk::tui::app::{AppOptions, Effect, Focus, Msg, update};
use vibedesk::tui::cells::{CellKind, NoticeKind, ToolCellState};
use vibedesk::tui::markdown;
use vibedesk::tui::settings::TuiSettings;
use vibedesk::tui::theme::Theme;
use vibedesk::tui::tool_panel::CallState;
use vibedesk::tui::transcripts::{self, SessionRow};
use vibedesk::tui::wrap::line_text;

use super::*;

fn cells(app: &vibedesk::tui::App) -> Vec<CellKind> {
    app.chat.cells.iter().map(|c| c.kind().clone()).collect()
}

fn notices(app: &vibedesk::tui::App, kind: NoticeKind) -> Vec<String> {
    cells(app)
        .into_iter()
        .filter_map(|c| match c {
            CellKind::Notice { kind: k, text } if k == kind => Some(text),
            _ => None,
        })
        .collect()
}

#[test]
fn enter_sends_and_marks_the_app_busy() {
    let mut a = app();
    assert!(type_text(&mut a, "hello").is_empty());
    let fx = update(&mut a, key(KeyCode::Enter));
    assert_eq!(
        fx,
        vec![Effect::Send {
            prompt: "hello".into(),
            plan: Default::default()
        }]
    );
    assert!(a.busy());
    assert!(a.composer.is_empty());
    assert!(matches!(cells(&a).last(), Some(CellKind::User { text }) if text == "hello"));
    // An empty input sends nothing.
    let mut b = app();
    assert!(update(&mut b, key(KeyCode::Enter)).is_empty());
    assert!(!b.busy());
}

#[test]
fn messages_typed_while_busy_queue_and_run_in_order() {
    let mut a = app();
    type_text(&mut a, "first");
    update(&mut a, key(KeyCode::Enter));
    type_text(&mut a, "second");
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    type_text(&mut a, "third");
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    assert_eq!(a.queued, ["second", "third"]);
    let shown = screen(&mut a, 80, 24, Instant::now());
    assert!(shown.contains("queued 1: second"), "{shown}");
    assert_eq!(
        update(&mut a, Msg::TurnDone { error: None }),
        vec![Effect::Send {
            prompt: "second".into(),
            plan: Default::default()
        }]
    );
    assert_eq!(
        update(&mut a, Msg::TurnDone { error: None }),
        vec![Effect::Send {
            prompt: "third".into(),
            plan: Default::default()
        }]
    );
    assert!(update(&mut a, Msg::TurnDone { error: None }).is_empty());
    assert!(!a.busy());
}

#[test]
fn esc_cancels_the_run_keeps_the_chat_and_returns_queued_text() {
    let mut a = app();
    type_text(&mut a, "long job");
    update(&mut a, key(KeyCode::Enter));
    let t = Instant::now();
    feed(&mut a, &[run_started(), text(1, "partial line\n")], t);
    type_text(&mut a, "follow-up");
    update(&mut a, key(KeyCode::Enter));
    let before = a.chat.cells.len();
    assert_eq!(update(&mut a, key(KeyCode::Esc)), vec![Effect::Cancel]);
    assert!(a.cancelling());
    assert!(
        a.queued.is_empty(),
        "queued work must not start by surprise"
    );
    assert_eq!(a.composer.text(), "follow-up");
    feed(
        &mut a,
        &[run_finished(RunStatus::Cancelled, "cancelled by the user")],
        t,
    );
    update(&mut a, Msg::TurnDone { error: None });
    assert!(!a.busy());
    assert!(
        a.chat.cells.len() > before,
        "the chat is kept and the end is shown"
    );
    assert!(matches!(
        cells(&a).last(),
        Some(CellKind::RunEnd { status: RunStatus::Cancelled, reason: Some(r), .. }) if r.contains("cancelled")
    ));
    let s = screen(&mut a, 80, 24, t);
    assert!(s.contains("cancelled · 3 iterations"), "{s}");
}

#[test]
fn ctrl_c_cancels_then_clears_then_quits_on_the_second_press() {
    let mut a = app();
    type_text(&mut a, "x");
    update(&mut a, key(KeyCode::Enter));
    assert_eq!(update(&mut a, ctrl('c')), vec![Effect::Cancel]);
    update(&mut a, Msg::TurnDone { error: None });
    type_text(&mut a, "draft");
    assert!(update(&mut a, ctrl('c')).is_empty());
    assert!(a.composer.is_empty(), "first Ctrl-C on text clears it");
    assert_eq!(update(&mut a, ctrl('c')), vec![Effect::Quit]);
    assert!(a.should_quit);

    // Another key between the presses disarms.
    let mut b = app();
    assert!(update(&mut b, ctrl('c')).is_empty());
    assert!(b.quit_armed);
    update(&mut b, key(KeyCode::PageUp));
    assert!(update(&mut b, ctrl('c')).is_empty());
    assert!(!b.should_quit);
    assert_eq!(update(&mut b, ctrl('c')), vec![Effect::Quit]);
}

#[test]
fn multi_line_input_history_and_paste() {
    let mut a = app();
    type_text(&mut a, "line one");
    update(&mut a, alt(KeyCode::Enter));
    type_text(&mut a, "line two");
    update(&mut a, ctrl('j'));
    type_text(&mut a, "three");
    assert_eq!(a.composer.line_count(), 3);
    let fx = update(&mut a, key(KeyCode::Enter));
    assert_eq!(
        fx,
        vec![Effect::Send {
            prompt: "line one\nline two\nthree".into(),
            plan: Default::default()
        }]
    );
    update(&mut a, Msg::TurnDone { error: None });

    type_text(&mut a, "second");
    update(&mut a, key(KeyCode::Enter));
    update(&mut a, Msg::TurnDone { error: None });
    type_text(&mut a, "draft");
    update(&mut a, key(KeyCode::Up));
    assert_eq!(a.composer.text(), "second");
    update(&mut a, key(KeyCode::Up));
    assert_eq!(a.composer.text(), "line one\nline two\nthree");
    // The cursor sits at the end of a recalled entry, so Down moves on.
    update(&mut a, key(KeyCode::Down));
    assert_eq!(a.composer.text(), "second");
    update(&mut a, key(KeyCode::Down));
    assert_eq!(a.composer.text(), "draft", "the draft comes back");

    let big: String = (0..2000).map(|i| format!("row {i}\n")).collect();
    let mut b = app();
    update(&mut b, Msg::Paste(big.clone()));
    assert_eq!(b.composer.line_count(), 2001);
    assert_eq!(b.composer.text(), big);
    assert!(
        b.status
            .as_ref()
            .is_some_and(|(_, s)| s.contains("2000 line(s)"))
    );
    let fx = update(&mut b, key(KeyCode::Enter));
    assert_eq!(
        fx,
        vec![Effect::Send {
            prompt: big,
            plan: Default::default()
        }]
    );
}

#[test]
fn question_mark_opens_help_only_on_an_empty_input() {
    let mut a = app();
    update(&mut a, key(KeyCode::Char('?')));
    assert!(a.help().is_some());
    update(&mut a, key(KeyCode::Esc));
    assert!(a.help().is_none());
    type_text(&mut a, "why?");
    assert!(a.help().is_none());
    assert_eq!(a.composer.text(), "why?");
    update(
        &mut a,
        Msg::Key(KeyEvent::new(KeyCode::F(1), KeyModifiers::NONE)),
    );
    assert!(a.help().is_some());
}

#[test]
fn slash_commands() {
    let mut a = app();
    type_text(&mut a, "/compact keep the AAPL numbers");
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::Compact {
            focus: Some("keep the AAPL numbers".into())
        }]
    );
    type_text(&mut a, "/compact");
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::Compact { focus: None }]
    );
    type_text(&mut a, "/sessions");
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::LoadSessions]
    );
    assert!(a.browser().is_some());
    update(&mut a, key(KeyCode::Esc));
    assert!(a.browser().is_none());
    type_text(&mut a, "/help");
    update(&mut a, key(KeyCode::Enter));
    assert!(a.help().is_some());
    update(&mut a, key(KeyCode::Esc));
    type_text(&mut a, "/model");
    update(&mut a, key(KeyCode::Enter));
    assert!(
        notices(&a, NoticeKind::Info)
            .iter()
            .any(|n| n.contains("model: scripted"))
    );
    type_text(&mut a, "/model gpt-x");
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::SwitchModel("gpt-x".into())]
    );
    type_text(&mut a, "/bogus");
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    assert!(
        notices(&a, NoticeKind::Error)
            .iter()
            .any(|n| n.contains("unknown command /bogus"))
    );
    type_text(&mut a, "//etc/hosts is a path");
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::Send {
            prompt: "/etc/hosts is a path".into(),
            plan: Default::default()
        }]
    );
    // /new is refused while busy, then clears the chat.
    type_text(&mut a, "/new");
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    update(&mut a, Msg::TurnDone { error: None });
    type_text(&mut a, "/new");
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::NewSession]
    );
    assert!(!cells(&a).iter().any(|c| matches!(c, CellKind::User { .. })));
    type_text(&mut a, "/quit");
    assert_eq!(update(&mut a, key(KeyCode::Enter)), vec![Effect::Quit]);
}

#[test]
fn export_writes_the_open_session_as_markdown_or_html() {
    let mut a = app();
    type_text(&mut a, "/export");
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    assert!(
        notices(&a, NoticeKind::Warning)
            .iter()
            .any(|n| n.contains("nothing to export"))
    );
    update(
        &mut a,
        Msg::SessionOpened {
            id: Some("s1".into()),
            history: vec![],
            skipped: 0,
        },
    );
    for (text, html) in [
        ("/export html", true),
        ("/export", false),
        ("/export md", false),
    ] {
        type_text(&mut a, text);
        assert_eq!(
            update(&mut a, key(KeyCode::Enter)),
            vec![Effect::Export {
                session: "s1".into(),
                html
            }],
            "{text}"
        );
    }
    type_text(&mut a, "/export pdf");
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    assert!(
        notices(&a, NoticeKind::Error)
            .iter()
            .any(|n| n.contains("/export pdf"))
    );
}

#[test]
fn without_a_model_a_prompt_explains_how_to_connect_one() {
    let mut a = app_with(AppOptions {
        has_model: false,
        no_model_help: format!("vibedesk: {}", vibedesk::cli::NO_MODEL_HELP),
        ..AppOptions::default()
    });
    type_text(&mut a, "what is AAPL's drawdown?");
    assert!(
        update(&mut a, key(KeyCode::Enter)).is_empty(),
        "nothing runs"
    );
    assert!(!a.busy());
    let errs = notices(&a, NoticeKind::Error);
    assert_eq!(errs.len(), 1);
    assert!(errs[0].contains("no model is configured"));
    let s = screen(&mut a, 80, 24, Instant::now());
    assert!(s.contains("no model configured"), "{s}");
    assert!(s.contains("DEEPSEEK_API_KEY"), "{s}");
}

#[test]
fn streamed_markdown_commits_whole_lines_and_ends_equal_to_a_full_render() {
    let theme = Theme::default();
    let full: Vec<String> = markdown::render(ANSWER, 60, &theme)
        .iter()
        .map(line_text)
        .collect();
    // Every split of the text into two deltas, plus word-sized chunks.
    let mut splits: Vec<Vec<String>> = (1..ANSWER.len())
        .filter(|i| ANSWER.is_char_boundary(*i))
        .map(|i| vec![ANSWER[..i].to_string(), ANSWER[i..].to_string()])
        .collect();
    splits.push(ANSWER.split_inclusive(' ').map(String::from).collect());
    for chunks in splits {
        let mut a = app();
        let t = Instant::now();
        feed(&mut a, &[run_started()], t);
        let mut sent = String::new();
        for c in &chunks {
            feed(&mut a, &[text(3, c)], t);
            sent.push_str(c);
            let CellKind::Assistant { text, finished, .. } = a.chat.cells.last().unwrap().kind()
            else {
                panic!("the reply is the last cell");
            };
            assert!(!finished);
            assert_eq!(text, &sent);
            // What shows is exactly the render of the text up to the last newline.
            let committed = &sent[..sent.rfind('\n').map_or(0, |i| i + 1)];
            let expect: Vec<String> = markdown::render(committed, 60, &theme)
                .iter()
                .map(line_text)
                .filter(|l| !l.trim().is_empty())
                .collect();
            let shown: Vec<String> = a
                .chat
                .cells
                .last_mut()
                .unwrap()
                .lines(62, &theme, Default::default())
                .iter()
                .map(line_text)
                .filter(|l| !l.trim().is_empty() && l.trim() != "…")
                .map(|l| l[2..].to_string())
                .collect();
            assert_eq!(shown, expect, "after {sent:?}");
        }
        feed(
            &mut a,
            &[AgentEvent::Answer {
                iter: 3,
                content: ANSWER.into(),
                degraded: false,
            }],
            t,
        );
        let cell = a
            .chat
            .cells
            .iter_mut()
            .rev()
            .find(|c| matches!(c.kind(), CellKind::Assistant { .. }))
            .unwrap();
        let shown: Vec<String> = cell
            .lines(62, &theme, Default::default())
            .iter()
            .map(line_text)
            .filter(|l| !l.trim().is_empty())
            .map(|l| l[2..].to_string())
            .collect();
        let expect: Vec<String> = full
            .iter()
            .filter(|l| !l.trim().is_empty())
            .cloned()
            .collect();
        assert_eq!(shown, expect, "chunks: {chunks:?}");
    }
}

#[test]
fn partial_lines_never_show_while_streaming() {
    let mut a = app();
    let t = Instant::now();
    feed(
        &mut a,
        &[run_started(), text(1, "First line is complete\nSecond li")],
        t,
    );
    let s = screen(&mut a, 80, 24, t);
    assert!(s.contains("First line is complete"), "{s}");
    assert!(!s.contains("Second li"), "{s}");
    feed(&mut a, &[text(1, "ne done\n")], t);
    let s = screen(&mut a, 80, 24, t);
    assert!(s.contains("Second line done"), "{s}");
}

#[test]
fn a_stream_reset_voids_the_failed_attempt() {
    let mut a = app();
    let t = Instant::now();
    feed(&mut a, &[run_started(), text(1, "doomed text\n")], t);
    feed(
        &mut a,
        &[AgentEvent::StreamReset {
            iter: 1,
            reason: "stream".into(),
            provider: "p".into(),
            model: "m".into(),
            error: "connection reset".into(),
            retry_in_ms: 1000,
        }],
        t,
    );
    assert!(
        !cells(&a)
            .iter()
            .any(|c| matches!(c, CellKind::Assistant { .. }))
    );
    assert!(notices(&a, NoticeKind::Warning)[0].contains("retrying in 1.0s"));
}

#[test]
fn tool_calls_become_compact_cells_that_expand() {
    let mut a = app();
    let t = Instant::now();
    feed(
        &mut a,
        &[
            run_started(),
            batch(
                1,
                0,
                BatchMode::Parallel,
                &[
                    ("c1", "read_file", json!({"path": "notes.md"})),
                    ("c2", "list_dir", json!({})),
                ],
            ),
            started(1, "c1", "read_file", true, Some(30.0)),
            started(1, "c2", "list_dir", true, Some(30.0)),
            finished(
                1,
                "c1",
                "read_file",
                ToolCallStatus::Ok,
                12,
                "{\"content\":\"# Notes\"}",
            ),
            finished(
                1,
                "c2",
                "list_dir",
                ToolCallStatus::Error,
                3,
                "permission denied",
            ),
        ],
        t,
    );
    let tools: Vec<_> = cells(&a)
        .into_iter()
        .filter_map(|c| match c {
            CellKind::Tool(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[0].state, ToolCellState::Finished(ToolCallStatus::Ok));
    assert_eq!(
        tools[1].state,
        ToolCellState::Finished(ToolCallStatus::Error)
    );
    let s = screen(&mut a, 80, 24, t);
    assert!(s.contains("✓ read_file notes.md · 12ms"), "{s}");
    assert!(
        s.contains("permission denied"),
        "failures explain themselves: {s}"
    );
    assert!(!s.contains("# Notes"), "results stay folded: {s}");
    // Tab selects the last expandable cell, Up moves, Enter expands.
    update(&mut a, key(KeyCode::Tab));
    assert_eq!(a.focus, Focus::Chat);
    update(&mut a, key(KeyCode::Up));
    update(&mut a, key(KeyCode::Enter));
    let s = screen(&mut a, 80, 24, t);
    assert!(s.contains("\"content\": \"# Notes\""), "{s}");
    assert!(s.contains('▌'), "the selection is marked: {s}");
    // Typing returns to the input with the character.
    update(&mut a, key(KeyCode::Char('x')));
    assert_eq!(a.focus, Focus::Input);
    assert_eq!(a.composer.text(), "x");
    // Ctrl-O expands every tool cell at once.
    update(&mut a, ctrl('o'));
    let s = screen(&mut a, 80, 40, t);
    assert!(
        s.contains("permission denied") && s.contains("\"content\": \"# Notes\""),
        "{s}"
    );
}

#[test]
fn reasoning_is_dimmed_and_collapsible() {
    let mut a = app();
    let t = Instant::now();
    feed(
        &mut a,
        &[
            run_started(),
            AgentEvent::ReasoningDelta {
                iter: 1,
                chars: 40,
                tail: "Plan: list files first.".into(),
            },
            AgentEvent::ReasoningDelta {
                iter: 1,
                chars: 1234,
                tail: "Plan: list files first. Then read them.".into(),
            },
        ],
        t,
    );
    let reasoning = cells(&a)
        .into_iter()
        .filter(|c| matches!(c, CellKind::Reasoning { .. }))
        .count();
    assert_eq!(reasoning, 1, "deltas update one cell");
    let s = screen(&mut a, 80, 24, t);
    assert!(s.contains("▸ thinking · 1.2k chars"), "{s}");
    assert!(!s.contains("Then read them"), "{s}");
    update(&mut a, ctrl('r'));
    let s = screen(&mut a, 80, 24, t);
    assert!(
        s.contains("▾ thinking") && s.contains("Then read them"),
        "{s}"
    );
    let theme = Theme::default();
    let lines = a
        .chat
        .cells
        .last_mut()
        .unwrap()
        .lines(78, &theme, a.chat.toggles)
        .to_vec();
    assert!(
        lines
            .iter()
            .flat_map(|l| l.spans.iter())
            .any(|s| s.content.contains("Then") && s.style == theme.reasoning)
    );
}

#[test]
fn run_end_shows_status_and_reason() {
    let mut a = app();
    let t = Instant::now();
    feed(
        &mut a,
        &[
            run_started(),
            run_finished(
                RunStatus::Failed,
                "provider_stream_error: connection refused",
            ),
        ],
        t,
    );
    let s = screen(&mut a, 160, 48, t);
    assert!(
        s.contains(
            "✗ failed · 3 iterations · 6,216 tokens: provider_stream_error: connection refused"
        ),
        "{s}"
    );
}

#[test]
fn wheel_and_pages_scroll_and_follow_resumes_at_the_bottom() {
    let mut a = app();
    let t = Instant::now();
    for i in 0..60 {
        a.chat.push(CellKind::User {
            text: format!("message {i}"),
        });
    }
    screen(&mut a, 80, 24, t);
    assert!(a.chat.follow);
    let wheel = |kind| {
        Msg::Mouse(MouseEvent {
            kind,
            column: 5,
            row: 5,
            modifiers: KeyModifiers::NONE,
        })
    };
    update(&mut a, wheel(MouseEventKind::ScrollUp));
    assert!(!a.chat.follow);
    let s = screen(&mut a, 80, 24, t);
    assert!(s.contains("more below"), "{s}");
    assert!(!s.contains("message 59"), "{s}");
    // New output does not move a scrolled view.
    a.chat.push(CellKind::User {
        text: "message 60".into(),
    });
    let again = screen(&mut a, 80, 24, t);
    assert!(!again.contains("message 60"));
    update(&mut a, key(KeyCode::PageUp));
    let s = screen(&mut a, 80, 24, t);
    assert!(s.contains("message 4"), "{s}");
    update(&mut a, key(KeyCode::PageDown));
    update(&mut a, key(KeyCode::PageDown));
    update(&mut a, wheel(MouseEventKind::ScrollDown));
    update(&mut a, wheel(MouseEventKind::ScrollDown));
    assert!(a.chat.follow, "reaching the bottom follows again");
    let s = screen(&mut a, 80, 24, t);
    assert!(s.contains("message 60"), "{s}");
    update(
        &mut a,
        Msg::Key(KeyEvent::new(KeyCode::Home, KeyModifiers::CONTROL)),
    );
    let s = screen(&mut a, 80, 24, t);
    assert!(s.contains("message 0"), "{s}");
    update(
        &mut a,
        Msg::Key(KeyEvent::new(KeyCode::End, KeyModifiers::CONTROL)),
    );
    assert!(a.chat.follow);
}

#[test]
fn bindings_are_named_and_overridable_from_config_toml() {
    let settings = TuiSettings::from_toml(
        "provider = \"deepseek\"\n[tui]\ntheme = \"light\"\n[tui.keys]\ntranscripts = \"f2\"\nnewline = [\"ctrl-j\"]\n",
        "config.toml",
    )
    .unwrap();
    assert_eq!(settings.theme.as_deref(), Some("light"));
    let mut a = vibedesk::tui::App::new(
        Theme::default(),
        settings.keymap().unwrap(),
        AppOptions::default(),
    );
    assert!(update(&mut a, ctrl('t')).is_empty());
    assert!(a.browser().is_none(), "the default key was replaced");
    assert_eq!(
        update(
            &mut a,
            Msg::Key(KeyEvent::new(KeyCode::F(2), KeyModifiers::NONE))
        ),
        vec![Effect::LoadSessions]
    );
    update(&mut a, key(KeyCode::Esc));
    type_text(&mut a, "a");
    update(&mut a, alt(KeyCode::Enter));
    assert_eq!(
        a.composer.line_count(),
        1,
        "alt-enter no longer adds a line"
    );
    update(&mut a, key(KeyCode::F(1)));
    let s = screen(&mut a, 160, 48, Instant::now());
    assert!(
        s.contains("F2") && s.contains("[transcripts]"),
        "help shows the override: {s}"
    );
    for bad in [
        "[tui.keys]\nnope = \"x\"\n",
        "[tui.keys]\nquit = \"ctrl-what\"\n",
        "[tui]\ncolour = 1\n",
    ] {
        let r = TuiSettings::from_toml(bad, "c").and_then(|s| s.keymap().map_err(Into::into));
        assert!(r.is_err(), "{bad}");
    }
}

fn rows() -> Vec<SessionRow> {
    use vibedesk::session::SessionMeta;
    vec![
        SessionRow {
            meta: SessionMeta {
                id: "bbbbbbbbbbbb".into(),
                created_at: "2026-03-02T10:00:00.000Z".into(),
                updated_at: "2026-03-02T10:05:00.000Z".into(),
                title: "Backtest SMA crossover on AAPL".into(),
                runs: 2,
                last_status: Some("success".into()),
                last_run_id: None,
            },
            messages: 12,
        },
        SessionRow {
            meta: SessionMeta {
                id: "aaaaaaaaaaaa".into(),
                created_at: "2026-03-01T09:00:00.000Z".into(),
                title: "Summarise my notes".into(),
                last_status: Some("cancelled".into()),
                ..SessionMeta::default()
            },
            messages: 3,
        },
    ]
}

#[test]
fn the_browser_opens_searches_and_resumes() {
    let mut a = app();
    assert_eq!(update(&mut a, ctrl('t')), vec![Effect::LoadSessions]);
    update(&mut a, Msg::Sessions(rows()));
    let s = screen(&mut a, 80, 24, Instant::now());
    assert!(
        s.contains("bbbbbbbbbbbb") && s.contains("Backtest SMA"),
        "{s}"
    );
    // Search moves the selection to the match.
    update(&mut a, key(KeyCode::Char('/')));
    type_text(&mut a, "notes");
    update(&mut a, key(KeyCode::Enter));
    assert_eq!(a.browser().unwrap().selected(), 1);
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::LoadDetail("aaaaaaaaaaaa".into())]
    );
    update(
        &mut a,
        Msg::Detail(Err(transcripts::DetailError::Missing(
            "aaaaaaaaaaaa".into(),
        ))),
    );
    let s = screen(&mut a, 80, 24, Instant::now());
    assert!(s.contains("does not exist"), "{s}");
    update(&mut a, key(KeyCode::Esc));
    assert_eq!(
        update(&mut a, key(KeyCode::Char('r'))),
        vec![Effect::OpenSession("aaaaaaaaaaaa".into())]
    );
    assert!(a.browser().is_none(), "resuming returns to the chat");
}

#[tokio::test]
async fn browsing_a_real_session_finds_archived_originals() {
    let home = tempfile::tempdir().unwrap();
    let paths = Paths::under(home.path());
    // A real session, written by the engine.
    let script = Script::from_json(
        &json!([
            {"text": "Reading.", "tool_calls": [{"id": "c1", "name": "list_dir", "arguments": {}}]},
            {"text": "All done."}
        ])
        .to_string(),
    )
    .unwrap();
    let deps = LoopDeps::new(
        Arc::new(ScriptedProvider::new(script)),
        Arc::new(default_registry()),
        LoopConfig {
            stall_timeout: None,
            ..LoopConfig::default()
        },
        paths.runs_dir(),
    );
    let mut session = Session::open(&paths, None, deps).unwrap();
    let (tx, _rx) = mpsc::unbounded_channel();
    session
        .send(
            "list my files",
            EventSink::new(tx),
            CancellationToken::new(),
        )
        .await;
    let id = session.id().to_string();
    drop(session);
    // A compaction archive in the documented format: one cleared tool
    // result (found by call id) and one collapsed message (by fingerprint).
    let tdir = paths.session_dir(&id).join("transcripts");
    std::fs::create_dir_all(&tdir).unwrap();
    let collapsed = "[collapsed: 3 turns about file listings]";
    let lines = [
        json!({"ts": "2026-03-01T09:00:00.000001Z", "run_id": "r1", "iter": 2, "layer": "microcompact",
               "tool_call_id": "c1", "fingerprint": transcripts::fingerprint(vibedesk::model::Role::Tool, "[cleared]"),
               "message": {"role": "tool", "tool_call_id": "c1", "name": "list_dir", "content": "ORIGINAL LISTING research-notes.md"}}),
        json!({"ts": "2026-03-01T09:00:00.000002Z", "run_id": "r1", "iter": 3, "layer": "collapse",
               "fingerprint": transcripts::fingerprint(vibedesk::model::Role::Assistant, collapsed),
               "message": {"role": "assistant", "content": "ORIGINAL LONG ANSWER"}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(tdir.join("archive.jsonl"), format!("{text}not json\n")).unwrap();
    let transcript = [
        json!({"role": "user", "content": "list my files"}),
        json!({"role": "tool", "tool_call_id": "c1", "name": "list_dir", "content": "[cleared]"}),
        json!({"role": "assistant", "content": collapsed}),
    ];
    let body: String = transcript.iter().map(|l| format!("{l}\n")).collect();
    let tname = "transcript_20260301T090000.000003_0.jsonl";
    std::fs::write(tdir.join(tname), body).unwrap();

    let listed = transcripts::sessions(&paths);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].meta.id, id);
    assert_eq!(listed[0].messages, 4, "user, assistant+call, tool, answer");
    let detail = transcripts::detail(&paths, &id).unwrap();
    assert_eq!(detail.archive.len(), 2);
    assert_eq!(detail.skipped, 1, "the garbage archive line is counted");
    assert!(detail.trace.iter().any(|r| r["type"] == "tool_call"));

    let mut a = app();
    update(&mut a, ctrl('t'));
    update(&mut a, Msg::Sessions(listed));
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::LoadDetail(id.clone())]
    );
    update(&mut a, Msg::Detail(Ok(detail)));
    // Messages tab: search within the view.
    update(&mut a, key(KeyCode::Char('/')));
    type_text(&mut a, "all done");
    update(&mut a, key(KeyCode::Enter));
    assert_eq!(a.browser().unwrap().selected(), 3);
    // Archive tab: the transcript first, then the originals.
    update(&mut a, key(KeyCode::Tab));
    update(&mut a, key(KeyCode::Tab));
    let s = screen(&mut a, 120, 30, Instant::now());
    assert!(s.contains(tname) && s.contains("ORIGINAL LISTING"), "{s}");
    let fx = update(&mut a, key(KeyCode::Enter));
    assert_eq!(fx, vec![Effect::LoadTranscript(tdir.join(tname))]);
    let (msgs, skipped) = transcripts::read_transcript(&tdir.join(tname)).unwrap();
    assert_eq!(skipped, 0);
    update(
        &mut a,
        Msg::Transcript {
            name: tname.into(),
            result: Ok(msgs),
        },
    );
    let s = screen(&mut a, 120, 30, Instant::now());
    let marked = s.lines().filter(|l| l.starts_with("\"⊕")).count();
    assert_eq!(marked, 2, "both compacted messages have originals: {s}");
    // The cleared tool result opens in full from the archive.
    update(&mut a, key(KeyCode::Down));
    update(&mut a, key(KeyCode::Enter));
    let s = screen(&mut a, 120, 30, Instant::now());
    assert!(
        s.contains("archived by microcompact") && s.contains("ORIGINAL LISTING research-notes.md"),
        "{s}"
    );
    update(&mut a, key(KeyCode::Esc));
    update(&mut a, key(KeyCode::Down));
    update(&mut a, key(KeyCode::Enter));
    let s = screen(&mut a, 120, 30, Instant::now());
    assert!(
        s.contains("archived by collapse") && s.contains("ORIGINAL LONG ANSWER"),
        "{s}"
    );
    // Back out and resume the session.
    update(&mut a, key(KeyCode::Esc));
    update(&mut a, key(KeyCode::Esc));
    assert_eq!(
        update(&mut a, key(KeyCode::Char('r'))),
        vec![Effect::OpenSession(id.clone())]
    );

    // Resuming rebuilds the chat from the stored messages.
    let read = vibedesk::store::MessageLog::read(&paths.session_dir(&id)).unwrap();
    update(
        &mut a,
        Msg::SessionOpened {
            id: Some(id.clone()),
            history: read.messages,
            skipped: 0,
        },
    );
    assert_eq!(a.session_id.as_deref(), Some(id.as_str()));
    let c = cells(&a);
    assert!(
        c.iter()
            .any(|c| matches!(c, CellKind::User { text } if text == "list my files"))
    );
    assert!(c.iter().any(|c| matches!(c, CellKind::Tool(t) if t.tool == "list_dir" && t.state == ToolCellState::Finished(ToolCallStatus::Ok))));
    assert!(
        c.iter()
            .any(|c| matches!(c, CellKind::Assistant { text, .. } if text == "All done."))
    );
    update(&mut a, key(KeyCode::Up));
    assert_eq!(
        a.composer.text(),
        "list my files",
        "history is seeded from the session"
    );
}

/// The default tools on a scripted provider, runs under `paths`.
fn scripted_deps(paths: &Paths, script: serde_json::Value, config: LoopConfig) -> LoopDeps {
    LoopDeps::new(
        crate::support::harness::scripted(script),
        Arc::new(default_registry()),
        config,
        paths.runs_dir(),
    )
}

/// Runs the real engine on a script and returns every event it emitted.
async fn engine_events(script: serde_json::Value, threshold: u64) -> Vec<AgentEvent> {
    let home = tempfile::tempdir().unwrap();
    let paths = Paths::under(home.path());
    let deps = scripted_deps(
        &paths,
        script,
        LoopConfig {
            stall_timeout: None,
            token_threshold: threshold,
            ..LoopConfig::default()
        },
    );
    let mut session = Session::open(&paths, None, deps).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    session
        .send(
            "write and list",
            EventSink::new(tx),
            CancellationToken::new(),
        )
        .await;
    drop(session);
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

/// What the chat shows of a tool call (issue 16 item 4), live and resumed:
/// the call's own words as written, secrets masked; the trace on disk keeps
/// the spec's redaction, which hides `content` too.
#[tokio::test]
async fn a_tool_cell_shows_the_calls_words_and_masks_its_secrets() {
    let home = tempfile::tempdir().unwrap();
    let paths = Paths::under(home.path());
    let token = format!("sk-{}", "Q".repeat(24));
    let script = json!([
        {"tool_calls": [{"id": "w", "name": "write_file", "arguments": {
            "path": "prefs.md",
            "content": format!("I prefer 10 bp fees; key {token}"),
            "api_key": "k-live-1",
            "password": "hunter2",
        }}]},
        {"text": "Noted."}
    ]);
    let deps = scripted_deps(
        &paths,
        script,
        LoopConfig {
            stall_timeout: None,
            ..LoopConfig::default()
        },
    );
    let mut session = Session::open(&paths, None, deps).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    session
        .send("note my fees", EventSink::new(tx), CancellationToken::new())
        .await;
    let (id, dir) = (session.id().to_string(), session.dir().to_path_buf());
    drop(session);
    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(e);
    }
    let expected = json!({
        "path": "prefs.md",
        "content": "I prefer 10 bp fees; key [redacted]",
        "api_key": "[redacted]",
        "password": "[redacted]",
    });
    let tool_args = |a: &vibedesk::tui::App| {
        cells(a)
            .into_iter()
            .find_map(|c| match c {
                CellKind::Tool(t) if t.tool == "write_file" => Some(t.args),
                _ => None,
            })
            .expect("a write_file cell")
    };

    // The cell, opened, shows its arguments in full.
    let shown = |a: &mut vibedesk::tui::App| {
        for c in a.chat.cells.iter_mut() {
            if matches!(c.kind(), CellKind::Tool(_)) {
                c.expanded = Some(true);
            }
        }
        let s = screen(a, 160, 40, Instant::now());
        assert!(s.contains("I prefer 10 bp fees; key [redacted]"), "{s}");
        for secret in [token.as_str(), "k-live-1", "hunter2"] {
            assert!(!s.contains(secret), "{secret} on screen: {s}");
        }
    };
    let mut live = app();
    feed(&mut live, &events, Instant::now());
    assert_eq!(tool_args(&live), expected);
    shown(&mut live);

    // Resumed from the message log (which keeps what the model sent).
    let read = vibedesk::store::MessageLog::read(&dir).unwrap();
    let mut resumed = app();
    update(
        &mut resumed,
        Msg::SessionOpened {
            id: Some(id),
            history: read.messages,
            skipped: 0,
        },
    );
    assert_eq!(tool_args(&resumed), expected);
    shown(&mut resumed);

    let trace = std::fs::read_to_string(dir.join("trace.jsonl")).unwrap();
    let call = trace
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|r| r["type"] == "tool_call")
        .unwrap();
    assert_eq!(call["args"]["content"], "[redacted]");
    assert_eq!(call["args"]["api_key"], "[redacted]");
    for secret in [token.as_str(), "k-live-1", "hunter2", "10 bp fees"] {
        assert!(!call.to_string().contains(secret), "{secret} in the trace");
    }
}

/// A notice that arrives while the browser covers the chat (e.g. a stale
/// run reconciled when the sessions load) is on the browser's bottom line
/// as well as in the chat.
#[test]
fn a_notice_while_browsing_is_on_the_bottom_line() {
    let mut a = app();
    update(&mut a, ctrl('t'));
    let text = "1 run(s) left running by an earlier crash were marked interrupted (first: run r1)";
    update(
        &mut a,
        Msg::Notice {
            kind: NoticeKind::Warning,
            text: text.into(),
        },
    );
    update(&mut a, Msg::Sessions(rows()));
    assert_eq!(a.browser().unwrap().message.as_deref(), Some(text));
    let s = screen(&mut a, 120, 24, Instant::now());
    assert!(s.contains("marked interrupted"), "{s}");
    assert_eq!(notices(&a, NoticeKind::Warning), [text]);
}

#[tokio::test]
async fn the_gauge_agrees_with_the_engine_at_every_moment() {
    let big = "x".repeat(6000);
    let events = engine_events(
        json!([
            {"text": "Writing.", "tool_calls": [{"id": "w", "name": "write_file", "arguments": {"path": "a.md", "content": big}}]},
            {"text": "Listing.", "tool_calls": [{"id": "l1", "name": "list_dir", "arguments": {}}, {"id": "l2", "name": "read_file", "arguments": {"path": "a.md"}}]},
            {"text": "Done."}
        ]),
        100_000,
    )
    .await;
    let marks: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Watermark { tokens, .. } => Some(*tokens),
            _ => None,
        })
        .collect();
    assert!(marks.len() >= 3, "one watermark per iteration: {marks:?}");
    let mut a = app();
    let t = Instant::now();
    let mut engine_tokens: Option<u64> = None;
    for e in &events {
        feed(&mut a, std::slice::from_ref(e), t);
        match e {
            AgentEvent::Watermark {
                tokens,
                threshold,
                gates,
                ..
            } => {
                engine_tokens = Some(*tokens);
                assert_eq!(a.gauge.threshold, *threshold);
                assert_eq!(a.gauge.gates, *gates);
            }
            AgentEvent::CompactionFinished { tokens_after, .. } => {
                engine_tokens = Some(*tokens_after)
            }
            _ => {}
        }
        assert_eq!(a.gauge.tokens, engine_tokens, "after {}", e.kind());
        if let Some(tokens) = engine_tokens {
            let s = screen(&mut a, 160, 48, t);
            let shown = vibedesk::tui::format::tokens(tokens);
            assert!(
                s.contains(&format!("{shown} / 100k tokens")),
                "gauge shows {shown}: {s}"
            );
        }
    }
    // The same run drove the tool panel and the chat.
    let batches = events
        .iter()
        .filter(|e| e.kind() == "tool_batch_started")
        .count();
    assert_eq!(a.tools.batches.len(), batches);
    assert!(
        a.tools
            .batches
            .iter()
            .flat_map(|b| &b.calls)
            .all(|c| c.state == CallState::Finished(ToolCallStatus::Ok))
    );
    assert!(matches!(
        cells(&a).last(),
        Some(CellKind::RunEnd {
            status: RunStatus::Success,
            ..
        })
    ));
}

#[test]
fn compactions_show_layer_tokens_and_a_short_history() {
    let mut a = app();
    let t = Instant::now();
    feed(&mut a, &[run_started(), watermark(1, 21_000)], t);
    assert_eq!(a.gauge.level(), 1, "past the L1 gate");
    feed(
        &mut a,
        &compaction(1, "microcompact", 21_000, 15_500, 6)[..1],
        t,
    );
    let s = screen(&mut a, 160, 48, t);
    assert!(s.contains("⟳ L1 microcompact running"), "{s}");
    feed(
        &mut a,
        &compaction(1, "microcompact", 21_000, 15_500, 6)[1..],
        t,
    );
    assert_eq!(a.gauge.tokens, Some(15_500));
    assert!(a.gauge.active.is_none());
    for (i, (layer, b, after)) in [
        ("collapse", 29_000, 21_000),
        ("auto_compact", 41_000, 9_000),
        ("microcompact", 22_000, 18_000),
    ]
    .iter()
    .enumerate()
    {
        feed(&mut a, &[watermark(2 + i as u64, *b)], t);
        feed(&mut a, &compaction(2 + i as u64, layer, *b, *after, 4), t);
    }
    assert_eq!(a.gauge.history.len(), 4);
    let s = screen(&mut a, 160, 48, t);
    assert!(
        s.contains("4 compactions · last L1 22k → 18k (-18%)"),
        "{s}"
    );
    assert!(s.contains("#3 L3 41k → 9k (-78%)"), "{s}");
    assert!(s.contains("#2 L2 29k → 21k (-28%)"), "{s}");
    assert!(!s.contains("#1 L1"), "only the last three are listed: {s}");
    // Narrow terminals get the same facts on one line.
    let n = screen(&mut a, 80, 24, t);
    assert!(n.contains("18k/40k 45% · 4× last L1 22k → 18k"), "{n}");
    // And the chat says when and how.
    let c = notices_or_compactions(&a);
    assert_eq!(c, 4);
}

fn notices_or_compactions(a: &vibedesk::tui::App) -> usize {
    cells(a)
        .iter()
        .filter(|c| matches!(c, CellKind::Compaction { .. }))
        .count()
}

#[test]
fn compact_command_reaches_the_session_request_handle() {
    let handle = vibedesk::agent::compaction::CompactionRequest::default();
    let text = vibedesk::tui::runtime::request_compaction(&handle, Some(" the AAPL part "));
    assert!(text.contains("the AAPL part"), "{text}");
    assert!(handle.is_pending());
    assert_eq!(handle.take().as_deref(), Some("the AAPL part"));
    assert!(!handle.is_pending(), "consumed once");
}

#[test]
fn every_shipped_theme_renders_and_themes_can_be_chosen_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let names = Theme::available(Some(dir.path()));
    assert_eq!(names, ["default", "light", "high-contrast"]);
    for n in names {
        let theme = Theme::load(&n, Some(dir.path())).unwrap();
        let mut a =
            vibedesk::tui::App::new(theme.clone(), Default::default(), AppOptions::default());
        let s = screen(&mut a, 80, 24, Instant::now());
        assert!(s.contains("Message"));
        assert_ne!(theme.error, theme.text, "{n}: errors stand out");
    }
    let light = Theme::builtin("light").unwrap();
    let default = Theme::builtin("default").unwrap();
    assert_ne!(
        light.warn, default.warn,
        "yellow text is unreadable on white"
    );
}

/// The scripted model for agent turns; summary requests (one message, no
/// tools) get a short structured summary, so L3 can run.
struct Summarising(Arc<ScriptedProvider>);

impl vibedesk::llm::Provider for Summarising {
    fn name(&self) -> &str {
        "scripted"
    }
    fn model(&self) -> &str {
        "scripted"
    }
    fn stream(
        &self,
        request: vibedesk::llm::ChatRequest,
    ) -> futures_util::future::BoxFuture<
        '_,
        Result<vibedesk::llm::ChunkStream, vibedesk::llm::LlmError>,
    > {
        use vibedesk::llm::StreamChunk;
        if request.tools.is_empty() && request.messages.len() == 1 {
            let chunks = vec![
                Ok(StreamChunk::Text(
                    "## Goal\nRead the files.\n## Progress\n### Done\nRead them.".into(),
                )),
                Ok(StreamChunk::Finish("stop".into())),
            ];
            return Box::pin(async move {
                Ok(Box::pin(futures_util::stream::iter(chunks)) as vibedesk::llm::ChunkStream)
            });
        }
        self.0.stream(request)
    }
}

#[tokio::test]
async fn the_gauge_agrees_with_the_engine_through_all_three_layers_and_the_archive_opens() {
    let home = tempfile::tempdir().unwrap();
    let paths = Paths::under(home.path());
    let deps_for = |provider: Arc<dyn vibedesk::llm::Provider>| {
        let mut cfg = LoopConfig {
            stall_timeout: None,
            token_threshold: 7_000,
            max_iterations: 20,
            ..LoopConfig::default()
        };
        cfg.compaction.estimator = "chars4".into();
        cfg.compaction.auto.tail_token_budget = 1_500;
        LoopDeps::new(
            provider,
            Arc::new(default_registry()),
            cfg,
            paths.runs_dir(),
        )
    };
    // Open once to create the workspace, then fill it with files to read.
    let id = Session::open(
        &paths,
        None,
        deps_for(Arc::new(Summarising(Arc::new(ScriptedProvider::new(
            Script::from_json("[]").unwrap(),
        ))))),
    )
    .unwrap()
    .id()
    .to_string();
    let ws = paths.session_dir(&id).join("workspace");
    let mut turns = Vec::new();
    for i in 0..14 {
        let body: String = (0..60)
            .map(|l| format!("file {i} line {l}: close 30.57 volume 1234567\n"))
            .collect();
        std::fs::write(ws.join(format!("f{i}.txt")), body).unwrap();
        turns.push(json!({
            "text": format!("Reading file {i}. ") + &"Considering the price history and its quirks. ".repeat(60),
            "tool_calls": [{"id": format!("r{i}"), "name": "read_file", "arguments": {"path": format!("f{i}.txt")}}]
        }));
    }
    turns.push(json!({"text": "All files read."}));
    let provider = Arc::new(Summarising(Arc::new(ScriptedProvider::new(
        Script::from_json(&serde_json::Value::Array(turns).to_string()).unwrap(),
    ))));
    let mut session = Session::open(&paths, Some(&id), deps_for(provider)).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let outcome = session
        .send(
            "read every file",
            EventSink::new(tx),
            CancellationToken::new(),
        )
        .await;
    drop(session);
    assert_eq!(outcome.status, RunStatus::Success, "{}", outcome.reason);
    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(e);
    }

    let mut a = app();
    let t = Instant::now();
    let mut engine: Option<u64> = None;
    for e in &events {
        feed(&mut a, std::slice::from_ref(e), t);
        match e {
            AgentEvent::Watermark { tokens, .. } => engine = Some(*tokens),
            AgentEvent::CompactionFinished { tokens_after, .. } => engine = Some(*tokens_after),
            AgentEvent::CompactionStarted { layer, .. } => {
                assert_eq!(
                    a.gauge.active.as_ref().map(|x| x.layer.as_str()),
                    Some(layer.as_str())
                );
            }
            _ => {}
        }
        assert_eq!(a.gauge.tokens, engine, "after {}", e.kind());
    }
    let fired: Vec<&str> = a.gauge.history.iter().map(|c| c.layer.as_str()).collect();
    for layer in ["microcompact", "collapse", "auto_compact"] {
        assert!(fired.contains(&layer), "{layer} fired: {fired:?}");
    }
    let finished = events
        .iter()
        .filter(|e| e.kind() == "compaction_finished")
        .count();
    assert_eq!(a.gauge.history.len(), finished);
    let last = a.gauge.history.last().unwrap().clone();
    let s = screen(&mut a, 160, 48, t);
    let headline = format!(
        "{} compactions · last {} {} → {}",
        finished,
        vibedesk::tui::cells::layer_label(&last.layer),
        vibedesk::tui::format::tokens(last.tokens_before),
        vibedesk::tui::format::tokens(last.tokens_after)
    );
    assert!(s.contains(&headline), "{headline}\n{s}");

    // The engine's archive and transcripts open in the browser, and every
    // compacted message in a transcript resolves to its original.
    let detail = transcripts::detail(&paths, &id).unwrap();
    assert!(!detail.archive.is_empty(), "the engine archived originals");
    assert!(!detail.transcripts.is_empty(), "L3 wrote a transcript");
    assert_eq!(detail.skipped, 0);
    let mut compacted = 0;
    for tf in &detail.transcripts {
        let (msgs, skipped) = transcripts::read_transcript(&tf.path).unwrap();
        assert_eq!(skipped, 0);
        for m in msgs.iter().filter(|m| transcripts::looks_compacted(m)) {
            compacted += 1;
            let original = transcripts::find_original(&detail.archive, m)
                .unwrap_or_else(|| panic!("no original for {:?}", m.content));
            assert!(
                original.message.content.len() > m.content.len(),
                "the original is the longer text"
            );
        }
    }
    assert!(
        compacted > 0,
        "the transcript holds cleared or collapsed messages"
    );
}

#[test]
fn a_message_sent_while_a_session_opens_waits_for_it() {
    let mut a = app();
    update(&mut a, ctrl('t'));
    update(&mut a, Msg::Sessions(rows()));
    assert_eq!(
        update(&mut a, key(KeyCode::Char('r'))),
        vec![Effect::OpenSession("bbbbbbbbbbbb".into())]
    );
    type_text(&mut a, "and now the drawdowns");
    assert!(
        update(&mut a, key(KeyCode::Enter)).is_empty(),
        "waits for the session"
    );
    let history = vec![vibedesk::store::StoredMessage::now(
        vibedesk::model::Message::user("earlier question"),
    )];
    let fx = update(
        &mut a,
        Msg::SessionOpened {
            id: Some("bbbbbbbbbbbb".into()),
            history,
            skipped: 0,
        },
    );
    assert_eq!(
        fx,
        vec![Effect::Send {
            prompt: "and now the drawdowns".into(),
            plan: Default::default()
        }]
    );
    let users: Vec<String> = cells(&a)
        .into_iter()
        .filter_map(|c| match c {
            CellKind::User { text } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(
        users,
        ["earlier question", "and now the drawdowns"],
        "history first, then the new turn"
    );
    // A session that fails to open releases what waited too.
    let mut b = app();
    update(&mut b, ctrl('t'));
    update(&mut b, Msg::Sessions(rows()));
    update(&mut b, key(KeyCode::Char('r')));
    type_text(&mut b, "hello");
    update(&mut b, key(KeyCode::Enter));
    let fx = update(
        &mut b,
        Msg::SessionFailed("session bbbbbbbbbbbb is open in another vibedesk process".into()),
    );
    assert_eq!(
        fx,
        vec![Effect::Send {
            prompt: "hello".into(),
            plan: Default::default()
        }]
    );
    assert!(notices(&b, NoticeKind::Error)[0].contains("another vibedesk process"));
}

#[test]
fn an_oversized_send_or_paste_is_refused_and_the_text_is_kept() {
    let mut a = app_with(AppOptions {
        max_message_bytes: 1024,
        sessions_dir: "/data/sessions".into(),
        ..AppOptions::default()
    });
    a.session_id = Some("s1".into());
    // A paste that would go over the limit is not inserted.
    update(&mut a, Msg::Paste("p".repeat(600)));
    assert_eq!(a.composer.text().len(), 600);
    assert!(update(&mut a, Msg::Paste("q".repeat(600))).is_empty());
    assert_eq!(a.composer.text(), "p".repeat(600), "the input is unchanged");
    let errs = notices(&a, NoticeKind::Error);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].starts_with("paste not inserted"), "{}", errs[0]);
    assert!(errs[0].contains("1.0 KiB (1024 bytes)"), "{}", errs[0]);
    assert!(
        errs[0].contains("/data/sessions/s1/workspace"),
        "{}",
        errs[0]
    );

    // Typed past the limit: Enter sends nothing and the text stays.
    type_text(&mut a, &"t".repeat(500));
    let typed = a.composer.text();
    assert_eq!(typed.len(), 1100);
    assert!(
        update(&mut a, key(KeyCode::Enter)).is_empty(),
        "nothing runs"
    );
    assert!(!a.busy());
    assert_eq!(a.composer.text(), typed, "the text stays in the input");
    let errs = notices(&a, NoticeKind::Error);
    assert_eq!(errs.len(), 2);
    assert!(errs[1].starts_with("not sent"), "{}", errs[1]);
    assert!(errs[1].contains("(1100 bytes)"), "{}", errs[1]);
    assert!(!cells(&a).iter().any(|c| matches!(c, CellKind::User { .. })));

    // Exactly at the limit it is sent.
    let mut b = app_with(AppOptions {
        max_message_bytes: 1024,
        ..AppOptions::default()
    });
    let at_limit = "x".repeat(1024);
    update(&mut b, Msg::Paste(at_limit.clone()));
    assert_eq!(
        update(&mut b, key(KeyCode::Enter)),
        vec![Effect::Send {
            prompt: at_limit,
            plan: Default::default()
        }]
    );
}

#[tokio::test]
async fn a_resumed_session_refuses_an_oversized_message_without_writing() {
    let home = tempfile::tempdir().unwrap();
    let paths = Paths::under(home.path());
    let deps = || {
        LoopDeps::new(
            Arc::new(ScriptedProvider::new(
                Script::from_json(&json!([{"text": "ok"}]).to_string()).unwrap(),
            )),
            Arc::new(default_registry()),
            LoopConfig {
                stall_timeout: None,
                max_message_bytes: 2048,
                ..LoopConfig::default()
            },
            paths.runs_dir(),
        )
    };
    let mut session = Session::open(&paths, None, deps()).unwrap();
    let first = session
        .send("hello", EventSink::none(), CancellationToken::new())
        .await;
    assert_eq!(first.status, RunStatus::Success, "{}", first.reason);
    let id = session.id().to_string();
    drop(session);
    let sdir = paths.session_dir(&id);
    // The lock file comes and goes with the open session.
    let files = |d: &std::path::Path| -> Vec<(std::path::PathBuf, u64)> {
        crate::support::harness::files_under(d)
            .into_iter()
            .filter(|(p, _)| p.file_name().is_some_and(|n| n != ".lock"))
            .collect()
    };
    let before = (files(&sdir), files(&paths.runs_dir()));

    let mut resumed = Session::open(&paths, Some(&id), deps()).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let o = resumed
        .send(
            &"y".repeat(2049),
            EventSink::new(tx),
            CancellationToken::new(),
        )
        .await;
    assert_eq!(o.status, RunStatus::Failed);
    assert_eq!(o.error_code.as_deref(), Some("message_too_large"));
    assert!(o.reason.contains("(2049 bytes)"), "{}", o.reason);
    assert!(
        o.reason
            .contains(&sdir.join("workspace").display().to_string()),
        "{}",
        o.reason
    );
    assert!(o.run_id.is_empty(), "no run was made");
    let ev = rx.try_recv().unwrap();
    assert!(
        matches!(ev, AgentEvent::RunFinished { .. }),
        "the refusal is announced: {ev:?}"
    );
    drop(resumed);
    assert_eq!(
        (files(&sdir), files(&paths.runs_dir())),
        before,
        "nothing was written"
    );
}

/// Figures no tool result holds are shown under the answer as unverified
/// (docs §1.6), in the chat and on the screen.
#[test]
fn unverified_figures_show_under_the_answer() {
    let mut a = app();
    let t = Instant::now();
    feed(
        &mut a,
        &[
            AgentEvent::Answer {
                iter: 2,
                content: "AAPL's RSI(14) on 2008-01-25 was 13.31.".into(),
                degraded: false,
            },
            AgentEvent::UnverifiedNumbers {
                iter: 2,
                numbers: vec!["13.31".into()],
                figures: 2,
            },
        ],
        t,
    );
    let warned = notices(&a, NoticeKind::Warning);
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(
        warned[0].contains("unverified: 1 of the answer's 2 figure(s)")
            && warned[0].ends_with("13.31"),
        "{}",
        warned[0]
    );
    let kinds = cells(&a);
    let answer = kinds
        .iter()
        .position(|c| matches!(c, CellKind::Assistant { .. }))
        .unwrap();
    let notice = kinds
        .iter()
        .rposition(|c| matches!(c, CellKind::Notice { .. }))
        .unwrap();
    assert!(answer < notice, "the warning follows the answer");
    let s = screen(&mut a, 120, 24, t);
    assert!(s.contains("unverified"), "{s}");
}

/// Plan mode (docs §4.8): `/plan TEXT` sends a planning turn, its answer
/// waits for `/go`, which runs it with the plan pinned and leaves plan mode.
#[test]
fn plan_then_go_runs_the_plan_pinned() {
    use vibedesk::agent::plan::{EXECUTE_PROMPT, TurnPlan};
    let mut a = app();
    type_text(&mut a, "/plan study prices.csv");
    let fx = update(&mut a, key(KeyCode::Enter));
    assert_eq!(
        fx,
        vec![Effect::Send {
            prompt: "study prices.csv".into(),
            plan: TurnPlan::Draft
        }]
    );
    let plan = "1. Read prices.csv.\n2. Backtest.";
    feed(
        &mut a,
        &[
            run_started(),
            AgentEvent::Answer {
                iter: 1,
                content: plan.into(),
                degraded: false,
            },
            run_finished(RunStatus::Success, "final answer delivered"),
        ],
        Instant::now(),
    );
    update(&mut a, Msg::TurnDone { error: None });
    assert!(
        notices(&a, NoticeKind::Info)
            .iter()
            .any(|n| n.starts_with("plan ready: /go runs it")),
        "{:?}",
        notices(&a, NoticeKind::Info)
    );
    // A message while planning is another planning turn.
    assert!(a.plan.on && a.plan.ready.as_deref() == Some(plan));
    type_text(&mut a, "/go");
    let fx = update(&mut a, key(KeyCode::Enter));
    assert_eq!(
        fx,
        vec![Effect::Send {
            prompt: EXECUTE_PROMPT.into(),
            plan: TurnPlan::Execute(plan.into())
        }]
    );
    assert!(!a.plan.on && a.plan.ready.is_none());
    update(&mut a, Msg::TurnDone { error: None });
    // Nothing left to run; the next message is a normal turn.
    type_text(&mut a, "/go");
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    assert!(
        notices(&a, NoticeKind::Warning)
            .iter()
            .any(|n| n.starts_with("no plan to run"))
    );
    type_text(&mut a, "thanks");
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::Send {
            prompt: "thanks".into(),
            plan: TurnPlan::Off
        }]
    );
}
