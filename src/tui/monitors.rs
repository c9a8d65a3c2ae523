//! The workstation's Monitors view (docs §21.5), opened with `/monitors`:
//! each monitor's schedule, next fire in local time, last status and
//! verdict, and delivery state. Enter opens the last fire's answer (a
//! team's report); `x` runs the selected monitor now, `p` pauses it, `r`
//! resumes it. The rows are read off the UI thread ([`load`]).

use chrono::{DateTime, Local, Utc};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};

use super::format::truncate;
use super::keymap::Action;
use super::theme::Theme;
use crate::monitor::daemon::anchor;
use crate::monitor::def::Monitor;
use crate::monitor::store::{Store, StoreError};

/// One monitor as the view shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct MonitorLine {
    pub name: String,
    /// `cron tz`.
    pub schedule: String,
    /// The next fire in local time, `paused`, or `never`.
    pub next: String,
    pub paused: bool,
    pub last_status: String,
    pub last_verdict: String,
    /// `sent N · waiting N · dead N`.
    pub deliveries: String,
    pub dead: u64,
    /// The last fire's answer (a team's report), for Enter.
    pub last_answer: Option<String>,
    pub last_run_dir: Option<String>,
}

/// What the view asks the app for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MonitorsEffect {
    Close,
    Reload,
    RunNow(String),
    Pause(String),
    Resume(String),
}

#[derive(Clone, Debug, Default)]
pub struct MonitorsView {
    rows: Option<Result<Vec<MonitorLine>, LoadError>>,
    cursor: usize,
    /// The answer on screen (Enter), and its scroll.
    open: Option<usize>,
    scroll: usize,
}

/// Every monitor's line, from `<data>/monitors.sqlite`, next fires after
/// `now`.
/// Why the view has no rows: the store could not be read, or its reader
/// task ended; its text travels to the view in a message.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{0}")]
pub struct LoadError(pub String);

pub fn load(
    paths: &crate::store::Paths,
    now: DateTime<Utc>,
) -> Result<Vec<MonitorLine>, StoreError> {
    let path = Store::path_in(paths);
    if !path.exists() {
        return Ok(Vec::new());
    }
    let store = Store::open(&path)?;
    let mut out = Vec::new();
    for row in store.monitors()? {
        let last = store.fires(&row.name, 1)?.into_iter().next();
        let counts = store.delivery_counts(&row.name)?;
        let (schedule, next) = match Monitor::from_row(&row) {
            Ok(m) => {
                let next = if m.paused {
                    "paused".to_string()
                } else {
                    anchor(&store, &m)
                        .ok()
                        .and_then(|a| m.next_after(a.max(now)))
                        .map_or("never".into(), |t| {
                            t.with_timezone(&Local).format("%a %m-%d %H:%M").to_string()
                        })
                };
                (format!("{} {}", m.cron, m.tz.name()), next)
            }
            Err(e) => (row.cron.clone(), format!("unreadable: {e}")),
        };
        let verdict = last
            .as_ref()
            .and_then(|f| f.verdict.as_deref())
            .and_then(|v| serde_json::from_str::<crate::monitor::verdict::Verdict>(v).ok())
            .map_or("-".to_string(), |v| v.to_string());
        out.push(MonitorLine {
            name: row.name.clone(),
            schedule,
            next,
            paused: row.paused,
            last_status: last.as_ref().map_or("-".into(), |f| f.status.clone()),
            last_verdict: verdict,
            deliveries: format!(
                "sent {} · waiting {} · dead {}",
                counts.sent,
                counts.pending.saturating_add(counts.claimed),
                counts.dead
            ),
            dead: counts.dead,
            last_answer: last.as_ref().and_then(|f| f.answer.clone()),
            last_run_dir: last.and_then(|f| f.run_dir),
        });
    }
    Ok(out)
}

impl MonitorsView {
    pub fn set_rows(&mut self, rows: Result<Vec<MonitorLine>, LoadError>) {
        let n = rows.as_ref().map_or(0, Vec::len);
        self.cursor = self.cursor.min(n.saturating_sub(1));
        if self.open.is_some_and(|i| i >= n) {
            self.open = None;
        }
        self.rows = Some(rows);
    }

    fn selected(&self) -> Option<&MonitorLine> {
        self.rows.as_ref()?.as_ref().ok()?.get(self.cursor)
    }

    fn count(&self) -> usize {
        self.rows
            .as_ref()
            .and_then(|r| r.as_ref().ok())
            .map_or(0, Vec::len)
    }

