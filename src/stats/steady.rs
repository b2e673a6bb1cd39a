//! When has latency settled? A documented rule over a per-request series (TPOT or TTFT), and the
//! warmup cost: how many extra seconds the requests before that point took.
//!
//! # The settling rule
//! Let `m(j)` be the median of the `k` values starting at request `j` (`series[j..j + k]`). The
//! series has **settled at request `N`** (0-based; the first steady request) when `N` is the
//! smallest index such that
//! 1. the rolling median stays put: for every `j` in `N..=N + k`, `|m(j) − m(N)| ≤ x · m(N)`
//!    (so it needs `2k` values from `N` on), and
//! 2. request `N` itself is not slow: `series[N] ≤ (1 + x) · m(N)`, and
//! 3. the level it settled to is the level the rest of the run keeps:
//!    `|median(series[N..]) − m(N)| ≤ x · m(N)`.
//!
//! The median makes condition 1 blind to single outliers (steady-state tail latency is not
//! warmup); condition 2 stops a few slow first requests from hiding under that median;
//! condition 3 stops a slow plateau longer than `2k` requests from passing as steady. Requests
//! faster than the band never count as warmup. Defaults: `k = 5`, `x = 5 %`.
//!
//! Because of condition 3 the answer can move as a live run goes on; for a finished record it
//! is fixed.
//!
//! `None` means "not settled yet": fewer than `2k` values, or the rolling median is still moving.

/// The settling rule's parameters (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SettleRule {
    /// Window length of the rolling median, and how many following windows must agree.
    pub k: usize,
    /// Relative tolerance, e.g. 0.05 for 5 %.
    pub tolerance: f64,
}

impl Default for SettleRule {
    fn default() -> Self {
        SettleRule {
            k: 5,
            tolerance: 0.05,
        }
    }
}

impl SettleRule {
    /// e.g. "rolling median of 5 requests stays within 5.0 % for the next 5 requests".
    pub fn describe(&self) -> String {
        format!(
            "rolling median of {} requests stays within {} for the next {} requests",
            self.k,
            crate::util::format::percent(self.tolerance),
            self.k
        )
    }
}

/// `m(j)`: the median of one window, as `stats::median` (numpy's p50). The series are request
/// latencies, always finite; a window with none would be NaN and never agree with anything.
fn median(values: &[f64]) -> f64 {
    super::median(values).unwrap_or(f64::NAN)
}

/// A float ordered by `total_cmp`, for the heaps below.
#[derive(Clone, Copy, PartialEq)]
struct Ordered(f64);

impl Eq for Ordered {}

