//! Entering and leaving the full-screen terminal. Raw mode, the alternate
//! screen, bracketed paste, mouse capture and (where supported) key
//! disambiguation for Shift-Enter are undone on every exit path: normal
//! return, error, panic (a hook restores the terminal before the message
//! prints) and drop of the guard.

use std::io::{self, Stdout, Write};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
    KeyboardEnhancementFlags, PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

/// Whether the terminal is in our mode (so restore runs once).
static ACTIVE: AtomicBool = AtomicBool::new(false);
static HOOK: Once = Once::new();

pub(crate) type Term = Terminal<CrosstermBackend<Stdout>>;

/// Restores the terminal when dropped.
pub(crate) struct TerminalGuard {
    pub terminal: Term,
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Puts the terminal into full-screen mode.
pub(crate) fn enter() -> io::Result<TerminalGuard> {
    install_panic_hook();
    enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    let mut out = io::stdout();
    let setup = execute!(
        out,
        EnterAlternateScreen,
        EnableBracketedPaste,
        EnableMouseCapture
    );
    if let Err(e) = setup {
        restore();
        return Err(e);
    }
    // Terminals without the kitty keyboard protocol ignore this sequence;
    // those with it report Shift-Enter distinctly from Enter.
    let _ = execute!(
        out,
        PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES)
    );
    let terminal = match Terminal::new(CrosstermBackend::new(io::stdout())) {
        Ok(t) => t,
        Err(e) => {
            restore();
            return Err(e);
        }
    };
    let mut guard = TerminalGuard { terminal };
    guard.terminal.hide_cursor()?;
    guard.terminal.clear()?;
    Ok(guard)
}

/// Leaves full-screen mode; safe to call more than once.
pub(crate) fn restore() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    let mut out = io::stdout();
    let _ = execute!(out, PopKeyboardEnhancementFlags);
    let _ = execute!(
        out,
        DisableMouseCapture,
        DisableBracketedPaste,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    let _ = disable_raw_mode();
    let _ = out.flush();
}

/// Restore the terminal before the default hook prints the panic, so the
/// message lands on the normal screen where it can be read.
fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // A tool's panic is caught and answered as its error (docs
            // §2.4): the screen stays, and the message goes to the log.
            if crate::tools::guard::inside() {
                tracing::error!("a tool panicked: {info}");
                return;
            }
            restore();
            previous(info);
        }));
    });
}
