//! What the watch screen shows, folded from the scraper's messages: the windows drawn in the
//! charts (bounded), the last window, the whole watch's histograms summed (`stats::ServerSpan`)
//! and the state of the scrapes. Every figure is computed here, once per window; render only
//! reads it.

use std::collections::VecDeque;
use std::time::Duration;

use ratatui::crossterm::event::KeyEvent;

use crate::event::{NodeTelemetry, ServerQuantiles, ServerWindow};
use crate::stats::{ServerSpan, ServerSpanSummary};
use crate::ui::face::Face;
use crate::ui::keys::{Action, KeyMap};
use crate::ui::ring::Ring;
use crate::ui::theme::{Glyphs, Theme};
use crate::ui::KeyOutcome;

/// Windows kept for the charts: wider than any terminal's chart, so "the last N windows" is
/// always the panel's width.
pub const HISTORY: usize = 512;

/// Windows that arrive while paused are held (and shown on resume) up to this many; past it
/// the oldest goes into the view even while paused, so a forgotten pause stays bounded.
pub const HELD: usize = HISTORY;

/// What the scraper sends: a window between two good scrapes, or a scrape that failed; with
/// several nodes, each node's window (its `source` set) and failures, and every node's
/// exporter figures. A record's lines make the same events (`server_metrics`,
/// `scrape_failed`, `node_metrics`).
#[derive(Clone, Debug, PartialEq)]
pub enum WatchEvent {
    /// `t_s`: seconds since the watch began, at the window's end. A window without `source`
    /// is the total (a single server's own).
    Window { t_s: f64, window: Box<ServerWindow> },
    /// The scrape at `t_s` failed; the next is tried an interval later.
    ScrapeFailed { t_s: f64, message: String },
    /// A node's server page (`exporter: None`) or one of its exporters (the URL) could not be
    /// read at `t_s`; it is tried again the next interval.
    NodeFailed {
        t_s: f64,
        node: String,
        exporter: Option<String>,
        message: String,
    },
    /// A node's GPU and host figures from its exporters.
    Telemetry {
        t_s: f64,
        node: String,
        telemetry: Box<NodeTelemetry>,
    },
    /// A canary request ended (`--probe`), with the lane's figures so far.
    Canary {
        t_s: f64,
        done: Box<crate::event::CanaryDone>,
        summary: Box<crate::stats::CanarySummary>,
    },
    /// The canary lane could not start (no model to ask for).
    CanaryFailed { message: String },
}

/// The settings the screen starts with.
#[derive(Clone, Debug)]
pub struct WatchConfig {
    /// The metrics URL read (or how many nodes and the first).
    pub url: String,
    /// vllm, sglang, tgi, llama.cpp or unknown (from the first scrape).
    pub server: String,
    pub interval: Duration,
    /// The themes `t` cycles through, the chosen one first.
    pub themes: Vec<Theme>,
    pub glyphs: Glyphs,
    pub keys: KeyMap,
    /// The nodes' names in the order their rows go (others get a row when first heard of).
    pub nodes: Vec<String>,
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

impl ScrapeStatus {
    fn ok(&mut self, t_s: f64) {
        self.last_ok_s = Some(t_s);
        self.failing = None;
    }

    fn failed(&mut self, message: String) {
        let n = self.failing.as_ref().map_or(0, |f| f.0);
        self.failing = Some((n + 1, message));
    }
}

/// What the area under the node table shows where there is no room for both (`v`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pane {
    #[default]
    Charts,
    Detail,
}

/// A row's windows: what the charts draw, the last one, the span since the start or the
/// last reset.
#[derive(Clone, Debug)]
pub struct Series {
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
    /// The span as one window (its counts and signals), recomputed once per window.
    pub span_window: ServerWindow,
}

impl Series {
    fn new(server: &str) -> Series {
        Series {
            history: Ring::new(HISTORY),
            last: None,
            preemptions_total: 0.0,
            span: ServerSpan::default(),
            span_summary: ServerSpan::default().summary(server),
            span_window: ServerWindow::default(),
        }
    }

    fn show(&mut self, w: ServerWindow, in_span: bool, server: &str) {
        self.history.push(Point::from(&w));
        self.preemptions_total += w.preemptions.unwrap_or(0.0);
        if in_span {
            self.span.add(&w);
            self.span_summary = self.span.summary(server);
            self.span_window = self.span.window(server);
        }
        self.last = Some(w);
    }

