//! The overlay stack's one dispatch rule (the top layer first, an
//! unhandled event falls through, the chat screen last) for keys, the mouse
//! wheel and pastes; the search line's own keymap context; and the run
//! phase, which only `update` moves.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};
use tokio::time::Instant;
use vibedesk::agent::events::RunStatus;
use vibedesk::session::SessionMeta;
use vibedesk::tui::app::{AppOptions, Effect, Msg, Phase, update};
use vibedesk::tui::browser::Browser;
use vibedesk::tui::help::{self, Help};
use vibedesk::tui::keymap::{Action, Context, Keymap};
use vibedesk::tui::overlay::{Handled, Input, Overlay, OverlayEffect};
use vibedesk::tui::settings::TuiSettings;
use vibedesk::tui::theme::Theme;
use vibedesk::tui::transcripts::SessionRow;
use vibedesk::tui::wrap::line_text;

use super::*;

/// Ten sessions, `s0`…`s9`, listed newest first.
fn sessions() -> Vec<SessionRow> {
    (0..10)
        .map(|i| SessionRow {
            meta: SessionMeta {
                id: format!("s{i}"),
                created_at: "2026-03-01T09:00:00.000Z".into(),
                title: format!("session number {i}"),
                ..SessionMeta::default()
            },
            messages: 1,
        })
        .collect()
}

/// The browser with ten sessions, and the help page opened over it.
fn help_over_browser() -> App {
    let mut a = app();
    update(&mut a, ctrl('t'));
    update(&mut a, Msg::Sessions(sessions()));
    update(&mut a, key(KeyCode::F(1)));
    assert!(matches!(a.overlays.top(), Some(Overlay::Help(_))));
    assert_eq!(a.overlays.len(), 2);
    a
}

fn wheel(up: bool) -> Msg {
    Msg::Mouse(MouseEvent {
        kind: if up {
            MouseEventKind::ScrollUp
        } else {
            MouseEventKind::ScrollDown
        },
        column: 3,
        row: 3,
        modifiers: KeyModifiers::NONE,
    })
}

#[test]
fn a_layer_says_handled_or_passes_the_event_on_with_its_effects() {
    let k = KeyEvent::new(KeyCode::Char('x'), KeyModifiers::NONE);
    let at = |action| Input::Key {
        action: Some(action),
        key: &k,
    };
    let mut h = Overlay::Help(Help::default());
    let down = h.handle(at(Action::Down));
    assert_eq!(down.handled, Handled::Yes);
    assert!(matches!(&h, Overlay::Help(Help { scroll: 1 })));
    assert_eq!(h.handle(at(Action::Back)).effects, [OverlayEffect::Close]);
    assert_eq!(
        h.handle(at(Action::Transcripts)).effects,
        [OverlayEffect::OpenBrowser]
    );
    for passed in [Action::Interrupt, Action::Quit, Action::Redraw] {
        let o = h.handle(at(passed));
        assert_eq!(o.handled, Handled::No, "{passed:?}");
        assert!(o.effects.is_empty());
    }
    assert_eq!(h.handle(Input::Paste("p")).handled, Handled::No);

    let mut b = Overlay::Browser(Box::new(Browser::new(
        chrono::Offset::fix(&chrono::Utc),
        None,
    )));
    assert_eq!(
        b.handle(at(Action::Transcripts)).effects,
        [OverlayEffect::Close]
    );
    assert_eq!(b.handle(at(Action::Help)).handled, Handled::No);
    assert_eq!(b.handle(Input::Paste("p")).handled, Handled::Yes);
    assert_eq!(b.contexts(), [Context::List, Context::Global]);
    b.handle(at(Action::Search));
    assert_eq!(b.contexts(), [Context::Search]);
    // While the search line is open even the global keys stay in it.
    assert_eq!(b.handle(at(Action::Quit)).handled, Handled::Yes);
}

#[test]
fn a_key_goes_to_the_top_overlay_and_only_it_when_handled() {
    let mut a = help_over_browser();
    update(&mut a, key(KeyCode::Down));
    assert_eq!(a.help().unwrap().scroll, 1, "the help page took Down");
    assert_eq!(a.browser().unwrap().selected(), 0, "the browser did not");
    // Esc closes the help page only: the browser is there again.
    update(&mut a, key(KeyCode::Esc));
    assert!(a.help().is_none());
    assert!(matches!(a.overlays.top(), Some(Overlay::Browser(_))));
    update(&mut a, key(KeyCode::Down));
    assert_eq!(a.browser().unwrap().selected(), 1);
    // Ctrl-T from the help page opens a fresh browser alone.
    update(&mut a, key(KeyCode::F(1)));
    assert_eq!(update(&mut a, ctrl('t')), vec![Effect::LoadSessions]);
    assert_eq!(a.overlays.len(), 1);
    assert_eq!(a.browser().unwrap().selected(), 0);
    assert!(a.browser().unwrap().sessions.is_none(), "a fresh browser");
}

