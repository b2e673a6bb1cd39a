//! The screen's cost must not grow with the event rate (issue 28): the real dashboard, fed at
//! 10 and at 1,000 requests/s on the same simulated clock, drawn at 10 frames a second through
//! the backend stack the terminal gets (`Coalesce` over `CrosstermBackend`), writes about as
//! many bytes a second at both rates. Bytes, not time: nothing here depends on the machine.
//! Before the columns became buckets and the figures were held, the ratio was 3.2 at 80x24
//! and 6.6 at 200x60 (`RENDER_PARTS=rates cargo bench --bench render`).
#![allow(clippy::unwrap_used)]

#[path = "../benches/common/rate.rs"]
mod rate;

use rate::screen_bytes;

#[test]
fn bytes_per_second_do_not_grow_with_the_request_rate() {
    for (w, h, limit) in [(80u16, 24u16, 5_000.0), (200, 60, 20_000.0)] {
        let slow = screen_bytes(w, h, 10.0, 10, 10, 8.0, 8.0);
        let fast = screen_bytes(w, h, 1000.0, 10, 10, 8.0, 8.0);
        // The feeds really ran at their rates (the dashboard counted the requests).
        assert!((150..=170).contains(&slow.requests), "{w}x{h}: {slow:?}");
        assert!(
            (15_900..=16_100).contains(&fast.requests),
            "{w}x{h}: {fast:?}"
        );
        assert!(
            slow.per_s > 100.0 && fast.per_s > 100.0,
            "{slow:?} {fast:?}"
        );
        let ratio = fast.per_s / slow.per_s;
        assert!(
            ratio < 1.5,
            "{w}x{h}: {:.0} B/s at 1,000 requests/s against {:.0} B/s at 10 (ratio {ratio:.2})",
            fast.per_s,
            slow.per_s
        );
        // And within the SSH budget at both rates.
        assert!(
            slow.per_s < limit && fast.per_s < limit,
            "{w}x{h}: {:.0} and {:.0} B/s, limit {limit}",
            slow.per_s,
            fast.per_s
        );
    }
}
