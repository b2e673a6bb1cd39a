//! Whole-frame snapshots of the dashboard on ratatui's `TestBackend`, from fixed event sequences
//! with the clock injected (no wall-clock time anywhere), at 80x24 and 160x48. Colours are not
//! in the snapshots; `styles_*` tests check the theme mapping on the same frames.
//!
//! KeyOutcome with `INSTA_UPDATE=always cargo test --test ui_snapshots`, then read the `.snap` files.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use infertop::event::ModelInfo;
use infertop::event::Sample;
use infertop::event::{Event, RequestDone, RunInfo, StopReason, WorkloadDesc};
use infertop::stats::Slo;
use infertop::ui::render::render;
use infertop::ui::{App, AppConfig};
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::Terminal;

/// Drives an `App` through a run the way the loop would: the clock advances with the
/// simulated work, and `refresh` runs once per "frame" (here: after every request). Requests
/// run back to back (about 29 a second, so the charts' columns are buckets of run time)
/// unless `think_s` leaves a pause after each.
struct Sim {
    app: App,
    t: f64,
    seed: u64,
    think_s: f64,
}

fn model() -> ModelInfo {
    ModelInfo {
        name: "synthetic:tiny".into(),
        arch: "llama".into(),
        source: infertop::event::ModelSource::Synthetic,
        params: 4_620_000,
        active_params: 4_620_000,
        weight_bytes: 18_480_000,
        kv_bytes_per_token: 4096,
        kv_window: None,
        dtype: "f32".into(),
        device: "cpu".into(),
        max_positions: 2048,
        layers: 4,
        hidden: 256,
        heads: 8,
        kv_heads: 4,
        head_dim: 32,
        vocab: 32000,
        parts: None,
    }
}

fn workload(prompt: usize, output: usize) -> WorkloadDesc {
    WorkloadDesc {
        prompt_tokens: prompt.to_string(),
        output_tokens: output.to_string(),
        batch: 1,
        load: None,
    }
}

impl Sim {
    fn new(config: AppConfig) -> Sim {
        Sim {
            app: App::new(config),
            t: 0.0,
            seed: 0x2545_f491_4f6c_dd1d,
            think_s: 0.0,
        }
    }

    fn default() -> Sim {
        Sim::new(AppConfig::default())
    }

    fn at(&mut self, secs: f64) {
        self.t = secs;
        self.app.tick(Duration::from_secs_f64(secs));
    }

    fn apply(&mut self, ev: Event) {
        self.app.tick(Duration::from_secs_f64(self.t));
        self.app.apply(&ev);
    }

    /// Uniform in [-1, 1), from a fixed xorshift sequence.
    fn noise(&mut self) -> f64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        (self.seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }

    fn start(&mut self, warmup: u64, prompt: usize, output: usize) {
        self.apply(Event::Loading {
            what: "synthetic weights".into(),
            done: 18_480_000,
            total: 18_480_000,
        });
        self.at(0.35);
        self.apply(Event::RunStarted(Box::new(RunInfo {
            model: model(),
            workload: workload(prompt, output),
            warmup_requests: warmup,
            threads: 2,
            traffic: None,
            peak: None,
        })));
    }

    fn memory(&mut self, alloc: u64) {
        let t_s = self.t;
        self.apply(Event::Telemetry(Box::new(Sample {
            t_s,
            rss_bytes: Some(96 << 20),
            rss_peak_bytes: Some(120 << 20),
            alloc_bytes: Some(alloc),
            alloc_peak_bytes: Some(64 << 20),
            ..Sample::default()
        })));
    }

    /// One whole request: start, prefill, `output - 1` decode steps, done; then a frame.
    fn request(&mut self, index: u64, warmup: bool, ttft_s: f64, itl_s: f64, output: usize) {
        self.apply(Event::RequestStarted {
            index,
            warmup,
            prompt_tokens: 128,
            output_tokens: output,
            batch: 1,
        });
        self.t += ttft_s;
        self.apply(Event::PrefillDone { index, ttft_s });
        let mut decode = 0.0;
        for step in 1..output as u32 {
            let itl = itl_s * (1.0 + 0.08 * self.noise());
            decode += itl;
            self.t += itl;
            self.apply(Event::decode_step(index, step, itl, None));
        }
        let steps = output.saturating_sub(1);
        self.apply(Event::RequestDone(Box::new(RequestDone {
            index,
            warmup,
            batch: 1,
            prompt_tokens: 128,
            output_tokens: output,
            ttft_s,
            tpot_s: (steps > 0).then(|| decode / steps as f64),
            e2e_s: ttft_s + decode,
            gpu_ttft_s: None,
            gpu_decode_s: None,
            itl_max_s: None,
            peak_alloc_bytes: None,
            output_hash: "0".into(),
            ..Default::default()
        })));
        self.app.refresh();
        self.t += self.think_s;
    }

    /// `n` requests from `first`: warmup ones slow and settling, steady ones noisy around
    /// 12 ms TTFT and 1.5 ms ITL.
    fn requests(&mut self, first: u64, n: u64, warmup_until: u64) {
        for i in first..first + n {
            let warmup = i < warmup_until;
            let settle = if warmup {
                1.0 + 3.0 / (1.0 + i as f64)
            } else {
                1.0
            };
            let ttft = 0.012 * settle * (1.0 + 0.1 * self.noise());
            let itl = 0.0015 * settle;
            self.request(i, warmup, ttft, itl, 16);
            if i % 10 == 0 {
                self.memory((40 << 20) + (i << 16));
            }
        }
    }

    fn steady() -> Sim {
        Sim::steady_with(0.0)
    }

    /// `steady`, with `think_s` after each request.
    fn steady_with(think_s: f64) -> Sim {
        let mut s = Sim::default();
        s.think_s = think_s;
        s.start(5, 128, 16);
        s.requests(0, 45, 5);
        s.apply(Event::WorkloadChanged(Box::new(workload(256, 16))));
        s.requests(45, 25, 5);
        s
    }
}

fn draw(app: &App, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
    terminal.draw(|f| render(f, app)).expect("draw");
    terminal
}

