//! Draw on demand: requests are coalesced into one pending deadline and
//! clamped to at most one frame per `min_interval` (60 fps). Nothing asks
//! for a frame while idle, so an idle workstation never draws.

use std::time::Duration;

use tokio::time::Instant;

/// 60 frames per second.
pub const MIN_FRAME_INTERVAL: Duration = Duration::from_micros(16_667);

#[derive(Clone, Debug)]
pub struct FrameScheduler {
    min_interval: Duration,
    last_draw: Option<Instant>,
    pending: Option<Instant>,
}

impl Default for FrameScheduler {
    fn default() -> Self {
        FrameScheduler::new(MIN_FRAME_INTERVAL)
    }
}

impl FrameScheduler {
    pub(crate) fn new(min_interval: Duration) -> Self {
        FrameScheduler {
            min_interval,
            last_draw: None,
            pending: None,
        }
    }

    /// Asks for a frame at `at` or as soon after it as the rate limit allows.
    /// Several requests before the frame collapse into the earliest one.
    pub fn request(&mut self, at: Instant) {
        let earliest = match self.last_draw {
            Some(last) => at.max(last + self.min_interval),
            None => at,
        };
        self.pending = Some(self.pending.map_or(earliest, |p| p.min(earliest)));
    }

    /// When the next frame is due; `None` means nothing to draw.
    pub fn deadline(&self) -> Option<Instant> {
        self.pending
    }

    /// Records a frame drawn at `at`.
    pub fn drew(&mut self, at: Instant) {
        self.last_draw = Some(at);
        self.pending = None;
    }
}
