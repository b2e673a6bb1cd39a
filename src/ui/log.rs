//! The events pane's lines: what happened, oldest first, and the merging of outliers that
//! come faster than a reader can follow into one line.

use std::time::Duration;

use super::ring::Ring;

/// Lines the pane keeps.
pub const EVENT_HISTORY: usize = 200;
/// Outliers within this long of the newest outlier line go into it rather than below it.
pub const OUTLIER_LINE_EVERY: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
}

/// One line of the events pane.
#[derive(Clone, Debug, PartialEq)]
pub struct LogEntry {
    /// Dashboard time when it happened.
    pub at: Duration,
    pub level: Level,
    pub text: String,
}

/// The newest outlier line, while later outliers may still go into it.
#[derive(Clone, Debug)]
struct OutlierBurst {
    /// Its number in the ring.
    line: u64,
    since: Duration,
    count: u32,
    /// The worst so far: how far above its p99, and its words.
    worst_ratio: f64,
    worst: String,
}

/// The events pane's lines, bounded.
#[derive(Clone, Debug)]
pub struct EventLog {
    lines: Ring<LogEntry>,
    burst: Option<OutlierBurst>,
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog {
            lines: Ring::new(EVENT_HISTORY),
            burst: None,
        }
    }
}

impl EventLog {
    pub fn push(&mut self, at: Duration, level: Level, text: String) {
        self.lines.push(LogEntry { at, level, text });
    }

    /// An outlier's line (`ratio`: how far above its p99): its own line, or, within
    /// `OUTLIER_LINE_EVERY` of the newest outlier line and while that is still the newest
    /// line, counted into it (`3 outliers, worst #12 TTFT ...`).
    pub fn outlier(&mut self, at: Duration, ratio: f64, text: String) {
        let newest = self.lines.newest_number();
        if let Some(b) = self.burst.as_mut().filter(|b| {
            b.line == newest
                && !self.lines.is_empty()
                && at.saturating_sub(b.since) < OUTLIER_LINE_EVERY
        }) {
            b.count += 1;
            if ratio > b.worst_ratio {
                b.worst_ratio = ratio;
                b.worst = text;
            }
            let merged = format!("{} outliers, worst {}", b.count, b.worst);
            if let Some(line) = self.lines.last_mut() {
                line.text = merged;
            }
            return;
        }
        self.push(at, Level::Warn, text.clone());
        self.burst = Some(OutlierBurst {
            line: self.lines.newest_number(),
            since: at,
            count: 1,
            worst_ratio: ratio,
            worst: text,
        });
    }

    /// Oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &LogEntry> + ExactSizeIterator {
        self.lines.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    pub fn last(&self) -> Option<&LogEntry> {
        self.lines.last()
    }
}
