//! The layers over the chat screen (the help page, the transcript browser,
//! the team view) as a stack, and the one rule that decides who gets an input event: the
//! top layer first; a layer that does not handle it passes it on to the one
//! below, and the chat screen gets what no overlay handled. A layer answers
//! [`Handled`] and the effects it asks of the app ([`OverlayEffect`]); it
//! never changes the app itself, so [`super::app::update`] applies every
//! change.
//!
//! Keys arrive already resolved to an [`Action`] in the keymap contexts of
//! the top layer ([`Overlay::contexts`]), so no layer matches key codes.

use crossterm::event::KeyEvent;

use super::browser::{Browser, BrowserEffect};
use super::factor_view::FactorView;
use super::help::Help;
use super::keymap::{Action, Context, typed_char};
use super::tearsheet::{SheetEffect, TearSheetView};

/// Lines (or rows) a mouse-wheel notch scrolls.
pub(crate) const WHEEL_LINES: usize = 3;

/// One layer over the chat screen.
#[derive(Clone, Debug)]
pub enum Overlay {
    Help(Help),
    Browser(Box<Browser>),
    /// The research team's view. Its state (the run, the cursor, the open
    /// worker) lives in the app's board, which folds events whether or not
    /// the view is shown; the layer only routes keys to it.
    Swarm,
    /// A tool call waiting for the user's approval (docs §2.14.4).
    Approval(Box<super::approval_view::ApprovalView>),
    /// The monitors (docs §21.5).
    Monitors(Box<super::monitors::MonitorsView>),
    /// One result's tear sheet (docs §20.2).
    TearSheet(Box<TearSheetView>),
    /// A factor screen's results (docs §17.12).
    Factors(Box<FactorView>),
}

/// An input event on its way down the stack.
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// A key, with the action it is bound to in the top layer's contexts.
    Key {
        action: Option<Action>,
        key: &'a KeyEvent,
    },
    /// A mouse-wheel notch.
    Wheel {
        up: bool,
    },
    Paste(&'a str),
}

/// Whether a layer took an event or passes it to the layer below.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handled {
    Yes,
    No,
}

/// What a layer asks the app to do.
#[derive(Clone, Debug, PartialEq)]
pub enum OverlayEffect {
    /// Close this layer.
    Close,
    /// Replace every layer with a fresh transcript browser.
    OpenBrowser,
    /// What the browser asked for (its own closing arrives as `Close`).
    Browser(BrowserEffect),
    /// An action for the team view, applied by the app to its board.
    Swarm(Action),
    /// The user's answer to the approval overlay (which closes).
    Approval(crate::tools::approval::Answer),
    /// What the Monitors view asked for.
    Monitors(super::monitors::MonitorsEffect),
    /// What the tear-sheet view asked for.
    TearSheet(SheetEffect),
}

/// A layer's answer to one event.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub handled: Handled,
    pub effects: Vec<OverlayEffect>,
}

impl Outcome {
    fn handled(effects: Vec<OverlayEffect>) -> Self {
        Outcome {
            handled: Handled::Yes,
            effects,
        }
    }

    fn passed() -> Self {
        Outcome {
            handled: Handled::No,
            effects: Vec::new(),
        }
    }
}

impl Overlay {
    /// The keymap contexts a key is looked up in while this layer is on top,
    /// most specific first.
    pub fn contexts(&self) -> &'static [Context] {
        match self {
            // The search line takes every key: the browser's and the global
            // bindings wait until it closes.
            Overlay::Browser(b) if b.search.editing => &[Context::Search],
            Overlay::TearSheet(_) => &[Context::TearSheet, Context::List, Context::Global],
            Overlay::Factors(_) => &[Context::Factors, Context::List, Context::Global],
            _ => &[Context::List, Context::Global],
        }
    }

    /// This layer's answer to `input`.
    pub fn handle(&mut self, input: Input<'_>) -> Outcome {
        match self {
            Overlay::Help(h) => help_input(h, input),
            Overlay::Browser(b) => browser_input(b, input),
            Overlay::Swarm => swarm_input(input),
            Overlay::Approval(v) => approval_input(v, input),
            Overlay::Monitors(v) => monitors_input(v, input),
            Overlay::TearSheet(v) => tear_sheet_input(v, input),
            Overlay::Factors(v) => factors_input(v, input),
        }
    }
}