impl PartialOrd for Ordered {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ordered {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// `out[i] = median(series[i..])` for every `i`, in O(n log n) with two heaps.
fn suffix_medians(series: &[f64]) -> Vec<f64> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut low: BinaryHeap<Ordered> = BinaryHeap::new(); // the smaller half (max on top)
    let mut high: BinaryHeap<Reverse<Ordered>> = BinaryHeap::new(); // the larger half
    let mut out = vec![f64::NAN; series.len()];
    for (i, &v) in series.iter().enumerate().rev() {
        match low.peek() {
            Some(top) if v > top.0 => high.push(Reverse(Ordered(v))),
            _ => low.push(Ordered(v)),
        }
        // Keep low.len() == high.len() or high.len() + 1.
        if low.len() > high.len() + 1 {
            if let Some(t) = low.pop() {
                high.push(Reverse(t));
            }
        } else if high.len() > low.len() {
            if let Some(Reverse(t)) = high.pop() {
                low.push(t);
            }
        }
        out[i] = match (low.peek(), high.peek()) {
            // Even count: the two middle values interpolated as `stats::median` does.
            (Some(l), Some(Reverse(h))) if low.len() == high.len() => {
                super::percentile::lerp(l.0, h.0, 0.5)
            }
            (Some(l), _) => l.0,
            _ => f64::NAN,
        };
    }
    out
}

/// The index of the first steady request under `rule`, or `None` if the series has not settled
/// (see the module docs for the rule).
pub fn settle_point(series: &[f64], rule: &SettleRule) -> Option<usize> {
    let k = rule.k.max(1);
    let x = rule.tolerance.max(0.0);
    if series.len() < 2 * k {
        return None;
    }
    let medians: Vec<f64> = (0..=series.len() - k)
        .map(|j| median(&series[j..j + k]))
        .collect();
    let suffix = suffix_medians(series);
    // N + k is the last window start we look at; it must exist: N + k ≤ len − k.
    (0..=series.len() - 2 * k).find(|&n| {
        let m = medians[n];
        if !(m.is_finite() && m > 0.0) {
            return false;
        }
        let stable = medians[n..=n + k].iter().all(|&mj| (mj - m).abs() <= x * m);
        stable && series[n] <= (1.0 + x) * m && (suffix[n] - m).abs() <= x * m
    })
}

/// Extra seconds the requests before `settled` took compared with the steady mean:
/// `Σ_{i < settled} (series[i] − mean(series[settled..]))`. Pass an E2E series to get wall time
/// lost to warmup. Signed: negative if the early requests were faster. 0 when nothing settled
/// before the end (`settled ≥ len`) or `settled == 0`.
pub fn warmup_cost_s(series: &[f64], settled: usize) -> f64 {
    if settled == 0 || settled >= series.len() {
        return 0.0;
    }
    let steady = &series[settled..];
    let mean = steady.iter().sum::<f64>() / steady.len() as f64;
    series[..settled].iter().map(|v| v - mean).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> SettleRule {
        SettleRule::default()
    }

    /// A deterministic ±`amp` relative jitter around 1.
    fn jitter(i: usize, amp: f64) -> f64 {
        let pattern = [0.0, 0.6, -0.4, 0.9, -0.8, 0.3, -0.2, 0.7, -0.6, 0.1];
        1.0 + amp * pattern[i % pattern.len()]
    }

    #[test]
    fn flat_series_settles_at_zero() {
        let s = vec![3e-3; 20];
        assert_eq!(settle_point(&s, &rule()), Some(0));
    }

    #[test]
    fn two_slow_first_requests() {
        let mut s = vec![0.010, 0.008];
        s.extend((0..20).map(|i| 0.001 * jitter(i, 0.02)));
        assert_eq!(settle_point(&s, &rule()), Some(2));
    }

    #[test]
    fn single_slow_first_request_is_warmup_even_though_median_hides_it() {
        let mut s = vec![0.050];
        s.extend(vec![0.003; 12]);
        assert_eq!(settle_point(&s, &rule()), Some(1));
    }

    #[test]
    fn gradual_decline_settles_where_it_flattens() {
        // 5, 4, 3, 2, 1.5, 1.2, then 1 ± 1 %.
        let mut s = vec![5.0, 4.0, 3.0, 2.0, 1.5, 1.2];
        s.extend((0..14).map(|i| jitter(i, 0.01)));
        // m(4) = median(1.5, 1.2, 1, 1.006, 0.996) = 1.006 is stable, but series[4] = 1.5 and
        // series[5] = 1.2 are above the band; request 6 is the first steady one.
        assert_eq!(settle_point(&s, &rule()), Some(6));
    }

    #[test]
    fn steady_outlier_is_not_warmup() {
        let mut s: Vec<f64> = (0..20).map(|i| 0.002 * jitter(i, 0.02)).collect();
        s[8] = 0.02; // a tail-latency spike in the middle
        assert_eq!(settle_point(&s, &rule()), Some(0));
    }

    #[test]
    fn still_drifting_or_too_short_is_none() {
        let drifting: Vec<f64> = (0..30).map(|i| 1.0 + 0.1 * i as f64).collect();
        assert_eq!(settle_point(&drifting, &rule()), None);
        assert_eq!(settle_point(&[1.0; 9], &rule()), None);
        assert_eq!(settle_point(&[], &rule()), None);
    }

    #[test]
    fn step_change_settles_after_the_step() {
        // 10 slow requests, then a lower plateau.
        let mut s = vec![2.0; 10];
        s.extend(vec![1.0; 12]);
        // Windows starting at 0..=5 all have median 2 (condition 1 holds at 0), but the rest of
        // the run sits at 1 (condition 3): the steady state starts after the step.
        assert_eq!(settle_point(&s, &rule()), Some(10));
    }

    #[test]
    fn tolerance_and_k_matter() {
        let s = [
            1.0, 1.08, 1.0, 1.08, 1.0, 1.08, 1.0, 1.08, 1.0, 1.08, 1.0, 1.08,
        ];
        let tight = SettleRule {
            k: 2,
            tolerance: 0.01,
        };
        let loose = SettleRule {
            k: 2,
            tolerance: 0.10,
        };
        assert_eq!(settle_point(&s, &tight), Some(0));
        assert_eq!(settle_point(&s, &loose), Some(0));
        let rising = [1.0, 1.02, 1.04, 1.06, 1.08, 1.10, 1.12, 1.14];
        assert_eq!(
            settle_point(
                &rising,
                &SettleRule {
                    k: 2,
                    tolerance: 0.01
                }
            ),
            None
        );
        // 5 %: from 1, m(1) = 1.03 and m(3) = 1.07 agree, and the rest of the run's median (1.08)
        // is within 5 % of 1.03; from 0 the run's median (1.07) is 0.06 away from m(0) = 1.01.
        assert_eq!(
            settle_point(
                &rising,
                &SettleRule {
                    k: 2,
                    tolerance: 0.05
                }
            ),
            Some(1)
        );
    }

    #[test]
    fn suffix_medians_match_sorting() {
        let s = [5.0, 1.0, 4.0, 2.0, 2.0, 9.0, 0.5, 3.0];
        let fast = suffix_medians(&s);
        for i in 0..s.len() {
            assert_eq!(fast[i], median(&s[i..]), "suffix {i}");
        }
    }

    #[test]
    fn warmup_cost_by_hand() {
        // Steady mean of [1, 1, 2] = 4/3; warmup (5 − 4/3) + (3 − 4/3) = 8 − 8/3 = 16/3.
        let s = [5.0, 3.0, 1.0, 1.0, 2.0];
        assert!((warmup_cost_s(&s, 2) - 16.0 / 3.0).abs() < 1e-12);
        assert_eq!(warmup_cost_s(&s, 0), 0.0);
        assert_eq!(warmup_cost_s(&s, 5), 0.0);
        // Faster early requests give a negative cost.
        assert!((warmup_cost_s(&[0.5, 1.0, 1.0], 1) + 0.5).abs() < 1e-12);
    }

    #[test]
    fn describe_mentions_parameters() {
        assert_eq!(
            rule().describe(),
            "rolling median of 5 requests stays within 5.0 % for the next 5 requests"
        );
    }
}

/// Settling detected live, request by request (the dashboard): the same rule over the TPOTs of
/// the current workload, reported once. Bounded: it looks at the first `LIVE_LIMIT` requests
/// of a workload and gives up after that.
#[derive(Clone, Debug, Default)]
pub struct LiveSettle {
    tpot: Vec<f64>,
    e2e: Vec<f64>,
    first_index: Option<u64>,
    settled: Option<u64>,
    rule: SettleRule,
}

/// Requests of one workload the live detector keeps.
pub const LIVE_LIMIT: usize = 1024;

/// The moment latency settled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settled {
    /// Run index of the first request of the steady state.
    pub at_index: u64,
    /// Extra E2E seconds the requests before it took over the steady mean.
    pub warmup_cost_s: f64,
}