    pub fn handle(&mut self, action: Action) -> Vec<MonitorsEffect> {
        if self.open.is_some() {
            match action {
                Action::Back => self.open = None,
                Action::Up => self.scroll = self.scroll.saturating_sub(1),
                Action::Down => self.scroll = self.scroll.saturating_add(1),
                Action::PageUp => self.scroll = self.scroll.saturating_sub(10),
                Action::PageDown => self.scroll = self.scroll.saturating_add(10),
                Action::Top => self.scroll = 0,
                _ => {}
            }
            return vec![];
        }
        let name = self.selected().map(|m| m.name.clone());
        match (action, name) {
            (Action::Back, _) => return vec![MonitorsEffect::Close],
            (Action::Up, _) => self.cursor = self.cursor.saturating_sub(1),
            (Action::Down, _) => {
                self.cursor = (self.cursor + 1).min(self.count().saturating_sub(1));
            }
            (Action::Top, _) => self.cursor = 0,
            (Action::Bottom, _) => self.cursor = self.count().saturating_sub(1),
            (Action::Open, Some(_)) => {
                self.open = Some(self.cursor);
                self.scroll = 0;
            }
            (Action::MonitorRun, Some(n)) => return vec![MonitorsEffect::RunNow(n)],
            (Action::MonitorPause, Some(n)) => return vec![MonitorsEffect::Pause(n)],
            (Action::Resume, Some(n)) => return vec![MonitorsEffect::Resume(n)],
            (Action::NextTab, _) => return vec![MonitorsEffect::Reload],
            _ => {}
        }
        vec![]
    }

    pub fn render(&mut self, area: Rect, buf: &mut Buffer, theme: &Theme) {
        if area.height < 3 {
            return;
        }
        buf.set_style(area, theme.text);
        let width = area.width as usize;
        let title = match self
            .open
            .and_then(|i| self.rows.as_ref()?.as_ref().ok()?.get(i))
        {
            Some(m) => format!("Monitor {}: last answer", m.name),
            None => "Monitors".to_string(),
        };
        buf.set_line(
            area.x,
            area.y,
            &Line::from(Span::styled(
                format!("{title:<width$}"),
                theme.status.add_modifier(Modifier::BOLD),
            )),
            area.width,
        );
        let body = Rect::new(area.x, area.y + 1, area.width, area.height - 2);
        let hint = if self.open.is_some() {
            "↑↓ PgUp PgDn scroll · Esc back"
        } else {
            "↑↓ select · Enter last answer · x run now · p pause · r resume · Tab reload · Esc close"
        };
        let lines = if self.open.is_some() {
            self.answer_lines(width, body.height as usize)
        } else {
            self.table_lines(theme, width)
        };
        for (i, l) in lines.into_iter().take(body.height as usize).enumerate() {
            buf.set_line(body.x, body.y + i as u16, &l, body.width);
        }
        buf.set_line(
            area.x,
            area.y + area.height - 1,
            &Line::from(Span::styled(truncate(hint, width), theme.muted)),
            area.width,
        );
    }