/// The factor view takes its tabs and the list keys; Back closes it; the
/// global keys and pastes pass through.
fn factors_input(view: &mut FactorView, input: Input<'_>) -> Outcome {
    let action = match input {
        Input::Key { action, .. } => action,
        Input::Wheel { up } => Some(if up { Action::Up } else { Action::Down }),
        Input::Paste(_) => return Outcome::passed(),
    };
    match action {
        Some(
            Action::Interrupt
            | Action::Quit
            | Action::Redraw
            | Action::Help
            | Action::SwarmView
            | Action::Transcripts,
        ) => Outcome::passed(),
        Some(Action::Back) => Outcome::handled(vec![OverlayEffect::Close]),
        Some(a) => {
            view.handle(a);
            Outcome::handled(vec![])
        }
        None => Outcome::handled(vec![]),
    }
}

/// The tear sheet takes its tabs, scrolling and the report key; Back
/// closes it; quitting, interrupting, redrawing, help, the browser, the
/// team view and pastes pass through.
fn tear_sheet_input(view: &mut TearSheetView, input: Input<'_>) -> Outcome {
    let action = match input {
        Input::Key { action, .. } => action,
        Input::Wheel { up } => {
            for _ in 0..WHEEL_LINES {
                view.handle(if up { Action::Up } else { Action::Down });
            }
            return Outcome::handled(vec![]);
        }
        Input::Paste(_) => return Outcome::passed(),
    };
    view.message = None;
    match action {
        Some(
            Action::Interrupt
            | Action::Quit
            | Action::Redraw
            | Action::Help
            | Action::SwarmView
            | Action::Transcripts,
        ) => Outcome::passed(),
        Some(Action::Back) => Outcome::handled(vec![OverlayEffect::Close]),
        Some(a) => Outcome::handled(
            view.handle(a)
                .into_iter()
                .map(OverlayEffect::TearSheet)
                .collect(),
        ),
        None => Outcome::handled(vec![]),
    }
}

/// The approval overlay takes every key but Ctrl-C (and a paste, dropped:
/// nothing is answered by accident).
fn approval_input(view: &mut super::approval_view::ApprovalView, input: Input<'_>) -> Outcome {
    use super::approval_view::ApprovalKey;
    let Input::Key { key, .. } = input else {
        return Outcome::handled(vec![]);
    };
    match view.key(key) {
        ApprovalKey::Answered(a) => {
            Outcome::handled(vec![OverlayEffect::Approval(a), OverlayEffect::Close])
        }
        ApprovalKey::Taken => Outcome::handled(vec![]),
        ApprovalKey::Passed => Outcome::passed(),
    }
}

/// The Monitors view takes its list keys; the global ones pass through.
fn monitors_input(view: &mut super::monitors::MonitorsView, input: Input<'_>) -> Outcome {
    use super::monitors::MonitorsEffect;
    let action = match input {
        Input::Key { action, .. } => action,
        Input::Wheel { up } => Some(if up { Action::Up } else { Action::Down }),
        Input::Paste(_) => return Outcome::passed(),
    };
    match action {
        Some(
            Action::Interrupt
            | Action::Quit
            | Action::Redraw
            | Action::Help
            | Action::SwarmView
            | Action::Transcripts,
        ) => Outcome::passed(),
        Some(a) => Outcome::handled(
            view.handle(a)
                .into_iter()
                .map(|e| match e {
                    MonitorsEffect::Close => OverlayEffect::Close,
                    other => OverlayEffect::Monitors(other),
                })
                .collect(),
        ),
        None => Outcome::handled(vec![]),
    }
}

/// The help page scrolls and closes; quitting, interrupting and redrawing
/// pass through to the chat screen; a paste passes through too (the chat
/// screen closes the page to take it).
fn help_input(help: &mut Help, input: Input<'_>) -> Outcome {
    let action = match input {
        Input::Key { action, .. } => action,
        Input::Wheel { up } => {
            help.scroll = if up {
                help.scroll.saturating_sub(WHEEL_LINES)
            } else {
                help.scroll + WHEEL_LINES
            };
            return Outcome::handled(vec![]);
        }
        Input::Paste(_) => return Outcome::passed(),
    };
    match action {
        Some(Action::Up) => help.scroll = help.scroll.saturating_sub(1),
        Some(Action::Down) => help.scroll += 1,
        Some(Action::PageUp) => help.scroll = help.scroll.saturating_sub(10),
        Some(Action::PageDown) => help.scroll += 10,
        Some(Action::Top) => help.scroll = 0,
        Some(Action::Back | Action::Help) => return Outcome::handled(vec![OverlayEffect::Close]),
        Some(Action::Transcripts) => return Outcome::handled(vec![OverlayEffect::OpenBrowser]),
        Some(Action::Interrupt | Action::Quit | Action::Redraw | Action::SwarmView) => {
            return Outcome::passed();
        }
        _ => {}
    }
    Outcome::handled(vec![])
}

