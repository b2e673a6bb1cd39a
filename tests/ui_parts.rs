//! The dashboard drawn part by part (`ui::parts`) shows, after every frame, exactly what a
//! whole frame drawn from the same state shows: a region that is not drawn again holds what it
//! would draw. The state comes from the rate feed (requests, prefills, decode steps, telemetry)
//! at a slow and a fast rate, with the other events a run sends, keys, pauses in the clock and
//! resizes thrown in by a fixed pseudo-random sequence; the screen is what the terminal got
//! through `Coalesce` (a `TestBackend` under it).
#![allow(clippy::unwrap_used)]

#[path = "../benches/common/rate.rs"]
mod rate;

use std::time::Duration;

use infertop::event::{CacheReset, Event, Notice, RequestFailed, Sample, StopReason, WorkloadDesc};
use infertop::ui::coalesce::{self, Coalesce};
use infertop::ui::state::View;
use infertop::ui::{App, AppConfig, KeyOutcome, Screen};
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::Terminal;

use rate::RateFeed;

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) % n
    }
}

/// An event a run sends now and then, besides its requests.
fn other_event(rng: &mut Rng, t_s: f64, index: u64) -> Event {
    match rng.below(9) {
        0 => Event::StatsReset,
        1 => Event::Paused,
        2 => Event::Resumed,
        3 => Event::WorkloadChanged(Box::new(WorkloadDesc {
            prompt_tokens: format!("{}", 64 << rng.below(3)),
            output_tokens: "11".into(),
            batch: 1,
            load: Some("rate 50/s".into()),
        })),
        4 => Event::RequestFailed(Box::new(RequestFailed {
            index,
            warmup: false,
            reason: "HTTP 500: overloaded".into(),
            status: Some(500),
            endpoint: None,
            elapsed_s: 0.2,
            model: None,
        })),
        5 => Event::Error {
            message: "a scrape timed out".into(),
            fatal: false,
        },
        6 => Event::Telemetry(Box::new(Sample {
            t_s,
            alloc_bytes: Some((30 + rng.below(20)) << 20),
            gpu_util_pct: Some(rng.below(100) as u32),
            power_w: Some(300.0 + rng.below(200) as f64),
            sm_clock_mhz: Some(1980),
            temperature_c: Some(60),
            ..Sample::default()
        })),
        7 => Event::ServerMetrics(Box::new(
            serde_json::from_str(&format!(
                r#"{{"seconds": 1.0, "server": "vllm", "requests_per_s": {}, "running": 12.0,
                "waiting": {}, "kv_usage": 0.4, "preemptions": 0.0, "prefix_hit_rate": 0.5,
                "ttft_s": {{"p50": 0.02, "p90": 0.03, "p99": 0.05, "n": 900}},
                "itl_s": null, "e2e_s": null}}"#,
                rng.below(1000),
                rng.below(9)
            ))
            .unwrap(),
        )),
        _ => Event::Notice(Box::new(Notice::PrefixCacheReset(CacheReset {
            endpoint: "http://a:8000".into(),
            via: "POST /reset_prefix_cache".into(),
            seconds: 0.01,
        }))),
    }
}

const KEYS: [KeyCode; 14] = [
    KeyCode::Char('v'),
    KeyCode::Char('w'),
    KeyCode::Tab,
    KeyCode::Char('t'),
    KeyCode::Char('?'),
    KeyCode::Char('s'),
    KeyCode::Char('h'),
    KeyCode::Char('r'),
    KeyCode::Char(' '),
    KeyCode::Char('+'),
    KeyCode::Char(']'),
    KeyCode::Char('x'),
    KeyCode::Esc,
    KeyCode::Char('['),
];

/// What a whole frame drawn from `app` at `area` shows.
fn whole(app: &App, area: Rect) -> Buffer {
    let mut t = Terminal::new(TestBackend::new(area.width, area.height)).unwrap();
    t.draw(|f| Screen::draw(app, f)).unwrap();
    t.backend().buffer().clone()
}