    fn reset_span(&mut self, server: &str) {
        self.span = ServerSpan::default();
        self.span_summary = self.span.summary(server);
        self.span_window = ServerWindow::default();
    }
}

/// A node's row: its windows, its engines' last windows, how its scrapes go, and its GPUs
/// and host from its exporters.
#[derive(Clone, Debug)]
pub struct NodeView {
    pub name: String,
    pub series: Series,
    /// The server page's scrapes.
    pub status: ScrapeStatus,
    /// The exporters' scrapes: failures since the last good one, and the last message.
    pub exporter_failing: Option<(u64, String)>,
    pub telemetry: Option<NodeTelemetry>,
    /// When the telemetry was read.
    pub telemetry_t_s: f64,
    /// Whether its last window's TTFT / E2E / queue p99 is far above the other nodes'
    /// (above `SLOW_FACTOR` times their median), computed once per round.
    pub slow: SlowFlags,
}

/// Which of a node's figures stand out against the other nodes'.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlowFlags {
    pub ttft: bool,
    pub e2e: bool,
    pub queue: bool,
}

/// A node's p99 counts as slow above this many times the median of every node's.
pub const SLOW_FACTOR: f64 = 1.5;

impl NodeView {
    fn new(name: String, server: &str) -> NodeView {
        NodeView {
            name,
            series: Series::new(server),
            status: ScrapeStatus::default(),
            exporter_failing: None,
            telemetry: None,
            telemetry_t_s: 0.0,
            slow: SlowFlags::default(),
        }
    }

    /// Whether its server page is failing now.
    pub fn down(&self) -> bool {
        self.status.failing.is_some()
    }
}

pub struct WatchState {
    pub url: String,
    pub server: String,
    pub interval: Duration,
    pub face: Face,
    /// Time since the watch began (the loop's clock; tests set it).
    pub now: Duration,
    /// Windows received (totals), shown or held.
    pub windows_read: u64,
    /// The total's windows (with one server, its own).
    pub total: Series,
    /// When the span began (0: the whole watch; else the time of the reset).
    pub span_from_s: f64,
    pub scrape: ScrapeStatus,
    /// Each node's row, in the configured order.
    pub nodes: Vec<NodeView>,
    /// The row the charts and detail show: 0 the total, then the nodes.
    pub selected: usize,
    pub pane: Pane,
    pub paused: bool,
    /// The canary lane's figures (`--probe`), and why it stopped when it did.
    pub canary: Option<crate::stats::CanarySummary>,
    pub canary_failed: Option<String>,
    /// Windows that arrived while paused, in order.
    held: VecDeque<(f64, ServerWindow)>,
}

impl WatchState {
    pub fn new(config: WatchConfig) -> WatchState {
        let nodes = config
            .nodes
            .into_iter()
            .map(|n| NodeView::new(n, &config.server))
            .collect();
        WatchState {
            total: Series::new(&config.server),
            url: config.url,
            server: config.server,
            interval: config.interval,
            face: Face::new(config.keys, config.glyphs, config.themes),
            now: Duration::ZERO,
            windows_read: 0,
            span_from_s: 0.0,
            scrape: ScrapeStatus::default(),
            nodes,
            selected: 0,
            pane: Pane::default(),
            paused: false,
            canary: None,
            canary_failed: None,
            held: VecDeque::new(),
        }
    }

    pub fn theme(&self) -> &Theme {
        self.face.theme()
    }

    /// Windows held while paused.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Whether the screen has a row per node: several nodes, or one with exporter figures.
    pub fn has_node_rows(&self) -> bool {
        self.nodes.len() > 1 || self.nodes.iter().any(|n| n.telemetry.is_some())
    }

    /// The rows the table lists: the total (when there are several nodes), then each node.
    pub fn rows(&self) -> usize {
        if self.nodes.len() > 1 {
            self.nodes.len() + 1
        } else {
            self.nodes.len().max(1)
        }
    }

    /// The selected node, if the selected row is a node's (with one node, it is the total).
    pub fn selected_node(&self) -> Option<&NodeView> {
        if self.nodes.len() > 1 {
            self.selected.checked_sub(1).and_then(|i| self.nodes.get(i))
        } else {
            self.nodes.first()
        }
    }