    fn table_lines(&self, theme: &Theme, width: usize) -> Vec<Line<'static>> {
        let rows = match &self.rows {
            None => return vec![Line::from(Span::styled("reading monitors…", theme.muted))],
            Some(Err(e)) => {
                return vec![Line::from(Span::styled(
                    format!("cannot read the monitors: {e}"),
                    theme.error,
                ))];
            }
            Some(Ok(rows)) if rows.is_empty() => {
                return vec![Line::from(Span::styled(
                    "no monitors: add one with `vibedesk monitor add` (docs §21.2)",
                    theme.muted,
                ))];
            }
            Some(Ok(rows)) => rows,
        };
        let mut out = vec![Line::from(Span::styled(
            truncate(
                &format!(
                    "  {:<16} {:<32} {:<16} {:<11} {:<24} DELIVERIES",
                    "NAME", "SCHEDULE", "NEXT (LOCAL)", "LAST", "VERDICT"
                ),
                width,
            ),
            theme.muted,
        ))];
        for (i, m) in rows.iter().enumerate() {
            let text = format!(
                "{} {:<16} {:<32} {:<16} {:<11} {:<24} {}",
                if i == self.cursor { "▶" } else { " " },
                truncate(&m.name, 16),
                truncate(&m.schedule, 32),
                truncate(&m.next, 16),
                truncate(&m.last_status, 11),
                truncate(&m.last_verdict, 24),
                m.deliveries
            );
            let style = if i == self.cursor {
                theme.selection
            } else if m.dead > 0 {
                theme.warn
            } else if m.paused {
                theme.muted
            } else {
                theme.text
            };
            out.push(Line::from(Span::styled(truncate(&text, width), style)));
        }
        out
    }

    fn answer_lines(&mut self, width: usize, height: usize) -> Vec<Line<'static>> {
        let Some(m) = self
            .open
            .and_then(|i| self.rows.as_ref()?.as_ref().ok()?.get(i))
        else {
            return vec![];
        };
        let mut all: Vec<String> = Vec::new();
        if let Some(dir) = &m.last_run_dir {
            all.push(format!("run: {dir}"));
            all.push(String::new());
        }
        match &m.last_answer {
            Some(a) => all.extend(a.lines().map(str::to_string)),
            None => all.push("no answer recorded yet".into()),
        }
        self.scroll = self.scroll.min(all.len().saturating_sub(height));
        all.into_iter()
            .skip(self.scroll)
            .map(|l| Line::from(truncate(&l, width)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(name: &str, dead: u64) -> MonitorLine {
        MonitorLine {
            name: name.into(),
            schedule: "30 16 * * 1-5 America/New_York".into(),
            next: "Mon 03-02 22:30".into(),
            paused: false,
            last_status: "success".into(),
            last_verdict: "SPY bullish".into(),
            deliveries: format!("sent 3 · waiting 0 · dead {dead}"),
            dead,
            last_answer: Some("## Verdict\n\n- SPY: bullish - trend up".into()),
            last_run_dir: Some("/runs/r1".into()),
        }
    }

    fn screen(view: &mut MonitorsView, w: u16, h: u16) -> String {
        let area = Rect::new(0, 0, w, h);
        let mut buf = Buffer::empty(area);
        view.render(area, &mut buf, &Theme::default());
        (0..h)
            .map(|y| {
                (0..w)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect::<String>()
                    .trim_end()
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_table_shows_schedule_next_fire_verdict_and_deliveries() {
        let mut v = MonitorsView::default();
        assert!(screen(&mut v, 120, 6).contains("reading monitors…"));
        v.set_rows(Ok(vec![line("close", 0), line("pairs", 2)]));
        let s = screen(&mut v, 140, 8);
        assert!(s.contains("▶ close"), "{s}");
        assert!(s.contains("30 16 * * 1-5 America/New_York"), "{s}");
        assert!(
            s.contains("Mon 03-02 22:30") && s.contains("SPY bullish"),
            "{s}"
        );
        assert!(s.contains("sent 3 · waiting 0 · dead 2"), "{s}");
        assert!(s.contains("x run now · p pause · r resume"), "{s}");
        v.set_rows(Ok(vec![]));
        assert!(screen(&mut v, 120, 6).contains("no monitors"));
        v.set_rows(Err(LoadError("locked".into())));
        assert!(screen(&mut v, 120, 6).contains("cannot read the monitors: locked"));
    }

    #[test]
    fn keys_select_run_pause_resume_and_open_the_last_answer() {
        let mut v = MonitorsView::default();
        v.set_rows(Ok(vec![line("close", 0), line("pairs", 0)]));
        assert!(v.handle(Action::Down).is_empty());
        assert_eq!(
            v.handle(Action::MonitorRun),
            vec![MonitorsEffect::RunNow("pairs".into())]
        );
        assert_eq!(
            v.handle(Action::MonitorPause),
            vec![MonitorsEffect::Pause("pairs".into())]
        );
        assert_eq!(
            v.handle(Action::Resume),
            vec![MonitorsEffect::Resume("pairs".into())]
        );
        v.handle(Action::Down);
        assert_eq!(v.cursor, 1, "stays on the last row");
        v.handle(Action::Open);
        let s = screen(&mut v, 80, 8);
        assert!(s.contains("Monitor pairs: last answer"), "{s}");
        assert!(
            s.contains("run: /runs/r1") && s.contains("- SPY: bullish - trend up"),
            "{s}"
        );
        // Esc leaves the answer, then the view.
        assert!(v.handle(Action::Back).is_empty());
        assert_eq!(v.handle(Action::Back), vec![MonitorsEffect::Close]);
        // A narrow screen truncates, never panics.
        v.handle(Action::Open);
        let _ = screen(&mut v, 20, 3);
    }
}