/// The browser takes everything but the global actions it leaves to the
/// chat screen; while its search line is open, that line takes every key.
fn browser_input(browser: &mut Browser, input: Input<'_>) -> Outcome {
    let (action, key) = match input {
        Input::Key { action, key } => (action, key),
        Input::Wheel { up } => {
            for _ in 0..WHEEL_LINES {
                browser.handle(if up { Action::Up } else { Action::Down });
            }
            return Outcome::handled(vec![]);
        }
        Input::Paste(text) => {
            // Outside the search line a paste has nowhere to go: dropped.
            browser.search_paste(text);
            return Outcome::handled(vec![]);
        }
    };
    if browser.search.editing {
        match action {
            Some(Action::SearchCancel) => browser.search_cancel(),
            Some(Action::SearchConfirm) => browser.search_confirm(),
            Some(Action::SearchDelete) => browser.search_delete(),
            _ => {
                if let Some(c) = typed_char(key) {
                    browser.search_type(c);
                }
            }
        }
        return Outcome::handled(vec![]);
    }
    match action {
        Some(
            Action::Interrupt | Action::Quit | Action::Redraw | Action::Help | Action::SwarmView,
        ) => Outcome::passed(),
        Some(Action::Transcripts) => Outcome::handled(vec![OverlayEffect::Close]),
        Some(a) => Outcome::handled(
            browser
                .handle(a)
                .into_iter()
                .map(|e| match e {
                    BrowserEffect::Close => OverlayEffect::Close,
                    other => OverlayEffect::Browser(other),
                })
                .collect(),
        ),
        None => Outcome::handled(vec![]),
    }
}

/// The team view takes its navigation keys (the app applies them to the
/// board) and Ctrl-C (the app cancels the team, or treats it as anywhere
/// else when no team runs); quitting, redrawing, help, the browser and
/// pastes pass through to the chat screen.
fn swarm_input(input: Input<'_>) -> Outcome {
    match input {
        Input::Wheel { up } => {
            let a = if up { Action::Up } else { Action::Down };
            Outcome::handled(vec![OverlayEffect::Swarm(a); WHEEL_LINES])
        }
        Input::Paste(_) => Outcome::passed(),
        Input::Key { action, .. } => match action {
            Some(Action::Quit | Action::Redraw | Action::Help | Action::Transcripts) => {
                Outcome::passed()
            }
            Some(Action::SwarmView) => Outcome::handled(vec![OverlayEffect::Close]),
            Some(a) => Outcome::handled(vec![OverlayEffect::Swarm(a)]),
            None => Outcome::handled(vec![]),
        },
    }
}

/// The layers over the chat screen, bottom first.
#[derive(Clone, Debug, Default)]
pub struct Overlays {
    stack: Vec<Overlay>,
}

impl Overlays {
    pub fn is_empty(&self) -> bool {
        self.stack.is_empty()
    }

    pub fn len(&self) -> usize {
        self.stack.len()
    }

    pub fn top(&self) -> Option<&Overlay> {
        self.stack.last()
    }

    pub(crate) fn top_mut(&mut self) -> Option<&mut Overlay> {
        self.stack.last_mut()
    }

    pub(crate) fn get_mut(&mut self, layer: usize) -> Option<&mut Overlay> {
        self.stack.get_mut(layer)
    }

    pub(crate) fn push(&mut self, overlay: Overlay) {
        self.stack.push(overlay);
    }

    /// Removes the layer at `layer` (a layer closing itself).
    pub(crate) fn remove(&mut self, layer: usize) {
        if layer < self.stack.len() {
            self.stack.remove(layer);
        }
    }

    pub(crate) fn clear(&mut self) {
        self.stack.clear();
    }

    pub(crate) fn help(&self) -> Option<&Help> {
        self.stack.iter().rev().find_map(|o| match o {
            Overlay::Help(h) => Some(h),
            Overlay::Browser(_)
            | Overlay::Swarm
            | Overlay::Approval(_)
            | Overlay::Monitors(_)
            | Overlay::TearSheet(_)
            | Overlay::Factors(_) => None,
        })
    }