    /// The windows of the selected row.
    pub fn selected_series(&self) -> &Series {
        match self.selected_node() {
            Some(n) if self.nodes.len() > 1 => &n.series,
            _ => &self.total,
        }
    }

    /// The selected row's name: `total`, or the node's.
    pub fn selected_name(&self) -> &str {
        match self.selected_node() {
            Some(n) if self.nodes.len() > 1 => &n.name,
            _ => "total",
        }
    }

    pub fn tick(&mut self, now: Duration) {
        self.now = now;
    }

    fn node_index(&mut self, name: &str) -> usize {
        match self.nodes.iter().position(|n| n.name == name) {
            Some(i) => i,
            None => {
                self.nodes
                    .push(NodeView::new(name.to_string(), &self.server));
                self.nodes.len() - 1
            }
        }
    }

    pub fn apply(&mut self, ev: WatchEvent) {
        match ev {
            WatchEvent::Window { t_s, window } => {
                match &window.source {
                    Some(node) => {
                        let i = self.node_index(node);
                        self.nodes[i].status.ok(t_s);
                    }
                    None => {
                        self.windows_read += 1;
                        self.scrape.ok(t_s);
                        if let [only] = self.nodes.as_mut_slice() {
                            only.status.ok(t_s);
                        }
                    }
                }
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
                self.scrape.failed(message.clone());
                if let [only] = self.nodes.as_mut_slice() {
                    only.status.failed(message);
                }
            }
            WatchEvent::NodeFailed {
                node,
                exporter,
                message,
                ..
            } => {
                let i = self.node_index(&node);
                let n = &mut self.nodes[i];
                match exporter {
                    Some(_) => {
                        let k = n.exporter_failing.as_ref().map_or(0, |f| f.0);
                        n.exporter_failing = Some((k + 1, message));
                    }
                    None => {
                        n.status.failed(message.clone());
                        if self.nodes.len() == 1 {
                            self.scrape.failed(message);
                        }
                    }
                }
            }
            WatchEvent::Telemetry {
                t_s,
                node,
                telemetry,
            } => {
                let i = self.node_index(&node);
                let n = &mut self.nodes[i];
                n.exporter_failing = None;
                n.telemetry = Some(*telemetry);
                n.telemetry_t_s = t_s;
            }
            WatchEvent::Canary { summary, .. } => self.canary = Some(*summary),
            WatchEvent::CanaryFailed { message } => self.canary_failed = Some(message),
        }
    }

    /// A window into the view: the charts, the last-window table and the span, of the
    /// total or of its node.
    fn show(&mut self, t_s: f64, w: ServerWindow) {
        // A window held across a reset ended before it: it is not part of the new span.
        let in_span = t_s >= self.span_from_s;
        match w.source.clone() {
            Some(node) => {
                let i = self.node_index(&node);
                let server = self.server.clone();
                self.nodes[i].series.show(w, in_span, &server);
            }
            None => {
                self.total.show(w, in_span, &self.server);
                self.flag_slow_nodes();
            }
        }
    }

    /// Marks the nodes whose last p99s stand out (once per round, when the total comes).
    fn flag_slow_nodes(&mut self) {
        fn median(mut v: Vec<f64>) -> Option<f64> {
            if v.len() >= 2 {
                crate::stats::median_in_place(&mut v)
            } else {
                None
            }
        }
        let p99 = |n: &NodeView, f: fn(&ServerWindow) -> Option<ServerQuantiles>| {
            if n.down() {
                return None;
            }
            n.series.last.as_ref().and_then(f).map(|q| q.p99)
        };
        let ttft = |w: &ServerWindow| w.ttft_s;
        let e2e = |w: &ServerWindow| w.e2e_s;
        let queue = |w: &ServerWindow| w.signals.queue_s;
        let medians: Vec<Option<f64>> = [ttft, e2e, queue]
            .iter()
            .map(|f| median(self.nodes.iter().filter_map(|n| p99(n, *f)).collect()))
            .collect();
        for n in &mut self.nodes {
            let slow = |i: usize, f: fn(&ServerWindow) -> Option<ServerQuantiles>| match (
                medians[i],
                p99(n, f),
            ) {
                (Some(m), Some(v)) => m > 0.0 && v > SLOW_FACTOR * m,
                _ => false,
            };
            n.slow = SlowFlags {
                ttft: slow(0, ttft),
                e2e: slow(1, e2e),
                queue: slow(2, queue),
            };
        }
    }

