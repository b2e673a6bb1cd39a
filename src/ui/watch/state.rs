//! What the watch screen shows, folded from the scraper's messages: the windows drawn in the
//! charts (bounded), the last window, the whole watch's histograms summed (`stats::ServerSpan`)
//! and the state of the scrapes. Every figure is computed here, once per window; render only
//! reads it.

use std::collections::VecDeque;
use std::time::Duration;

use ratatui::crossterm::event::KeyEvent;

use crate::event::{ServerQuantiles, ServerWindow};
use crate::stats::{ServerSpan, ServerSpanSummary};
use crate::ui::keys::{Action, KeyMap};
use crate::ui::ring::Ring;
use crate::ui::theme::{Glyphs, Theme};

/// Windows kept for the charts: wider than any terminal's chart, so "the last N windows" is
/// always the panel's width.
pub const HISTORY: usize = 512;

/// Windows that arrive while paused are held (and shown on resume) up to this many; past it
/// the oldest goes into the view even while paused, so a forgotten pause stays bounded.
pub const HELD: usize = HISTORY;

/// What the scraper sends: a window between two good scrapes, or a scrape that failed.
#[derive(Clone, Debug, PartialEq)]
pub enum WatchEvent {
    /// `t_s`: seconds since the watch began, at the window's end.
    Window { t_s: f64, window: Box<ServerWindow> },
    /// The scrape at `t_s` failed; the next is tried an interval later.
    ScrapeFailed { t_s: f64, message: String },
}

/// The settings the screen starts with.
#[derive(Clone, Debug)]
pub struct WatchConfig {
    /// The metrics URL read.
    pub url: String,
    /// vllm, sglang, tgi, llama.cpp or unknown (from the first scrape).
    pub server: String,
    pub interval: Duration,
    /// The themes `t` cycles through, the chosen one first.
    pub themes: Vec<Theme>,
    pub glyphs: Glyphs,
    pub keys: KeyMap,
}

/// One window as the charts draw it (the histograms stay in the span).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub requests_per_s: Option<f64>,
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    pub kv_usage: Option<f64>,
    pub ttft: Option<ServerQuantiles>,
    pub itl: Option<ServerQuantiles>,
    pub e2e: Option<ServerQuantiles>,
}

impl From<&ServerWindow> for Point {
    fn from(w: &ServerWindow) -> Point {
        Point {
            requests_per_s: w.requests_per_s,
            running: w.running,
            waiting: w.waiting,
            kv_usage: w.kv_usage,
            ttft: w.ttft_s,
            itl: w.itl_s,
            e2e: w.e2e_s,
        }
    }
}

/// How the scrapes are going.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScrapeStatus {
    /// When the last good scrape was (seconds since the watch began).
    pub last_ok_s: Option<f64>,
    /// Failures since the last good scrape, and the last one's message.
    pub failing: Option<(u64, String)>,
}

/// A key's effect that the loop must act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update {
    None,
    Quit,
}

pub struct WatchState {
    pub url: String,
    pub server: String,
    pub interval: Duration,
    pub keys: KeyMap,
    pub glyphs: Glyphs,
    themes: Vec<Theme>,
    theme_index: usize,
    /// Time since the watch began (the loop's clock; tests set it).
    pub now: Duration,
    /// Windows received, shown or held.
    pub windows_read: u64,
    /// The charts' windows, oldest first.
    pub history: Ring<Point>,
    /// The newest window in the view.
    pub last: Option<ServerWindow>,
    /// Preemptions over the whole watch (not reset by `r`).
    pub preemptions_total: f64,
    /// The histograms summed since the start or the last reset.
    span: ServerSpan,
    /// `span`'s percentiles, recomputed once per window.
    pub span_summary: ServerSpanSummary,
    /// When the span began (0: the whole watch; else the time of the reset).
    pub span_from_s: f64,
    pub scrape: ScrapeStatus,
    pub paused: bool,
    /// Windows that arrived while paused, in order.
    held: VecDeque<(f64, ServerWindow)>,
    pub show_help: bool,
}

