//! redis-cell's `CL.THROTTLE` reply from the same decision: `[limited, limit, remaining,
//! retry_after_s, reset_after_s]`, with its arithmetic reproduced step by step, so an
//! application that moves from redis-cell to tally reads the same numbers. Pure.
//!
//! Where redis-cell's arithmetic differs from `TSTHROTTLE.ALLOW`'s:
//! * the emission interval is `period / count` divided in `f64` and truncated (the same as
//!   the whole-nanosecond floor for every period under 2^53 ns, 104 days);
//! * `remaining` divides whole microseconds in `f64` (at an interval under a microsecond,
//!   where redis-cell divides by zero and answers `i64::MAX`, tally answers the
//!   nanosecond floor instead);
//! * a refused request's reset time counts from the stored TAT even when it has passed
//!   (tally's own keys expire at their TAT, so that is less than a millisecond);
//! * seconds are truncated, plus one when the sub-second part has at least a millisecond
//!   (redis-cell 0.4 and later); `retry_after` is -1 when allowed.
//!
//! Owns: the compatible reply. May not touch: Redis (pure).

use super::{Decision, Rate};
use crate::error::{Error, Result};

const NS_PER_S: i64 = 1_000_000_000;

/// `CL.THROTTLE`'s rate: `count` per `period_s` seconds, bursts of `max_burst`
/// (`max_burst >= 0`, `count >= 1`, `period_s >= 1`, else [`Error::NotInteger`]).
pub fn rate(max_burst: i64, count: i64, period_s: i64) -> Result<Rate> {
    if max_burst < 0 || count < 1 || period_s < 1 {
        return Err(Error::NotInteger);
    }
    let period_ns = i128::from(period_s) * i128::from(NS_PER_S);
    // redis-cell's `Rate::per_period`, which divides in floating point (truncated into an
    // `i128`, so an interval past `i64` is refused rather than saturated).
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
    let interval = (period_ns as f64 / count as f64) as i128;
    Rate::with_interval(max_burst, interval)
}

/// The reply to a request decided at `now` (ns) as `decision`, with `stored` the TAT the
/// key held before (missing: none).
pub fn reply(rate: &Rate, decision: &Decision, stored: Option<i64>, now: i64) -> [i64; 5] {
    // redis-cell's `ttl`: the new TAT's distance when allowed, the stored one's when not.
    let ttl = if decision.allowed {
        i128::from(decision.reset_after)
    } else {
        i128::from(stored.unwrap_or(now)) - i128::from(now)
    };
    let retry_after = if decision.allowed || decision.retry_after < 0 {
        -1
    } else {
        seconds_rounded(i128::from(decision.retry_after))
    };
    [
        i64::from(!decision.allowed),
        decision.limit,
        remaining(rate, ttl),
        retry_after,
        seconds_rounded(ttl),
    ]
}

/// `remaining`: `(tau - ttl)` over the interval, both in whole microseconds (truncated
/// toward zero) divided in `f64`, when `tau - ttl > -interval`; else 0.
fn remaining(rate: &Rate, ttl: i128) -> i64 {
    let next = i128::from(rate.tolerance) - ttl;
    let interval = i128::from(rate.interval);
    if next <= -interval {
        return 0;
    }
    let interval_us = interval / 1000;
    if interval_us == 0 {
        return i64::try_from(next.div_euclid(interval).max(0)).unwrap_or(i64::MAX);
    }
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
    let remaining = ((next / 1000) as f64 / interval_us as f64) as i64;
    remaining
}

