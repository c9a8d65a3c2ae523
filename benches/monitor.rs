//! Computing every monitor's next fire (issue 39's budget: 10,000 monitors
//! under 10 ms, docs §21.1): 10,000 schedules generated from a seed (steps,
//! ranges, lists, names, both day fields) in eight time zones, each asked
//! for its next fire after one instant; and the same after an instant in
//! the first pass of New York's repeated hour, where every zone-aware path
//! runs. Reports the best of 20 rounds and the mean per schedule.
//!
//! `cargo bench --bench monitor`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use vibedesk::monitor::cron::Schedule;

const MONITORS: usize = 10_000;
const ROUNDS: usize = 20;
const ZONES: [&str; 8] = [
    "America/New_York",
    "Europe/London",
    "Europe/Berlin",
    "Australia/Sydney",
    "Asia/Tokyo",
    "Asia/Kolkata",
    "UTC",
    "America/Sao_Paulo",
];

/// SplitMix64: a seeded stream, enough for generating expressions.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next() % u64::from(hi - lo + 1)) as u32
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

fn field(rng: &mut Rng, lo: u32, hi: u32, star: f64) -> String {
    if rng.chance(star) {
        return "*".into();
    }
    let a = rng.range(lo, hi - 1);
    let b = rng.range(a + 1, hi);
    match rng.range(0, 3) {
        0 => a.to_string(),
        1 => format!("{a}-{b}"),
        2 => format!("*/{}", rng.range(2, ((hi - lo) / 2).max(2))),
        _ => format!("{a},{b}"),
    }
}

fn schedules(rng: &mut Rng) -> Vec<(Schedule, Tz)> {
    let mut out = Vec::with_capacity(MONITORS);
    while out.len() < MONITORS {
        let text = format!(
            "{} {} {} {} {}",
            field(rng, 0, 59, 0.1),
            field(rng, 0, 23, 0.3),
            field(rng, 1, 28, 0.6),
            field(rng, 1, 12, 0.7),
            field(rng, 0, 6, 0.6),
        );
        let Ok(schedule) = Schedule::parse(&text) else {
            continue;
        };
        let tz: Tz = ZONES[out.len() % ZONES.len()].parse().unwrap();
        out.push((schedule, tz));
    }
    out
}

fn round(all: &[(Schedule, Tz)], after: DateTime<Utc>) -> (f64, usize) {
    let t = Instant::now();
    let found = all
        .iter()
        .filter_map(|(s, tz)| std::hint::black_box(s.next_after(after, *tz)))
        .count();
    (t.elapsed().as_secs_f64(), found)
}

fn main() {
    let mut rng = Rng(39);
    let all = schedules(&mut rng);
    for (label, at) in [
        ("an ordinary instant", "2025-06-17T13:45:12Z"),
        ("New York's repeated hour", "2025-11-02T05:30:00Z"),
    ] {
        let after: DateTime<Utc> = at.parse().unwrap();
        let mut best = f64::INFINITY;
        let mut found = 0;
        for _ in 0..ROUNDS {
            let (secs, n) = round(&all, after);
            best = best.min(secs);
            found = n;
        }
        println!(
            "next fire of {MONITORS} schedules after {label} ({at}): {:.2} ms ({:.0} ns each, {found} found; budget 10 ms)",
            best * 1e3,
            best * 1e9 / MONITORS as f64,
        );
    }
}