#[test]
fn an_unhandled_key_falls_through_to_the_chat_screen() {
    let mut a = help_over_browser();
    // Neither layer takes Ctrl-C: the chat screen arms quitting, the layers stay.
    assert!(update(&mut a, ctrl('c')).is_empty());
    assert!(a.quit_armed);
    assert_eq!(a.overlays.len(), 2);
    assert_eq!(update(&mut a, ctrl('l')), vec![Effect::ClearTerminal]);
    assert_eq!(a.overlays.len(), 2);
    // Keys bound to nothing stop at the top layer: nothing is typed below.
    type_text(&mut a, "zz");
    assert!(a.composer.is_empty());
    assert_eq!(update(&mut a, ctrl('q')), vec![Effect::Quit]);
    assert!(a.should_quit);
}

#[test]
fn the_wheel_follows_the_same_rule() {
    let mut a = help_over_browser();
    update(&mut a, wheel(false));
    assert_eq!(a.help().unwrap().scroll, 3);
    assert_eq!(a.browser().unwrap().selected(), 0);
    update(&mut a, key(KeyCode::Esc));
    update(&mut a, wheel(false));
    assert_eq!(a.browser().unwrap().selected(), 3, "one notch, three rows");
    update(&mut a, wheel(true));
    assert_eq!(a.browser().unwrap().selected(), 0);
}

#[test]
fn a_paste_follows_the_same_rule() {
    // Over the browser the help page passes the paste to the browser, which
    // takes it (its search line is closed, so it is dropped).
    let mut a = help_over_browser();
    update(&mut a, Msg::Paste("pasted".into()));
    assert_eq!(a.overlays.len(), 2);
    assert!(a.composer.is_empty());
    // Into the open search line: its first line only.
    update(&mut a, key(KeyCode::Esc));
    update(&mut a, key(KeyCode::Char('/')));
    update(&mut a, Msg::Paste("number 7\nsecond".into()));
    assert_eq!(a.browser().unwrap().search.query, "number 7");
    assert!(a.composer.is_empty());
    // The help page alone passes it to the chat screen, which takes it.
    let mut b = app();
    update(&mut b, key(KeyCode::F(1)));
    update(&mut b, Msg::Paste("pasted".into()));
    assert!(b.overlays.is_empty());
    assert_eq!(b.composer.text(), "pasted");
}

#[test]
fn the_search_line_has_its_own_keymap_context() {
    let mut a = app();
    update(&mut a, ctrl('t'));
    update(&mut a, Msg::Sessions(sessions()));
    update(&mut a, key(KeyCode::Char('/')));
    // Keys bound elsewhere type into the query (q is Back in the list).
    type_text(&mut a, "number 7q");
    assert_eq!(a.browser().unwrap().search.query, "number 7q");
    update(&mut a, key(KeyCode::Backspace));
    assert_eq!(a.browser().unwrap().search.query, "number 7");
    // Global keys wait: Ctrl-T neither closes the browser nor types.
    assert!(update(&mut a, ctrl('t')).is_empty());
    assert_eq!(a.browser().unwrap().search.query, "number 7");
    update(&mut a, key(KeyCode::Enter));
    let b = a.browser().unwrap();
    assert!(!b.search.editing);
    assert_eq!(b.selected(), 7, "the row of s7");
    // Ctrl-C closes the line and clears the query instead of interrupting.
    update(&mut a, key(KeyCode::Char('/')));
    type_text(&mut a, "abc");
    assert!(update(&mut a, ctrl('c')).is_empty());
    let b = a.browser().unwrap();
    assert!(!b.search.editing && b.search.query.is_empty());
    assert!(!a.quit_armed);

    // Help lists the context, and config rebinds its keys.
    let listed: Vec<String> = help::lines(&Keymap::default(), &Theme::default(), 160)
        .iter()
        .map(line_text)
        .collect();
    let at = listed
        .iter()
        .position(|l| l.starts_with(Context::Search.title()))
        .expect("the search context is listed");
    assert!(listed[at..].iter().any(|l| l.contains("[search_confirm]")));
    assert!(listed[at..].iter().any(|l| l.contains("[search_cancel]")));
    assert!(listed[at..].iter().any(|l| l.contains("[search_delete]")));
    let settings =
        TuiSettings::from_toml("[tui.keys]\nsearch_cancel = \"f5\"\n", "config.toml").unwrap();
    let mut c = vibedesk::tui::App::new(
        Theme::default(),
        settings.keymap().unwrap(),
        AppOptions::default(),
    );
    update(&mut c, ctrl('t'));
    update(&mut c, Msg::Sessions(sessions()));
    update(&mut c, key(KeyCode::Char('/')));
    type_text(&mut c, "abc");
    update(&mut c, key(KeyCode::Esc));
    assert!(
        c.browser().unwrap().search.editing,
        "Esc is no longer bound to cancel"
    );
    update(&mut c, key(KeyCode::F(5)));
    let b = c.browser().unwrap();
    assert!(!b.search.editing && b.search.query.is_empty());
}