    /// The Monitors view, wherever it is in the stack.
    pub(crate) fn monitors_mut(&mut self) -> Option<&mut super::monitors::MonitorsView> {
        self.stack.iter_mut().rev().find_map(|o| match o {
            Overlay::Monitors(v) => Some(v.as_mut()),
            _ => None,
        })
    }

    pub fn browser(&self) -> Option<&Browser> {
        self.stack.iter().rev().find_map(|o| match o {
            Overlay::Browser(b) => Some(b.as_ref()),
            Overlay::Help(_)
            | Overlay::Swarm
            | Overlay::Approval(_)
            | Overlay::Monitors(_)
            | Overlay::TearSheet(_)
            | Overlay::Factors(_) => None,
        })
    }

    pub(crate) fn browser_mut(&mut self) -> Option<&mut Browser> {
        self.stack.iter_mut().rev().find_map(|o| match o {
            Overlay::Browser(b) => Some(b.as_mut()),
            Overlay::Help(_)
            | Overlay::Swarm
            | Overlay::Approval(_)
            | Overlay::Monitors(_)
            | Overlay::TearSheet(_)
            | Overlay::Factors(_) => None,
        })
    }

    /// The tear-sheet view with this id, wherever it is in the stack.
    pub(crate) fn tear_sheet_mut(&mut self, id: u64) -> Option<&mut TearSheetView> {
        self.stack.iter_mut().rev().find_map(|o| match o {
            Overlay::TearSheet(v) if v.id == id => Some(v.as_mut()),
            _ => None,
        })
    }

    /// The factor view with this id, wherever it is in the stack.
    pub(crate) fn factors_mut(&mut self, id: u64) -> Option<&mut FactorView> {
        self.stack.iter_mut().rev().find_map(|o| match o {
            Overlay::Factors(v) if v.id == id => Some(v.as_mut()),
            _ => None,
        })
    }

    /// Closes the browser, wherever it is in the stack.
    pub(crate) fn close_browser(&mut self) {
        self.stack.retain(|o| !matches!(o, Overlay::Browser(_)));
    }

    /// Opens the help page on top, at its start (a help page already open
    /// elsewhere in the stack goes).
    pub(crate) fn open_help(&mut self) {
        self.close_help();
        self.stack.push(Overlay::Help(Help::default()));
    }

    /// Whether the team view is open (anywhere in the stack).
    pub fn has_swarm(&self) -> bool {
        self.stack.iter().any(|o| matches!(o, Overlay::Swarm))
    }

    /// Opens the team view alone over the chat screen, under a question
    /// still waiting for its answer (a call is blocked on it).
    pub(crate) fn open_swarm(&mut self) {
        self.stack.retain(|o| matches!(o, Overlay::Approval(_)));
        self.stack.insert(0, Overlay::Swarm);
    }

    /// Drops the question on screen: its call was cancelled with the run.
    pub(crate) fn close_approval(&mut self) {
        self.stack.retain(|o| !matches!(o, Overlay::Approval(_)));
    }

    pub(crate) fn close_swarm(&mut self) {
        self.stack.retain(|o| !matches!(o, Overlay::Swarm));
    }

    pub(crate) fn close_help(&mut self) {
        self.stack.retain(|o| !matches!(o, Overlay::Help(_)));
    }

    /// The help key: closes an open help page, or opens one on top.
    pub(crate) fn toggle_help(&mut self) {
        if self.help().is_some() {
            self.close_help();
        } else {
            self.open_help();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::approval::ApprovalMode;
    use crate::tui::approval_view::ApprovalView;

    fn question() -> Overlay {
        Overlay::Approval(Box::new(ApprovalView::new(
            "write_file".into(),
            "notes.md".into(),
            ApprovalMode::Ask,
            vec![],
        )))
    }

    #[test]
    fn the_team_view_opens_under_a_waiting_question_and_a_cancel_drops_it() {
        let mut o = Overlays::default();
        o.push(question());
        o.open_swarm();
        assert_eq!(o.len(), 2);
        assert!(matches!(o.get_mut(1), Some(Overlay::Approval(_))), "on top");
        assert!(o.has_swarm());
        o.close_approval();
        assert_eq!(o.len(), 1);
        assert!(o.has_swarm());
    }
}