impl LiveSettle {
    /// Starts over (statistics reset, workload change).
    pub fn restart(&mut self) {
        *self = LiveSettle::default();
    }

    /// The settling point, once found.
    pub fn settled_at(&self) -> Option<u64> {
        self.settled
    }

    /// Adds a finished request; returns `Some` the first time latency is found settled.
    pub fn observe(&mut self, index: u64, tpot_s: Option<f64>, e2e_s: f64) -> Option<Settled> {
        let tpot = tpot_s?;
        if self.settled.is_some() || self.tpot.len() >= LIVE_LIMIT {
            return None;
        }
        let first = *self.first_index.get_or_insert(index);
        self.tpot.push(tpot);
        self.e2e.push(e2e_s);
        // Judge only once the requests after the candidate point outnumber the rule's windows
        // twice over, so a settling point found now is unlikely to move later.
        if self.tpot.len() < 4 * self.rule.k {
            return None;
        }
        let n = settle_point(&self.tpot, &self.rule)?;
        if n + 2 * self.rule.k > self.tpot.len() {
            return None;
        }
        let at_index = first + n as u64;
        self.settled = Some(at_index);
        Some(Settled {
            at_index,
            warmup_cost_s: warmup_cost_s(&self.e2e, n),
        })
    }
}

#[cfg(test)]
mod live_tests {
    use super::*;

    #[test]
    fn live_detector_reports_once_at_the_known_point() {
        let mut live = LiveSettle::default();
        // Six slow requests, then a flat 10 ms.
        let series: Vec<f64> = (0..60)
            .map(|i| {
                if i < 6 {
                    0.05 - i as f64 * 0.005
                } else {
                    0.010
                }
            })
            .collect();
        let mut reports = Vec::new();
        for (i, &t) in series.iter().enumerate() {
            if let Some(s) = live.observe(100 + i as u64, Some(t), t * 10.0) {
                reports.push(s);
            }
        }
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert_eq!(reports[0].at_index, 106);
        assert!(reports[0].warmup_cost_s > 0.0);
        assert_eq!(live.settled_at(), Some(106));
        live.restart();
        assert_eq!(live.settled_at(), None);
    }

    #[test]
    fn live_detector_stays_silent_on_noise() {
        let mut live = LiveSettle::default();
        for i in 0..200u64 {
            let t = if i % 2 == 0 { 0.010 } else { 0.020 };
            assert!(live.observe(i, Some(t), t).is_none());
        }
    }
}