impl WatchState {
    pub fn new(config: WatchConfig) -> WatchState {
        let themes = if config.themes.is_empty() {
            vec![Theme::fallback()]
        } else {
            config.themes
        };
        WatchState {
            span_summary: ServerSpan::default().summary(&config.server),
            url: config.url,
            server: config.server,
            interval: config.interval,
            keys: config.keys,
            glyphs: config.glyphs,
            themes,
            theme_index: 0,
            now: Duration::ZERO,
            windows_read: 0,
            history: Ring::new(HISTORY),
            last: None,
            preemptions_total: 0.0,
            span: ServerSpan::default(),
            span_from_s: 0.0,
            scrape: ScrapeStatus::default(),
            paused: false,
            held: VecDeque::new(),
            show_help: false,
        }
    }

    pub fn theme(&self) -> &Theme {
        &self.themes[self.theme_index % self.themes.len()]
    }

    /// Windows held while paused.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    pub fn tick(&mut self, now: Duration) {
        self.now = now;
    }

    pub fn apply(&mut self, ev: WatchEvent) {
        match ev {
            WatchEvent::Window { t_s, window } => {
                self.windows_read += 1;
                self.scrape = ScrapeStatus {
                    last_ok_s: Some(t_s),
                    failing: None,
                };
                if self.paused {
                    self.held.push_back((t_s, *window));
                    if self.held.len() > HELD {
                        if let Some((t, w)) = self.held.pop_front() {
                            self.show(t, w);
                        }
                    }
                } else {
                    self.show(t_s, *window);
                }
            }
            WatchEvent::ScrapeFailed { message, .. } => {
                let n = self.scrape.failing.as_ref().map_or(0, |f| f.0);
                self.scrape.failing = Some((n + 1, message));
            }
        }
    }

    /// A window into the view: the charts, the last-window table and the span.
    fn show(&mut self, t_s: f64, w: ServerWindow) {
        self.history.push(Point::from(&w));
        self.preemptions_total += w.preemptions.unwrap_or(0.0);
        // A window held across a reset ended before it: it is not part of the new span.
        if t_s >= self.span_from_s {
            self.span.add(&w);
            self.span_summary = self.span.summary(&self.server);
        }
        self.last = Some(w);
    }

    /// Starts the span over from now (`r`).
    pub fn reset_span(&mut self) {
        self.span = ServerSpan::default();
        self.span_summary = self.span.summary(&self.server);
        self.span_from_s = self.now.as_secs_f64();
    }

    pub fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
        if !paused {
            while let Some((t, w)) = self.held.pop_front() {
                self.show(t, w);
            }
        }
    }

    pub fn handle_key(&mut self, key: &KeyEvent) -> Update {
        match self.keys.action_over_help(key, &mut self.show_help) {
            Some(action) => self.update(action),
            None => Update::None,
        }
    }

    /// The watch's share of the dashboard's actions; the others do nothing here.
    pub fn update(&mut self, action: Action) -> Update {
        match action {
            Action::Quit => return Update::Quit,
            Action::PauseResume => self.set_paused(!self.paused),
            Action::ResetStats => self.reset_span(),
            Action::Help => self.show_help = !self.show_help,
            Action::NextTheme => self.theme_index = (self.theme_index + 1) % self.themes.len(),
            _ => {}
        }
        Update::None
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::event::ServerHistograms;
    use crate::stats::histogram_quantiles;
    use ratatui::crossterm::event::KeyCode;

    const INF: f64 = f64::INFINITY;

    fn state() -> WatchState {
        WatchState::new(WatchConfig {
            url: "http://localhost:8000/metrics".into(),
            server: "vllm".into(),
            interval: Duration::from_secs(1),
            themes: vec![],
            glyphs: Glyphs::new(false),
            keys: KeyMap::default(),
        })
    }

    fn window(ttft: Vec<(f64, f64)>) -> WatchEvent {
        let q = histogram_quantiles(&ttft);
        WatchEvent::Window {
            t_s: 1.0,
            window: Box::new(ServerWindow {
                seconds: 1.0,
                server: "vllm".into(),
                sources: 1,
                requests_per_s: q.map(|q| q.n as f64),
                running: Some(1.0),
                waiting: Some(0.0),
                kv_usage: None,
                preemptions: Some(1.0),
                prefix_hit_rate: None,
                ttft_s: q,
                itl_s: None,
                e2e_s: None,
                histograms: ServerHistograms {
                    ttft,
                    ..Default::default()
                },
            }),
        }
    }

    /// Three windows' bucket deltas (as `scrape::window` trims them) add up to the whole:
    /// the whole-watch percentiles equal those of one window over all the observations.
    #[test]
    fn the_whole_watch_is_one_window_over_everything() {
        let all = [
            (0.025, 0.0),
            (0.05, 4.0),
            (0.1, 10.0),
            (0.25, 31.0),
            (0.5, 38.0),
            (1.0, 40.0),
            (INF, 40.0),
        ];
        let parts = [
            vec![(0.025, 0.0), (0.05, 4.0), (0.1, 6.0)],
            vec![(0.05, 0.0), (0.1, 4.0), (0.25, 15.0), (0.5, 15.0)],
            vec![(0.1, 0.0), (0.25, 10.0), (0.5, 17.0), (1.0, 19.0)],
        ];
        let mut s = state();
        for p in parts {
            s.apply(window(p));
        }
        let whole = histogram_quantiles(&all).unwrap();
        assert_eq!(s.span_summary.ttft_s, Some(whole));
        assert_eq!(whole.n, 40);
        assert_eq!(s.span_summary.windows, 3);
        assert_eq!(s.windows_read, 3);
        assert_eq!(s.preemptions_total, 3.0);
        // The last window's own figures are its own.
        assert_eq!(s.last.as_ref().unwrap().ttft_s.unwrap().n, 19);
    }

    #[test]
    fn reset_starts_the_span_over_and_keeps_the_charts() {
        let mut s = state();
        s.apply(window(vec![(0.1, 0.0), (0.2, 10.0)]));
        s.tick(Duration::from_secs(2));
        s.update(Action::ResetStats);
        assert_eq!(s.span_summary.ttft_s, None);
        assert_eq!(s.span_from_s, 2.0);
        let WatchEvent::Window { window: w, .. } = window(vec![(0.2, 0.0), (0.4, 5.0)]) else {
            unreachable!()
        };
        s.apply(WatchEvent::Window {
            t_s: 3.0,
            window: w,
        });
        assert_eq!(s.span_summary.ttft_s.unwrap().n, 5);
        assert_eq!(s.history.len(), 2);
        assert_eq!(
            s.preemptions_total, 2.0,
            "preemptions count the whole watch"
        );
    }

    #[test]
    fn pause_holds_windows_and_resume_shows_them() {
        let mut s = state();
        s.apply(window(vec![(0.1, 0.0), (0.2, 10.0)]));
        s.update(Action::PauseResume);
        s.apply(window(vec![(0.1, 0.0), (0.2, 7.0)]));
        s.apply(WatchEvent::ScrapeFailed {
            t_s: 2.0,
            message: "HTTP 503".into(),
        });
        // Frozen: the view still shows the first window; the scrapes go on.
        assert_eq!(s.history.len(), 1);
        assert_eq!(s.span_summary.ttft_s.unwrap().n, 10);
        assert_eq!((s.windows_read, s.held()), (2, 1));
        assert_eq!(s.scrape.failing, Some((1, "HTTP 503".into())));
        s.update(Action::PauseResume);
        assert_eq!((s.history.len(), s.held()), (2, 0));
        assert_eq!(s.span_summary.ttft_s.unwrap().n, 17);
        // A good scrape clears the warning.
        s.apply(window(vec![(0.1, 0.0), (0.2, 1.0)]));
        assert_eq!(s.scrape.failing, None);
    }

    #[test]
    fn esc_closes_help_before_it_quits() {
        use ratatui::crossterm::event::KeyModifiers;
        let esc = KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE);
        let mut s = state();
        s.update(Action::Help);
        assert!(s.show_help);
        assert_eq!(s.handle_key(&esc), Update::None);
        assert!(!s.show_help);
        assert_eq!(s.handle_key(&esc), Update::Quit);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(s.handle_key(&ctrl_c), Update::Quit);
    }
}