/// Seconds as redis-cell rounds them: `as_seconds_f64` truncated, plus one when the
/// sub-second part has at least a millisecond.
fn seconds_rounded(ns: i128) -> i64 {
    let seconds = ns / i128::from(NS_PER_S);
    let nanos = ns % i128::from(NS_PER_S);
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
    let whole = (seconds as f64 + nanos as f64 / 1e9) as i64;
    whole + i64::from(nanos / 1_000_000 > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::throttle::model::decide;

    /// redis-cell's README example and its unit test's table (`it_rate_limits`: 5 per
    /// second as max_burst 4, count 1, period 1), replayed at the same times.
    #[test]
    fn answers_as_redis_cell_documents() {
        let start = 1_700_000_000 * NS_PER_S;
        let rate_readme = rate(15, 30, 60).unwrap();
        let first = decide(&rate_readme, None, start, 1).unwrap();
        assert_eq!(reply(&rate_readme, &first, None, start), [0, 16, 15, -1, 2]);

        let r = rate(4, 1, 1).unwrap();
        let ms = |n: i64| start + n * 1_000_000;
        // (now, quantity, limited, remaining, reset_after_ns, retry_after_ns or -1)
        let cases: [(i64, i64, bool, i64, i64, i64); 15] = [
            (ms(0), 6, true, 5, 0, -1),
            (ms(0), 1, false, 4, 1_000, -1),
            (ms(0), 1, false, 3, 2_000, -1),
            (ms(0), 1, false, 2, 3_000, -1),
            (ms(0), 1, false, 1, 4_000, -1),
            (ms(0), 1, false, 0, 5_000, -1),
            (ms(0), 1, true, 0, 5_000, 1_000),
            (ms(3_000), 1, false, 2, 3_000, -1),
            (ms(3_100), 1, false, 1, 3_900, -1),
            (ms(4_000), 1, false, 1, 4_000, -1),
            (ms(8_000), 1, false, 4, 1_000, -1),
            (ms(9_500), 1, false, 4, 1_000, -1),
            (ms(9_500), 0, false, 4, 1_000, -1),
            (ms(9_500), 2, false, 2, 3_000, -1),
            (ms(9_500), 5, true, 2, 3_000, 3_000),
        ];
        let mut stored = None;
        for (i, &(now, quantity, limited, remaining, reset_ms, retry_ms)) in
            cases.iter().enumerate()
        {
            let d = decide(&r, stored, now, quantity).unwrap();
            let got = reply(&r, &d, stored, now);
            let secs = |ms: i64| {
                if ms < 0 {
                    -1
                } else {
                    ms / 1000 + i64::from(ms % 1000 > 0)
                }
            };
            assert_eq!(
                got,
                [
                    i64::from(limited),
                    5,
                    remaining,
                    secs(retry_ms),
                    secs(reset_ms)
                ],
                "case {i}"
            );
            // The raw durations too, before rounding.
            assert_eq!(d.allowed, !limited, "case {i}");
            if limited {
                assert_eq!(
                    stored.unwrap_or(now) - now,
                    reset_ms * 1_000_000,
                    "case {i}"
                );
            } else {
                assert_eq!(d.reset_after, reset_ms * 1_000_000, "case {i}");
            }
            if let Some(tat) = d.store {
                stored = Some(tat);
            }
        }
    }

    #[test]
    fn seconds_round_up_from_a_millisecond() {
        assert_eq!(seconds_rounded(0), 0);
        assert_eq!(seconds_rounded(999_999), 0);
        assert_eq!(seconds_rounded(1_000_000), 1);
        assert_eq!(seconds_rounded(1_000_000_000), 1);
        assert_eq!(seconds_rounded(1_000_999_999), 1);
        assert_eq!(seconds_rounded(1_001_000_000), 2);
        assert_eq!(seconds_rounded(-1_000_000_000), -1);
        assert_eq!(seconds_rounded(-500_000_000), 0);
    }

    #[test]
    fn remaining_divides_whole_microseconds() {
        // 3 per second: T = 333,333,333 ns. A TTL leaving exactly 2 intervals in
        // microseconds counts 2 in redis-cell's arithmetic, 1 in whole nanoseconds.
        let r = rate(4, 3, 1).unwrap();
        assert_eq!(r.interval, 333_333_333);
        let ttl = i128::from(r.tolerance) - 666_666_000;
        assert_eq!(remaining(&r, ttl), 2);
        // Past the tolerance by less than an interval: 0 (truncated toward zero).
        assert_eq!(remaining(&r, i128::from(r.tolerance) + 1_000), 0);
        assert_eq!(remaining(&r, i128::from(r.tolerance + r.interval)), 0);
        // Faster than a million per second: the nanosecond floor.
        let fast = rate(9, 2_000_000, 1).unwrap();
        assert_eq!(fast.interval, 500);
        assert_eq!(remaining(&fast, 0), 10);
    }

    #[test]
    fn refuses_what_redis_cell_cannot_compute() {
        assert_eq!(rate(-1, 1, 1), Err(Error::NotInteger));
        assert_eq!(rate(1, 0, 1), Err(Error::NotInteger));
        assert_eq!(rate(1, 1, 0), Err(Error::NotInteger));
        assert_eq!(
            rate(1, 2_000_000_000, 1),
            Err(crate::throttle::model::rate_too_high())
        );
        assert_eq!(
            rate(i64::MAX, 1, 1),
            Err(crate::throttle::model::burst_too_long())
        );
        assert_eq!(
            rate(0, 1, i64::MAX),
            Err(crate::throttle::model::burst_too_long())
        );
    }
}