    /// Starts the span over from now (`r`), for the total and every node.
    pub fn reset_span(&mut self) {
        self.total.reset_span(&self.server);
        for n in &mut self.nodes {
            n.series.reset_span(&self.server);
        }
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

    pub fn handle_key(&mut self, key: &KeyEvent) -> KeyOutcome {
        match self.face.action(key) {
            Some(action) => self.update(action),
            None => KeyOutcome::None,
        }
    }

    /// Moves the selection by `by` rows, within the table.
    pub fn select(&mut self, by: isize) {
        let last = self.rows().saturating_sub(1);
        self.selected = self.selected.saturating_add_signed(by).min(last);
    }

    /// The watch's share of the dashboard's actions; the others do nothing here.
    pub fn update(&mut self, action: Action) -> KeyOutcome {
        match action {
            Action::Quit => return KeyOutcome::Quit,
            Action::PauseResume => self.set_paused(!self.paused),
            Action::ResetStats => self.reset_span(),
            Action::Help => self.face.show_help = !self.face.show_help,
            Action::NextTheme => self.face.next_theme(),
            Action::CycleView => {
                self.pane = match self.pane {
                    Pane::Charts => Pane::Detail,
                    Pane::Detail => Pane::Charts,
                }
            }
            Action::SelectUp => self.select(-1),
            Action::SelectDown => self.select(1),
            _ => {}
        }
        KeyOutcome::None
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
            nodes: vec![],
        })
    }

    fn window(ttft: Vec<(f64, f64)>) -> WatchEvent {
        let q = histogram_quantiles(&ttft);
        WatchEvent::Window {
            t_s: 1.0,
            window: Box::new(ServerWindow {
                seconds: 1.0,
                server: "vllm".into(),
                requests_per_s: q.map(|q| q.n as f64),
                running: Some(1.0),
                waiting: Some(0.0),
                preemptions: Some(1.0),
                ttft_s: q,
                histograms: ServerHistograms {
                    ttft,
                    ..Default::default()
                },
                ..ServerWindow::default()
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
        assert_eq!(s.total.span_summary.ttft_s, Some(whole));
        assert_eq!(whole.n, 40);
        assert_eq!(s.total.span_summary.windows, 3);
        assert_eq!(s.windows_read, 3);
        assert_eq!(s.total.preemptions_total, 3.0);
        // The last window's own figures are its own.
        assert_eq!(s.total.last.as_ref().unwrap().ttft_s.unwrap().n, 19);
    }

    #[test]
    fn reset_starts_the_span_over_and_keeps_the_charts() {
        let mut s = state();
        s.apply(window(vec![(0.1, 0.0), (0.2, 10.0)]));
        s.tick(Duration::from_secs(2));
        s.update(Action::ResetStats);
        assert_eq!(s.total.span_summary.ttft_s, None);
        assert_eq!(s.span_from_s, 2.0);
        let WatchEvent::Window { window: w, .. } = window(vec![(0.2, 0.0), (0.4, 5.0)]) else {
            unreachable!()
        };
        s.apply(WatchEvent::Window {
            t_s: 3.0,
            window: w,
        });
        assert_eq!(s.total.span_summary.ttft_s.unwrap().n, 5);
        assert_eq!(s.total.history.len(), 2);
        assert_eq!(
            s.total.preemptions_total, 2.0,
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
        assert_eq!(s.total.history.len(), 1);
        assert_eq!(s.total.span_summary.ttft_s.unwrap().n, 10);
        assert_eq!((s.windows_read, s.held()), (2, 1));
        assert_eq!(s.scrape.failing, Some((1, "HTTP 503".into())));
        s.update(Action::PauseResume);
        assert_eq!((s.total.history.len(), s.held()), (2, 0));
        assert_eq!(s.total.span_summary.ttft_s.unwrap().n, 17);
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
        assert!(s.face.show_help);
        assert_eq!(s.handle_key(&esc), KeyOutcome::None);
        assert!(!s.face.show_help);
        assert_eq!(s.handle_key(&esc), KeyOutcome::Quit);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(s.handle_key(&ctrl_c), KeyOutcome::Quit);
    }
}