fn text_of(buf: &Buffer) -> String {
    let mut out = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

/// Snapshots one app at both sizes.
macro_rules! snap_both {
    ($name:literal, $app:expr) => {{
        let app = $app;
        insta::assert_snapshot!(concat!($name, "_80x24"), draw(&app, 80, 24).backend());
        insta::assert_snapshot!(concat!($name, "_160x48"), draw(&app, 160, 48).backend());
    }};
}

#[test]
fn loading() {
    let mut s = Sim::default();
    s.at(0.4);
    s.apply(Event::Loading {
        what: "model.safetensors".into(),
        done: 12 << 20,
        total: 27 << 20,
    });
    s.app.refresh();
    snap_both!("loading", s.app);
}

#[test]
fn loading_before_any_progress() {
    let mut s = Sim::default();
    s.app.refresh();
    insta::assert_snapshot!("starting_80x24", draw(&s.app, 80, 24).backend());
}

#[test]
fn warmup() {
    let mut s = Sim::default();
    s.start(5, 128, 16);
    s.requests(0, 3, 5);
    // The fourth warmup request is half-way through its decode.
    s.apply(Event::RequestStarted {
        index: 3,
        warmup: true,
        prompt_tokens: 128,
        output_tokens: 16,
        batch: 1,
    });
    s.apply(Event::PrefillDone {
        index: 3,
        ttft_s: 0.02,
    });
    for step in 1..8 {
        s.apply(Event::decode_step(3, step, 0.002, None));
    }
    s.app.refresh();
    snap_both!("warmup", s.app);
}

#[test]
fn steady_state() {
    let mut s = Sim::steady();
    s.at(2.5);
    snap_both!("steady", s.app);
}

/// A few requests a second: the charts keep one column per request (request k in column
/// k mod width), the newest at the gap.
#[test]
fn per_request_columns_when_requests_are_slow() {
    let s = Sim::steady_with(0.25);
    assert!(!s.app.charts.buckets.by_time());
    snap_both!("per_request", s.app);
}

/// Back to back (about 29 requests a second) a column is 200 ms of run time: its bar the
/// median request, its whisker the slowest; an outlier still stands out, in the outlier style
/// with its `!`, the whisker up to the top of the chart.
#[test]
fn bucket_columns_keep_an_outlier() {
    let mut s = Sim::steady();
    s.request(70, false, 0.085, 0.0015, 16);
    s.requests(71, 4, 5);
    s.at(s.t + 0.2);
    s.app.refresh();
    assert!(s.app.charts.buckets.by_time());
    let theme = s.app.theme().clone();
    let terminal = draw(&s.app, 80, 24);
    let buf = terminal.backend().buffer();
    let text = text_of(buf);
    let lines: Vec<&str> = text.lines().collect();
    let title = lines
        .iter()
        .position(|l| l.contains("TTFT p50│max per 200ms"))
        .unwrap_or_else(|| panic!("no bucket title:\n{text}"));
    // The marker row is the last inside the panel; the outlier's column is marked `!`.
    let bottom = (title + 1..lines.len())
        .find(|&y| lines[y].starts_with('└'))
        .expect("panel bottom");
    let marker_row = bottom - 1;
    let x = (1..40u16)
        .find(|&x| buf[(x, marker_row as u16)].symbol() == "!")
        .unwrap_or_else(|| panic!("no outlier marker:\n{text}"));
    // Its whisker reaches the top row (85 ms against a 100 ms scale), in the outlier style.
    let top = (title + 1) as u16;
    assert_eq!(buf[(x, top)].symbol(), "│", "\n{text}");
    assert_eq!(buf[(x, top)].fg, theme.outlier.fg.expect("outlier colour"));
    // No other column of this chart reaches that high.
    let tall = (1..39u16)
        .filter(|&c| buf[(c, top)].symbol() != " ")
        .count();
    assert_eq!(tall, 1, "\n{text}");
}

#[test]
fn steady_state_with_slo() {
    let mut s = Sim::new(AppConfig {
        slo: Slo::parse("ttft=13ms,tpot=50ms").expect("slo"),
        ..AppConfig::default()
    });
    s.start(5, 128, 16);
    s.requests(0, 40, 5);
    insta::assert_snapshot!("slo_80x24", draw(&s.app, 80, 24).backend());
}

#[test]
fn outlier() {
    let mut s = Sim::steady();
    s.request(70, false, 0.085, 0.0015, 16);
    s.requests(71, 4, 5);
    let log = s
        .app
        .events
        .iter()
        .map(|e| e.text.clone())
        .collect::<Vec<_>>();
    assert!(
        log.iter().any(|l| l.starts_with("#70 TTFT 85.0ms > p99 ")),
        "outlier not logged: {log:?}"
    );
    snap_both!("outlier", s.app);
}

#[test]
fn paused() {
    let mut s = Sim::steady();
    s.apply(Event::Paused);
    s.app.refresh();
    snap_both!("paused", s.app);
}

#[test]
fn fatal_error() {
    let mut s = Sim::steady();
    s.apply(Event::Error {
        message: "decode step 7 of request #70: out of memory allocating 512.0 MiB".into(),
        fatal: true,
    });
    s.apply(Event::Finished(StopReason::Error));
    s.app.refresh();
    snap_both!("error", s.app);
}

#[test]
fn stopped_at_request_limit() {
    let mut s = Sim::steady();
    s.apply(Event::Finished(StopReason::RequestLimit));
    s.at(99.0); // elapsed stays frozen at the stop
    s.app.refresh();
    insta::assert_snapshot!("stopped_80x24", draw(&s.app, 80, 24).backend());
}

#[test]
fn too_small() {
    let s = Sim::steady();
    insta::assert_snapshot!("too_small_60x20", draw(&s.app, 60, 20).backend());
    insta::assert_snapshot!("too_small_79x24", draw(&s.app, 79, 24).backend());
    // Even a tiny terminal gets the message, not a panic.
    draw(&s.app, 10, 3);
}

#[test]
fn help_overlay() {
    let mut s = Sim::steady();
    s.app.face.show_help = true;
    insta::assert_snapshot!("help_80x24", draw(&s.app, 80, 24).backend());
}

#[test]
fn ascii_mode() {
    let mut s = Sim::new(AppConfig {
        ascii: true,
        ..AppConfig::default()
    });
    s.start(5, 128, 16);
    s.requests(0, 30, 5);
    let terminal = draw(&s.app, 80, 24);
    let text = text_of(terminal.backend().buffer());
    assert!(text.is_ascii(), "non-ASCII glyph in --ascii mode:\n{text}");
    insta::assert_snapshot!("ascii_80x24", terminal.backend());
}

#[test]
fn gpu_telemetry_at_200x60() {
    let mut s = Sim::steady();
    // A clock drop half-way: utilisation, clock and power fall together.
    for i in 0..60u32 {
        let slow = (50..55).contains(&i);
        s.apply(Event::Telemetry(Box::new(Sample {
            t_s: 2.0 + f64::from(i) * 0.01,
            device_used_bytes: Some(21_474_836_480),
            device_total_bytes: Some(85_899_345_920),
            alloc_bytes: Some(17_179_869_184),
            gpu_util_pct: Some(if slow { 60 } else { 97 }),
            power_w: Some(if slow { 250.0 } else { 400.0 }),
            temperature_c: Some(60 + i / 20),
            sm_clock_mhz: Some(if slow { 1200 } else { 1980 }),
            ..Sample::default()
        })));
    }
    s.apply(Event::Telemetry(Box::new(Sample {
        gpu_processes: vec![
            infertop::event::GpuProcess {
                pid: 4242,
                name: "python3".into(),
                bytes: Some(12_884_901_888),
            },
            infertop::event::GpuProcess {
                pid: 777,
                name: "infertop".into(),
                bytes: Some(8_589_934_592),
            },
        ],
        t_s: 3.0,
        device_used_bytes: Some(21_474_836_480),
        device_total_bytes: Some(85_899_345_920),
        alloc_bytes: Some(17_179_869_184),
        alloc_peak_bytes: Some(18_253_611_008),
        gpu_util_pct: Some(97),
        mem_util_pct: Some(41),
        power_w: Some(402.0),
        power_limit_w: Some(700.0),
        temperature_c: Some(61),
        sm_clock_mhz: Some(1980),
        throttle: vec!["power cap".into()],
        ..Sample::default()
    })));
    s.app.refresh();
    let terminal = draw(&s.app, 200, 60);
    let text = text_of(terminal.backend().buffer());
    for what in [
        "python3", "12.0GiB", "util %", "SM MHz", "power W", "temp C",
    ] {
        assert!(text.contains(what), "{what} missing:\n{text}");
    }
    insta::assert_snapshot!("gpu_200x60", terminal.backend());
}

// ---- Styles: the theme mapping, checked on cells (colours are not in snapshots). ----

#[test]
fn styles_follow_the_theme() {
    let mut s = Sim::new(AppConfig {
        slo: Slo::parse("ttft=13ms").expect("slo"),
        ..AppConfig::default()
    });
    // A few requests a second: one column per request.
    s.think_s = 0.25;
    s.start(5, 128, 16);
    s.requests(0, 40, 5);
    let theme = s.app.theme().clone();
    let terminal = draw(&s.app, 80, 24);
    let buf = terminal.backend().buffer();
    let text = text_of(buf);
    let cell_at = |needle: &str| {
        let (row, line) = text
            .lines()
            .enumerate()
            .find(|(_, l)| l.contains(needle))
            .unwrap_or_else(|| panic!("`{needle}` not on screen:\n{text}"));
        let col = line[..line.find(needle).expect("found")].chars().count();
        (col as u16, row as u16)
    };
    // The state badge.
    let (x, y) = cell_at(" RUNNING ");
    assert_eq!(
        buf[(x + 1, y)].fg,
        theme.badge_running.fg.expect("badge colour")
    );
    // A TTFT cell over the SLO ends in `!` and uses the slo_fail style; cells below it do not.
    let (_, y) = cell_at("│TTFT ");
    let row: String = (0..80).map(|x| buf[(x, y)].symbol()).collect();
    let bang = row
        .chars()
        .position(|c| c == '!')
        .expect("a TTFT cell over 13ms");
    assert_eq!(
        buf[(bang as u16, y)].fg,
        theme.slo_fail.fg.expect("slo colour")
    );
    let (_, y) = cell_at("│TPOT ");
    let row: String = (0..80).map(|x| buf[(x, y)].symbol()).collect();
    assert!(!row.contains('!'), "TPOT is far below its SLO: {row}");
    // Request k is drawn in column k mod 38 (the chart does not scroll): request 4 is a
    // warmup request, request 14 a steady one.
    let (_, title_row) = cell_at("TTFT per request");
    let bar_row = title_row + 1;
    let warm = 1 + 4;
    assert_ne!(buf[(warm, bar_row + 3)].symbol(), " ", "a bar");
    assert_eq!(
        buf[(warm, bar_row + 3)].fg,
        theme.warmup.fg.expect("warmup colour")
    );
    let steady_x = 1 + 14;
    assert_eq!(
        buf[(steady_x, bar_row + 3)].fg,
        theme.ttft.fg.expect("ttft colour")
    );
}

#[test]
fn next_theme_changes_colours_not_text() {
    let s = Sim::steady();
    let mut app = s.app;
    let before = draw(&app, 80, 24);
    app.update(infertop::ui::Action::NextTheme);
    let after = draw(&app, 80, 24);
    assert_eq!(app.theme().name, "light");
    assert_eq!(
        text_of(before.backend().buffer()),
        text_of(after.backend().buffer())
    );
    assert_ne!(before.backend().buffer(), after.backend().buffer());
}

/// A baseline record's table (`--baseline before.jsonl`).
fn baseline_before() -> infertop::ui::state::Baseline {
    use infertop::stats::{Metric, Summary, Table};
    let row = |p50: f64, p99: f64| Summary {
        mean: p50,
        p50,
        p90: p99,
        p95: p99,
        p99,
        max: p99,
        n: 30,
    };
    infertop::ui::state::Baseline {
        name: "before.jsonl".into(),
        table: Table {
            rows: vec![
                (Metric::Ttft, row(0.010, 0.020)),
                (Metric::Tpot, row(0.002, 0.004)),
                (Metric::Itl, row(0.002, 0.005)),
                (Metric::E2e, row(0.050, 0.080)),
                (Metric::PrefillTokS, row(12_000.0, 14_000.0)),
                (
                    Metric::DecodeTokS,
                    Summary {
                        n: 0,
                        ..row(0.0, 0.0)
                    },
                ),
            ],
        },
    }
}

#[test]
fn baseline_beside_live() {
    let baseline = baseline_before();
    let mut s = Sim::new(AppConfig {
        baseline: Some(baseline),
        ..AppConfig::default()
    });
    s.start(5, 128, 16);
    s.requests(0, 40, 5);
    s.app.refresh();
    let terminal = draw(&s.app, 80, 24);
    let text = text_of(terminal.backend().buffer());
    assert!(text.contains("base p50") && text.contains("dp99"), "{text}");
    assert!(text.contains("baseline: before.jsonl"), "{text}");
    insta::assert_snapshot!("baseline_80x24", terminal.backend());
}

/// The columns of row `y` from `x0` to `x1` (exclusive) that hold anything but a space.
fn filled_columns(buf: &Buffer, y: u16, x0: u16, x1: u16) -> Vec<u16> {
    (x0..x1).filter(|&x| buf[(x, y)].symbol() != " ").collect()
}

/// Runs of consecutive columns, e.g. [3, 4, 5, 9, 10] -> 2.
fn runs(cols: &[u16]) -> usize {
    cols.iter()
        .enumerate()
        .filter(|(i, &c)| *i == 0 || cols[i - 1] + 1 != c)
        .count()
}

/// A decode that alternates between two speeds (three steps of 1.5 ms, one of 6 ms): the ITL
/// distribution shows two separate peaks, on a log axis (6 ms / 1.4 ms > 4).
#[test]
fn distribution_of_a_bimodal_itl_shows_two_peaks() {
    let mut s = Sim::default();
    s.start(0, 128, 16);
    for i in 0..40u64 {
        s.apply(Event::RequestStarted {
            index: i,
            warmup: false,
            prompt_tokens: 128,
            output_tokens: 17,
            batch: 1,
        });
        s.t += 0.012;
        s.apply(Event::PrefillDone {
            index: i,
            ttft_s: 0.012,
        });
        let mut decode = 0.0;
        for step in 1..17u32 {
            let base = if step % 4 == 0 { 0.006 } else { 0.0015 };
            let itl = base * (1.0 + 0.05 * s.noise());
            decode += itl;
            s.t += itl;
            s.apply(Event::decode_step(i, step, itl, None));
        }
        s.apply(Event::RequestDone(Box::new(RequestDone {
            index: i,
            warmup: false,
            batch: 1,
            prompt_tokens: 128,
            output_tokens: 17,
            ttft_s: 0.012,
            tpot_s: Some(decode / 16.0),
            e2e_s: 0.012 + decode,
            gpu_ttft_s: None,
            gpu_decode_s: None,
            itl_max_s: None,
            peak_alloc_bytes: None,
            output_hash: "0".into(),
            ..Default::default()
        })));
        s.app.refresh();
    }
    s.app.update(infertop::ui::Action::CycleView);
    assert_eq!(s.app.view, infertop::ui::state::View::Distributions);
    let terminal = draw(&s.app, 80, 24);
    let buf = terminal.backend().buffer();
    let text = text_of(buf);
    assert!(text.contains("ITL · n 640"), "{text}");
    // The ITL pane is the third of three across the chart area; its bottom bar row is the
    // row above the percentile marks.
    let (x0, x1) = (54, 79);
    let marks_row = (0..24u16)
        .find(|&y| (x0..x1).any(|x| buf[(x, y)].symbol() == "^"))
        .expect("percentile marks");
    let bars = filled_columns(buf, marks_row - 1, x0, x1);
    assert_eq!(runs(&bars), 2, "two peaks: {bars:?}\n{text}");
    insta::assert_snapshot!("distributions_bimodal_80x24", terminal.backend());
}

/// Steady decode at 1.5 ms with a stall of 20 ms every tenth second: the heatmap has one
/// stripe at 1.5 ms in every column and a dotted stripe, ten columns apart, at 20 ms.
#[test]
fn heatmap_shows_a_periodic_stall_as_a_stripe() {
    let mut s = Sim::default();
    s.start(0, 128, 16);
    let mut index = 0;
    let mut stalls = 0;
    while s.t < 60.0 {
        s.apply(Event::RequestStarted {
            index,
            warmup: false,
            prompt_tokens: 128,
            output_tokens: 16,
            batch: 1,
        });
        s.t += 0.012;
        s.apply(Event::PrefillDone {
            index,
            ttft_s: 0.012,
        });
        for step in 1..16u32 {
            let stall_second = ((s.t + 0.020) as u64) % 10 == 5;
            let itl = if stall_second && step == 8 {
                stalls += 1;
                0.020
            } else {
                0.0015 * (1.0 + 0.03 * s.noise())
            };
            s.t += itl;
            s.apply(Event::decode_step(index, step, itl, None));
        }
        s.apply(Event::RequestDone(Box::new(RequestDone {
            index,
            warmup: false,
            batch: 1,
            prompt_tokens: 128,
            output_tokens: 16,
            ttft_s: 0.012,
            tpot_s: Some(0.0015),
            e2e_s: 0.035,
            gpu_ttft_s: None,
            gpu_decode_s: None,
            itl_max_s: None,
            peak_alloc_bytes: None,
            output_hash: "0".into(),
            ..Default::default()
        })));
        index += 1;
        if index % 8 == 0 {
            s.app.refresh();
        }
    }
    assert!(stalls > 0);
    s.at(60.5);
    s.app.refresh();
    for _ in 0..3 {
        s.app.update(infertop::ui::Action::CycleView);
    }
    assert_eq!(s.app.view, infertop::ui::state::View::Heatmap);
    let terminal = draw(&s.app, 80, 24);
    let buf = terminal.backend().buffer();
    let text = text_of(buf);
    // Inside the chart area (rows 3..=10, columns 1..=78): the top row with anything is the
    // stall's, and its cells are ten columns apart (seconds 5, 15, ...); the steady stripe
    // fills a row in every column that has a slice.
    let rows: Vec<Vec<u16>> = (3..11u16).map(|y| filled_columns(buf, y, 1, 79)).collect();
    let stall = rows.iter().find(|r| !r.is_empty()).expect("a stall row");
    assert!(stall.len() >= 5, "{stall:?}\n{text}");
    assert!(
        stall.windows(2).all(|w| w[1] - w[0] == 10),
        "stall every tenth column: {stall:?}\n{text}"
    );
    let busiest = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    assert!(busiest >= 59, "a steady stripe: {busiest}\n{text}");
    insta::assert_snapshot!("heatmap_stall_80x24", terminal.backend());
}

/// Warmup that settles: the p50/p99 bands start high and come down, then stay level.
#[test]
fn bands_show_warmup_settling() {
    let mut s = Sim::default();
    s.start(20, 128, 16);
    s.requests(0, 900, 20);
    s.at(s.t + 1.0);
    s.app.refresh();
    for _ in 0..2 {
        s.app.update(infertop::ui::Action::CycleView);
    }
    assert_eq!(s.app.view, infertop::ui::state::View::Bands);
    let terminal = draw(&s.app, 80, 24);
    let buf = terminal.backend().buffer();
    let text = text_of(buf);
    assert!(text.contains("TTFT p50/p99"), "{text}");
    // The TTFT pane (columns 1..26): the top row's dots are at the start (warmup), not later.
    let top = (3..11u16)
        .map(|y| filled_columns(buf, y, 1, 26))
        .find(|r| !r.is_empty())
        .expect("a line");
    assert!(
        top.iter().all(|&x| x < 4),
        "warmup is the high start: {top:?}\n{text}"
    );
    insta::assert_snapshot!("bands_warmup_80x24", terminal.backend());
}

/// At 160x48 every view has a pane of its own.
#[test]
fn every_view_at_once_when_there_is_room() {
    let mut s = Sim::steady();
    s.requests(70, 200, 5);
    s.at(s.t + 1.0);
    s.app.refresh();
    let terminal = draw(&s.app, 160, 48);
    let text = text_of(terminal.backend().buffer());
    for title in [
        "TTFT p50│max per 200ms",
        "ITL heatmap",
        "TTFT p50/p99",
        "ITL p50/p99",
        "TPOT · n",
        "Events",
    ] {
        assert!(text.contains(title), "{title} missing:\n{text}");
    }
    insta::assert_snapshot!("all_views_160x48", terminal.backend());
}

/// `infertop sweep` in a terminal: the grid fills in where the events pane was — measured cells
/// with their TPOT, TTFT and throughput, a failed one with its reason, the running one marked.
#[test]
fn sweep_grid() {
    use infertop::sweep::fold::{GridRow, SweepFold};
    let mut s = Sim::steady();
    let view = |cell: usize, batch: usize, ok: Option<bool>, tpot_ms: f64| GridRow {
        cell,
        cells: 6,
        label: format!("batch {batch}, prompt 128"),
        ok,
        tpot_p50_s: ok.filter(|o| *o).map(|_| tpot_ms / 1e3),
        ttft_p50_s: ok.filter(|o| *o).map(|_| 0.050 * batch as f64),
        throughput: ok.filter(|o| *o).map(|_| batch as f64 * 1e3 / tpot_ms),
        slo_met_share: ok
            .filter(|o| *o)
            .map(|_| if batch >= 4 { 0.5 } else { 1.0 }),
        reason: (ok == Some(false)).then(|| "out of memory".to_string()),
        probe: None,
    };
    let mut fold = SweepFold::new(Default::default(), Default::default());
    fold.grid = vec![
        view(0, 1, Some(true), 2.0),
        view(1, 2, Some(true), 3.0),
        view(2, 4, Some(true), 5.0),
        view(3, 8, Some(false), 0.0),
        view(4, 16, None, 0.0),
    ];
    s.app.sweep = Some(fold);
    s.app.refresh();
    let terminal = draw(&s.app, 100, 40);
    let text = text_of(terminal.backend().buffer());
    assert!(text.contains("Sweep · 4 of 6 cells"), "{text}");
    assert!(text.contains("+ batch 1, prompt 128 TPOT 2.00ms"), "{text}");
    assert!(
        text.contains("! batch 4, prompt 128"),
        "SLO missed by some: {text}"
    );
    assert!(
        text.contains("x batch 8, prompt 128 out of memory"),
        "{text}"
    );
    assert!(text.contains("> batch 16, prompt 128"), "running: {text}");
    insta::assert_snapshot!("sweep_grid_100x40", terminal.backend());
    // Wide enough, the curve so far (throughput against TPOT) stands beside the lines.
    let wide = text_of(draw(&s.app, 240, 60).backend().buffer());
    assert!(wide.contains("TPOT ≤5.5ms"), "{wide}");
    assert!(wide.contains("tok/s"), "{wide}");
    assert!(
        wide.chars().any(|c| ('\u{2801}'..='\u{28ff}').contains(&c)),
        "{wide}"
    );
}

/// `--server-metrics`: the table shows the client's p50/p99 beside the server's own (its
/// histograms over the windows after warmup) and the gap; `s` toggles back to the full table.
#[test]
fn client_beside_server() {
    use infertop::event::{ServerHistograms, ServerWindow};
    use infertop::ui::keys::Action;
    let window = |ttft: Vec<(f64, f64)>, running: f64| {
        let histograms = ServerHistograms {
            ttft,
            itl: vec![(0.001, 0.0), (0.002, 150.0)],
            e2e: vec![(0.02, 0.0), (0.05, 10.0)],
        };
        Event::ServerMetrics(Box::new(ServerWindow {
            seconds: 1.0,
            server: "vllm".into(),
            sources: 1,
            requests_per_s: Some(10.0),
            running: Some(running),
            waiting: Some(0.0),
            kv_usage: Some(0.4),
            preemptions: Some(0.0),
            prefix_hit_rate: Some(0.8),
            ttft_s: infertop::stats::histogram_quantiles(&histograms.ttft),
            itl_s: infertop::stats::histogram_quantiles(&histograms.itl),
            e2e_s: infertop::stats::histogram_quantiles(&histograms.e2e),
            histograms,
            ..ServerWindow::default()
        }))
    };
    let mut s = Sim::default();
    s.start(5, 128, 16);
    let mut info = model();
    info.name = "m".into();
    info.source = infertop::event::ModelSource::Http;
    s.apply(Event::RunStarted(Box::new(RunInfo {
        model: info,
        workload: workload(128, 16),
        warmup_requests: 5,
        threads: 2,
        traffic: None,
        peak: None,
    })));
    s.requests(0, 5, 5);
    // The warmup's window is slow; it is not in the server's steady figures.
    s.apply(window(vec![(0.5, 0.0), (1.0, 5.0)], 1.0));
    s.requests(5, 20, 5);
    for _ in 0..3 {
        s.apply(window(vec![(0.005, 0.0), (0.01, 10.0)], 2.0));
    }
    s.app.refresh();
    let terminal = draw(&s.app, 80, 24);
    let text = text_of(terminal.backend().buffer());
    assert!(text.contains("srv p50") && text.contains("gap"), "{text}");
    // histogram_quantile: 30 TTFTs in (5, 10] ms put p50 at 7.5 ms.
    assert!(text.contains("7.50ms"), "{text}");
    assert!(
        text.contains("20/30") && text.contains("300/450"),
        "client n / server n: {text}"
    );
    assert!(text.contains("server vllm"), "{text}");
    insta::assert_snapshot!("client_beside_server_80x24", terminal.backend());
    s.app.update(Action::ToggleServer);
    let text = text_of(draw(&s.app, 80, 24).backend().buffer());
    assert!(text.contains("mean") && !text.contains("srv p50"), "{text}");
}

/// `h` on a server run: the table shows where the time before the first token went (the
/// connection's phases, TTFT split by new and kept connections, time to second token), and
/// `h` again brings the latency table back.
#[test]
fn http_phases_on_a_key() {
    use infertop::event::{ClientDetail, ConnectionUse, HttpPhases};
    use infertop::ui::keys::Action;
    let mut s = Sim::default();
    s.start(0, 128, 16);
    for i in 0..24u64 {
        let new = i < 4;
        let ttft_s = if new { 0.160 } else { 0.150 } + 0.001 * (i % 5) as f64;
        s.apply(Event::RequestStarted {
            index: i,
            warmup: false,
            prompt_tokens: 128,
            output_tokens: 16,
            batch: 1,
        });
        s.apply(Event::RequestDone(Box::new(RequestDone {
            index: i,
            warmup: false,
            batch: 1,
            prompt_tokens: 128,
            output_tokens: 16,
            ttft_s,
            tpot_s: Some(0.020),
            e2e_s: ttft_s + 0.300,
            gpu_ttft_s: None,
            gpu_decode_s: None,
            itl_max_s: None,
            peak_alloc_bytes: None,
            output_hash: "0".into(),
            tokens: None,
            text: None,
            client: Some(Box::new(ClientDetail {
                endpoint: "http://127.0.0.1:8000".into(),
                http: Some(HttpPhases {
                    connection: if new {
                        ConnectionUse::New
                    } else {
                        ConnectionUse::Reused
                    },
                    dns_s: None,
                    tcp_s: new.then_some(0.008),
                    tls_s: None,
                    connected_s: if new { 0.0085 } else { 0.0002 },
                    sent_s: Some(if new { 0.0088 } else { 0.0004 }),
                    first_byte_s: Some(if new { 0.011 } else { 0.0021 }),
                    attempts: 1,
                }),
                ttst_s: Some(0.030 + 0.001 * (i % 3) as f64),
                ..Default::default()
            })),
            origin: None,
            model: None,
            parts: None,
        })));
    }
    s.app.refresh();
    let text = text_of(draw(&s.app, 80, 24).backend().buffer());
    assert!(text.contains("h phases"), "the footer offers it: {text}");
    s.app.update(Action::TogglePhases);
    s.app.refresh();
    let terminal = draw(&s.app, 80, 24);
    let text = text_of(terminal.backend().buffer());
    for want in [
        "HTTP phases",
        "4 new, 20 kept",
        "TTFT new conn",
        "TTFT kept",
        "TCP connect",
        "first byte",
        "TTST",
        "h latency",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    insta::assert_snapshot!("http_phases_80x24", terminal.backend());
    s.app.update(Action::TogglePhases);
    s.app.refresh();
    let text = text_of(draw(&s.app, 80, 24).backend().buffer());
    assert!(
        text.contains("Percentiles") && !text.contains("HTTP phases"),
        "{text}"
    );
}

/// Waves of 1, 2, 4, 8 and 8 requests whose server said where each TTFT went: the queue
/// 20 ms per request in flight ahead, the prefill 40 ms, the rest 2 ms.
fn split_waves(s: &mut Sim) {
    use infertop::event::{ClientDetail, ServerTimings};
    let mut index = 0u64;
    for wave in [1u64, 2, 4, 8, 8] {
        let first = index;
        for i in first..first + wave {
            s.apply(Event::RequestStarted {
                index: i,
                warmup: false,
                prompt_tokens: 128,
                output_tokens: 16,
                batch: 1,
            });
        }
        for (k, i) in (first..first + wave).enumerate() {
            let in_flight = wave - k as u64;
            let queue = 0.020 * (in_flight - 1) as f64;
            let mut t = ServerTimings {
                source: "vllm".into(),
                queue_s: Some(queue),
                prefill_s: Some(0.040),
                decode_s: Some(0.300),
                cached_tokens: Some(64),
                computed_tokens: Some(64),
                ..Default::default()
            };
            let ttft_s = queue + 0.040 + 0.002;
            t.join_ttft(ttft_s);
            s.apply(Event::RequestDone(Box::new(RequestDone {
                index: i,
                batch: 1,
                prompt_tokens: 128,
                output_tokens: 16,
                ttft_s,
                tpot_s: Some(0.020),
                e2e_s: ttft_s + 0.300,
                output_hash: "0".into(),
                client: Some(Box::new(ClientDetail {
                    endpoint: "http://127.0.0.1:8000".into(),
                    server: Some(t),
                    ..Default::default()
                })),
                ..Default::default()
            })));
        }
        index += wave;
    }
}

/// `f` on a run whose server reports its own timings: the table shows where each TTFT went
/// (queue, prefill, network+client, the decode beside), each part's share and rise per
/// request in flight, the part that grows with the load (the queue here: it rises 20 ms per
/// request in flight, the prefill stays 40 ms), and the last request as a bar of its parts
/// (the last of a wave, alone in flight: no queue).
#[test]
fn the_ttft_split_on_a_key() {
    use infertop::ui::keys::Action;
    let mut s = Sim::default();
    s.start(0, 128, 16);
    split_waves(&mut s);
    s.app.refresh();
    let text = text_of(draw(&s.app, 80, 24).backend().buffer());
    assert!(
        text.contains("f TTFT split"),
        "the footer offers it: {text}"
    );
    s.app.update(Action::ToggleSplit);
    s.app.refresh();
    let terminal = draw(&s.app, 80, 24);
    let text = text_of(terminal.backend().buffer());
    for want in [
        "Where the TTFT went",
        "grows with load: queue",
        "network+client",
        "+20.0ms",
        "#22",
        "f latency",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    insta::assert_snapshot!("ttft_split_80x24", terminal.backend());
    s.app.update(Action::ToggleSplit);
    s.app.refresh();
    let text = text_of(draw(&s.app, 80, 24).backend().buffer());
    assert!(
        text.contains("Percentiles") && !text.contains("Where the TTFT"),
        "{text}"
    );
}

/// `f` on a run of the candle engine with `--step-parts`: the mean steady step in parts,
/// prefill and decode side by side with each part's share, the step first and the parts the
/// model does not trace left out; `f` again brings the percentiles back. Without sampled steps
/// the key offers nothing.
#[test]
fn the_step_parts_on_a_key() {
    use infertop::ui::keys::Action;
    let mut s = Sim::default();
    s.start(0, 128, 16);
    s.requests(0, 5, 0);
    s.app.refresh();
    let text = text_of(draw(&s.app, 80, 24).backend().buffer());
    assert!(!text.contains("step parts"), "no samples, no key: {text}");
    for i in 5..9u64 {
        s.apply(Event::StepParts(Box::new(step_parts(i, 0, 2.0))));
        s.apply(Event::StepParts(Box::new(step_parts(i, 3, 0.1))));
    }
    s.app.refresh();
    let text = text_of(draw(&s.app, 80, 24).backend().buffer());
    assert!(
        text.contains("f step parts"),
        "the footer offers it: {text}"
    );
    s.app.update(Action::ToggleSplit);
    s.app.refresh();
    let text = text_of(draw(&s.app, 80, 24).backend().buffer());
    for want in [
        "Where a step's time goes",
        "prefill n=4, decode n=4",
        "step",
        "20.0ms",
        "attention",
        "8.00ms",
        "40%",
        "mlp",
        "50%",
        "lm head",
        "f latency",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    assert!(
        !text.contains("embedding"),
        "untraced parts are left out: {text}"
    );
    s.app.update(Action::ToggleSplit);
    s.app.refresh();
    let text = text_of(draw(&s.app, 80, 24).backend().buffer());
    assert!(
        text.contains("Percentiles") && !text.contains("Where a step"),
        "{text}"
    );
}

/// A sampled step of a prompt of 128 (step 0 its prefill), `scale` × a 10 ms step: attention
/// 40 %, MLP 50 %, head 5 %, rest 3 %, sampling 2 %.
fn step_parts(index: u64, step: u32, scale: f64) -> infertop::event::StepParts {
    infertop::event::StepParts {
        index,
        step,
        warmup: false,
        tokens: if step == 0 { 128 } else { 1 },
        context: 128 + step as usize,
        wall_s: 0.010 * scale,
        input_s: 0.0,
        embedding_s: None,
        attention_s: Some(0.004 * scale),
        mlp_s: Some(0.005 * scale),
        head_s: Some(0.0005 * scale),
        rest_s: 0.0003 * scale,
        matmul_s: None,
        sample_s: 0.0002 * scale,
    }
}

/// With the model's parts known and the machine's peaks measured at the start, the parts
/// table has a roof column per phase: which roof bounds each part and how close it runs to it.
/// Here the MLP reads 8 MB per decode step in 0.5 ms (16 GB/s against a 32 GB/s peak:
/// memory-bound at 50 %) and does 512 MFLOP per prefill of 128 in 10 ms (51 GFLOP/s against
/// 1 TFLOP/s: compute-bound at 5 %).
#[test]
fn the_step_parts_against_the_roofline() {
    use infertop::event::{MachinePeak, PartWeights, Weights};
    use infertop::ui::keys::Action;
    let mut s = Sim::default();
    let weights = |params: u64| Weights {
        params,
        bytes: 4 * params,
    };
    s.apply(Event::RunStarted(Box::new(RunInfo {
        model: ModelInfo {
            parts: Some(PartWeights {
                attention: weights(1_000_000),
                mlp: weights(2_000_000),
                head: weights(500_000),
                embedding_row_bytes: 256,
            }),
            ..model()
        },
        workload: workload(128, 16),
        warmup_requests: 0,
        threads: 2,
        traffic: None,
        peak: Some(MachinePeak {
            bandwidth: Some(32e9),
            flops: Some(1e12),
            basis: vec!["probe".into()],
        }),
    })));
    s.requests(0, 5, 0);
    for i in 0..4u64 {
        s.apply(Event::StepParts(Box::new(step_parts(i, 0, 2.0))));
        s.apply(Event::StepParts(Box::new(step_parts(i, 3, 0.1))));
    }
    s.app.update(Action::ToggleSplit);
    s.app.refresh();
    for (w, h) in [(80, 24), (200, 60)] {
        let text = text_of(draw(&s.app, w, h).backend().buffer());
        let mlp = text
            .lines()
            .find(|l| l.contains("mlp"))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(text.contains("roof"), "{w}x{h}: {text}");
        assert!(
            mlp.contains("FLOP 5%") && mlp.contains("mem 50%"),
            "{w}x{h}: {mlp}"
        );
        // The head reads 2 MB in 50 µs: faster than the peak (it stays in cache), said whole.
        assert!(text.contains("mem 125%"), "{w}x{h}: {text}");
    }
}

/// `f` twice on a run whose server drafts: each request's acceptance with its percentiles and
/// the TPOT of each band of acceptance (here 10 requests at 90 % accepted with TPOT 10 ms and
/// 10 at 20 % with 30 ms), the token-weighted share and the correlation in the title; a third
/// `f` goes back to the percentiles. A server that drafts nothing is never offered the view.
#[test]
fn speculative_decoding_on_a_key() {
    use infertop::event::{ClientDetail, ServerTimings};
    use infertop::ui::keys::Action;
    let mut s = Sim::default();
    s.start(0, 128, 16);
    for i in 0..20u64 {
        let (accepted, tpot) = if i % 2 == 0 { (9, 0.010) } else { (2, 0.030) };
        let mut t = ServerTimings {
            source: "llama.cpp".into(),
            prefill_s: Some(0.040),
            draft_tokens: Some(10),
            draft_accepted: Some(accepted),
            ..Default::default()
        };
        t.join_ttft(0.050);
        s.apply(Event::RequestDone(Box::new(RequestDone {
            index: i,
            batch: 1,
            prompt_tokens: 128,
            output_tokens: 16,
            ttft_s: 0.050,
            tpot_s: Some(tpot),
            e2e_s: 0.050 + 15.0 * tpot,
            output_hash: "0".into(),
            client: Some(Box::new(ClientDetail {
                endpoint: "http://127.0.0.1:8080".into(),
                server: Some(t),
                ..Default::default()
            })),
            ..Default::default()
        })));
    }
    s.app.update(Action::ToggleSplit);
    s.app.refresh();
    let text = text_of(draw(&s.app, 80, 24).backend().buffer());
    assert!(text.contains("f drafts"), "the footer offers it: {text}");
    s.app.update(Action::ToggleSplit);
    s.app.refresh();
    let text = text_of(draw(&s.app, 100, 30).backend().buffer());
    for want in [
        "Speculative decoding",
        "20 steady",
        "55% of 200 accepted",
        "TPOT r -1.00",
        "accepted",
        "TPOT <25%",
        "30.0ms",
        "TPOT >=75%",
        "10.0ms",
        "f latency",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    s.app.update(Action::ToggleSplit);
    s.app.refresh();
    let text = text_of(draw(&s.app, 80, 24).backend().buffer());
    assert!(text.contains("Percentiles"), "{text}");
    // The TTFT split of a server that drafts nothing goes straight back.
    let mut s = Sim::default();
    s.start(0, 128, 16);
    split_waves(&mut s);
    s.app.update(Action::ToggleSplit);
    s.app.refresh();
    let text = text_of(draw(&s.app, 80, 24).backend().buffer());
    assert!(
        text.contains("f latency") && !text.contains("f drafts"),
        "{text}"
    );
}

/// With `--baseline` the table compares the live run with the baseline, and `f` still shows
/// the split when asked (the footer offers it); `f` again brings the baseline's columns back.
#[test]
fn the_ttft_split_shows_with_a_baseline_too() {
    use infertop::ui::keys::Action;
    let mut s = Sim::new(AppConfig {
        baseline: Some(baseline_before()),
        ..AppConfig::default()
    });
    s.start(0, 128, 16);
    split_waves(&mut s);
    s.app.refresh();
    let text = text_of(draw(&s.app, 80, 24).backend().buffer());
    assert!(text.contains("base p50"), "{text}");
    assert!(
        text.contains("f TTFT split"),
        "the footer offers it: {text}"
    );
    s.app.update(Action::ToggleSplit);
    s.app.refresh();
    let text = text_of(draw(&s.app, 80, 24).backend().buffer());
    for want in ["Where the TTFT went", "grows with load: queue", "f latency"] {
        assert!(text.contains(want), "{want}: {text}");
    }
    assert!(!text.contains("base p50"), "{text}");
    s.app.update(Action::ToggleSplit);
    s.app.refresh();
    let text = text_of(draw(&s.app, 80, 24).backend().buffer());
    assert!(
        text.contains("base p50") && !text.contains("Where the TTFT"),
        "{text}"
    );
}

/// `--server-metrics` with several servers: `s` goes from client-vs-server to a row per
/// server (its own histograms after warmup), slowest TTFT p99 first, a p99 far above the
/// others' marked `!`; then to the client's table.
#[test]
fn a_row_per_server() {
    use infertop::event::{ServerHistograms, ServerWindow};
    use infertop::ui::keys::Action;
    let window = |source: Option<&str>, ttft: Vec<(f64, f64)>| {
        let histograms = ServerHistograms {
            ttft,
            itl: vec![(0.001, 0.0), (0.002, 150.0)],
            e2e: vec![(0.02, 0.0), (0.05, 10.0)],
        };
        Event::ServerMetrics(Box::new(ServerWindow {
            seconds: 1.0,
            server: "vllm".into(),
            requests_per_s: Some(10.0),
            ttft_s: infertop::stats::histogram_quantiles(&histograms.ttft),
            itl_s: infertop::stats::histogram_quantiles(&histograms.itl),
            e2e_s: infertop::stats::histogram_quantiles(&histograms.e2e),
            histograms,
            source: source.map(str::to_string),
            ..ServerWindow::default()
        }))
    };
    let mut s = Sim::default();
    s.start(0, 128, 16);
    let mut info = model();
    info.source = infertop::event::ModelSource::Http;
    s.apply(Event::RunStarted(Box::new(RunInfo {
        model: info,
        workload: workload(128, 16),
        warmup_requests: 0,
        threads: 2,
        traffic: None,
        peak: None,
    })));
    s.requests(0, 20, 0);
    for _ in 0..3 {
        s.apply(window(Some("gpu01:8000"), vec![(0.005, 0.0), (0.01, 10.0)]));
        s.apply(window(Some("gpu02:8000"), vec![(0.005, 0.0), (0.01, 10.0)]));
        s.apply(window(Some("gpu03:8000"), vec![(0.5, 0.0), (1.0, 10.0)]));
        s.apply(window(
            None,
            vec![(0.005, 0.0), (0.01, 20.0), (0.5, 20.0), (1.0, 30.0)],
        ));
    }
    s.app.refresh();
    s.app.update(Action::ToggleServer);
    let text = text_of(draw(&s.app, 80, 24).backend().buffer());
    assert!(text.contains("slowest TTFT p99 first"), "{text}");
    let rows: Vec<&str> = text.lines().filter(|l| l.contains("gpu0")).collect();
    assert_eq!(rows.len(), 3, "{text}");
    assert!(
        rows[0].contains("gpu03:8000") && rows[0].contains('!'),
        "{text}"
    );
    assert!(!rows[1].contains('!') && !rows[2].contains('!'), "{text}");
    s.app.update(Action::ToggleServer);
    let text = text_of(draw(&s.app, 80, 24).backend().buffer());
    assert!(text.contains("mean") && !text.contains("slowest"), "{text}");
}