#[test]
fn the_run_phase_moves_through_a_turn_and_a_cancel() {
    let mut a = app();
    assert_eq!(a.phase(), Phase::Idle);
    type_text(&mut a, "go");
    update(&mut a, key(KeyCode::Enter));
    assert_eq!(a.phase(), Phase::Running { started_at: None });
    let t = Instant::now();
    feed(&mut a, &[run_started()], t);
    assert_eq!(
        a.phase(),
        Phase::Running {
            started_at: Some(t)
        }
    );
    assert_eq!(update(&mut a, key(KeyCode::Esc)), vec![Effect::Cancel]);
    assert_eq!(
        a.phase(),
        Phase::Cancelling {
            started_at: Some(t)
        }
    );
    assert!(a.busy() && a.cancelling());
    feed(
        &mut a,
        &[run_finished(RunStatus::Cancelled, "cancelled by the user")],
        t,
    );
    assert_eq!(a.phase(), Phase::Running { started_at: None });
    update(&mut a, Msg::TurnDone { error: None });
    assert_eq!(a.phase(), Phase::Idle);
    assert!(!a.busy());

    // A run that ends on its own keeps running until the worker is free.
    type_text(&mut a, "again");
    update(&mut a, key(KeyCode::Enter));
    feed(&mut a, &[run_started()], t);
    feed(&mut a, &[run_finished(RunStatus::Success, "done")], t);
    assert_eq!(a.phase(), Phase::Running { started_at: None });
    update(&mut a, Msg::TurnDone { error: None });
    assert_eq!(a.phase(), Phase::Idle);
}

#[test]
fn opening_a_session_is_a_phase_and_messages_wait_for_it() {
    let mut a = app();
    // `--session ID` at start arrives as a message, like everything else.
    assert_eq!(
        update(&mut a, Msg::OpenSession("5bc29f7ddcd5".into())),
        vec![Effect::OpenSession("5bc29f7ddcd5".into())]
    );
    assert_eq!(a.phase(), Phase::Opening);
    assert!(!a.busy());
    type_text(&mut a, "waits");
    assert!(update(&mut a, key(KeyCode::Enter)).is_empty());
    assert_eq!(a.queued, ["waits"]);
    let fx = update(
        &mut a,
        Msg::SessionOpened {
            id: Some("5bc29f7ddcd5".into()),
            history: Vec::new(),
            skipped: 0,
        },
    );
    assert_eq!(
        fx,
        vec![Effect::Send {
            prompt: "waits".into(),
            plan: Default::default()
        }]
    );
    assert_eq!(a.phase(), Phase::Running { started_at: None });
    update(&mut a, Msg::TurnDone { error: None });

    // `/new` opens too; a failed switch still frees the input.
    type_text(&mut a, "/new");
    assert_eq!(
        update(&mut a, key(KeyCode::Enter)),
        vec![Effect::NewSession]
    );
    assert_eq!(a.phase(), Phase::Opening);
    update(&mut a, Msg::SessionFailed("locked".into()));
    assert_eq!(a.phase(), Phase::Idle);
}

#[test]
fn the_search_line_takes_enter_and_backspace_with_modifiers_as_before() {
    let mut a = app();
    update(&mut a, ctrl('t'));
    update(&mut a, Msg::Sessions(sessions()));
    update(&mut a, key(KeyCode::Char('/')));
    type_text(&mut a, "number 44");
    for m in [KeyModifiers::ALT, KeyModifiers::CONTROL] {
        update(&mut a, Msg::Key(KeyEvent::new(KeyCode::Backspace, m)));
    }
    assert_eq!(a.browser().unwrap().search.query, "number ");
    type_text(&mut a, "4");
    update(&mut a, alt(KeyCode::Enter));
    let b = a.browser().unwrap();
    assert!(!b.search.editing, "Alt-Enter closes the line as Enter does");
    assert_eq!(b.selected(), 4);
}