fn first_difference(a: &Buffer, b: &Buffer) -> String {
    if a.area != b.area {
        return format!("areas {:?} and {:?}", a.area, b.area);
    }
    for y in 0..a.area.height {
        for x in 0..a.area.width {
            let (ca, cb) = (&a[(x, y)], &b[(x, y)]);
            if ca != cb {
                let row = |buf: &Buffer| -> String {
                    (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect()
                };
                return format!(
                    "first at ({x}, {y}): {ca:?} against {cb:?}\nshown: {}\nwhole: {}",
                    row(a),
                    row(b)
                );
            }
        }
    }
    String::new()
}

/// `frames` frames of the feed at `rate` requests/s of `steps` decode steps each. From frame
/// `calm_from` on, the requests alone at 80x24 (no key, no other event, no resize: nothing
/// that would draw a part again for another reason); from `quiet_from` on, only the clock.
fn check(seed: u64, rate: f64, steps: u32, frames: u64, calm_from: u64, quiet_from: u64) {
    let mut rng = Rng(seed);
    let sizes = [(200u16, 60u16), (80, 24), (130, 40), (100, 30), (60, 15)];
    let (mut w, mut h) = sizes[0];
    let mut terminal = Terminal::new(Coalesce::new(TestBackend::new(w, h))).unwrap();
    let mut app = App::new(AppConfig::default());
    let mut feed = RateFeed::new(rate, steps);
    let mut events = Vec::new();
    let mut t = 0.0f64;
    let mut log: Vec<String> = Vec::new();
    for frame in 0..frames {
        // Mostly a frame's 100 ms; now and then a stall, so several buckets and slices close.
        t += if rng.below(20) == 0 {
            0.1 * (2 + rng.below(15)) as f64
        } else {
            0.1
        };
        if frame < quiet_from {
            feed.until(t, &mut events);
        }
        for (et, ev) in events.drain(..) {
            Screen::tick(&mut app, Duration::from_secs_f64(et));
            Screen::apply(&mut app, &ev);
        }
        Screen::tick(&mut app, Duration::from_secs_f64(t));
        let calm = frame >= calm_from;
        if frame == calm_from {
            app.view = View::Requests;
            app.face.show_help = false;
            (w, h) = (80, 24);
            terminal.backend_mut().inner_mut().resize(w, h);
        }
        if !calm && rng.below(6) == 0 {
            let ev = other_event(&mut rng, t, app.run.requests_done);
            log.push(format!("{frame}: {ev:?}").chars().take(80).collect());
            Screen::apply(&mut app, &ev);
        }
        if !calm && rng.below(5) == 0 {
            let code = KEYS[rng.below(KEYS.len() as u64) as usize];
            log.push(format!("{frame}: key {code:?}"));
            let update = Screen::key(&mut app, &KeyEvent::new(code, KeyModifiers::NONE));
            // The engine's answer to a reset.
            if update == KeyOutcome::Send(infertop::event::Control::ResetStats) {
                Screen::apply(&mut app, &Event::StatsReset);
            }
        }
        if !calm && rng.below(40) == 0 {
            (w, h) = sizes[rng.below(sizes.len() as u64) as usize];
            log.push(format!("{frame}: resize {w}x{h}"));
            terminal.backend_mut().inner_mut().resize(w, h);
        }
        Screen::refresh(&mut app);
        coalesce::draw_parts(&mut terminal, |f, parts| Screen::draw_parts(&app, f, parts)).unwrap();
        let shown = terminal.backend().inner().buffer();
        let expected = whole(&app, Rect::new(0, 0, w, h));
        if *shown != expected {
            let recent = log[log.len().saturating_sub(8)..].join("\n");
            panic!(
                "seed {seed:#x}, {rate}/s, frame {frame} at {t:.1}s: the screen is not the \
                 whole frame; {}\nlast steps:\n{recent}",
                first_difference(shown, &expected)
            );
        }
    }
    Screen::apply(&mut app, &Event::Finished(StopReason::RequestLimit));
    Screen::refresh(&mut app);
    coalesce::draw_parts(&mut terminal, |f, parts| Screen::draw_parts(&app, f, parts)).unwrap();
    assert_eq!(
        *terminal.backend().inner().buffer(),
        whole(&app, Rect::new(0, 0, w, h)),
        "seed {seed:#x}: after the end"
    );
}

#[test]
fn a_frame_drawn_in_parts_is_the_whole_frame_at_a_slow_rate() {
    for seed in [0x9e37_79b9_7f4a_7c15, 0x2545_f491_4f6c_dd1d] {
        check(seed, 3.0, 20, 400, 330, 380);
    }
}

/// Requests of about two seconds: the current one's progress shows after a second.
#[test]
fn a_frame_drawn_in_parts_is_the_whole_frame_with_long_requests() {
    check(0x3c6e_f372_fe94_f82b, 0.4, 1000, 300, u64::MAX, u64::MAX);
}

#[test]
fn a_frame_drawn_in_parts_is_the_whole_frame_at_a_fast_rate() {
    for seed in [0xd1b5_4a32_d192_ed03, 0x94d0_49bb_1331_11eb] {
        check(seed, 1000.0, 10, 300, 180, 260);
    }
}
