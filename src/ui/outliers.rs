//! Which finished requests stand out from the current workload's steady state, and when that
//! state began: the reference the events pane's outlier and "settled" lines are judged by.

use crate::event::RequestDone;
use crate::stats::steady::{LiveSettle, Settled};
use crate::stats::{Summary, Window};

/// Steady requests needed before a request above the running p99 counts as an outlier.
pub const MIN_OUTLIER_N: usize = 20;
/// An outlier must also be this far above the median: with a tight distribution, a request a
/// hair above p99 is not news (about one in a hundred is there by definition).
pub const OUTLIER_MIN_RATIO: f64 = 1.25;
/// Steady requests of the current workload the outlier reference (p50, p99) is taken over.
pub const OUTLIER_WINDOW: usize = 1000;

/// One figure of a request above its reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Excess {
    /// `TTFT` or `TPOT`.
    pub metric: &'static str,
    pub value_s: f64,
    pub p99_s: f64,
}

/// What one finished request showed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Judged {
    /// Its TTFT's excess, then its TPOT's.
    pub excess: [Option<Excess>; 2],
    /// Latency settled with it (once per workload).
    pub settled: Option<Settled>,
}

/// The steady TTFT and TPOT of the current workload: a doubled prompt makes every request
/// slower, and none of them is an outlier, so the reference restarts at each workload change.
/// The reference is taken again only at `refresh` (once a frame at most), not per request.
#[derive(Clone, Debug)]
pub struct Outliers {
    ttft: Window,
    tpot: Window,
    /// Detects when latency has settled (the same rule as `report`).
    settle: LiveSettle,
    reference: [Summary; 2],
}

impl Default for Outliers {
    fn default() -> Self {
        Outliers {
            ttft: Window::new(OUTLIER_WINDOW),
            tpot: Window::new(OUTLIER_WINDOW),
            settle: LiveSettle::default(),
            reference: [Summary::default(); 2],
        }
    }
}

impl Outliers {
    /// Judges `r` against the reference, then adds it to the reference's windows.
    pub fn observe(&mut self, r: &RequestDone) -> Judged {
        let mut judged = Judged::default();
        if !r.warmup {
            let figures = [("TTFT", Some(r.ttft_s)), ("TPOT", r.tpot_s)];
            for (k, (metric, value)) in figures.into_iter().enumerate() {
                let (Some(value_s), reference) = (value, self.reference[k]) else {
                    continue;
                };
                if reference.n >= MIN_OUTLIER_N
                    && value_s > reference.p99
                    && value_s > OUTLIER_MIN_RATIO * reference.p50
                {
                    judged.excess[k] = Some(Excess {
                        metric,
                        value_s,
                        p99_s: reference.p99,
                    });
                }
            }
            self.ttft.push(r.ttft_s);
            if let Some(tpot) = r.tpot_s {
                self.tpot.push(tpot);
            }
        }
        judged.settled = self.settle.observe(r.index, r.tpot_s, r.e2e_s);
        judged
    }

    /// Takes the reference (p50, p99) from the windows as they are now.
    pub fn refresh(&mut self) {
        self.reference = [self.ttft.summary(), self.tpot.summary()];
    }

    /// A new workload or a reset: the reference starts again from nothing.
    pub fn restart(&mut self) {
        self.settle.restart();
        self.ttft.clear();
        self.tpot.clear();
        self.reference = [Summary::default(); 2];
    }
}
