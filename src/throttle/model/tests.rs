//! The GCRA against a brute-force leaky bucket, then its edges: a million per second,
//! bursts of 0, quantities above the burst, a TAT far in the future, arithmetic at the
//! limits of `i64` nanoseconds.

use proptest::prelude::*;

use super::*;

/// A bucket of capacity `tau` that drains one nanosecond per nanosecond; a request of `q`
/// pours `q * T` into it if it fits. Every answer is found by trying, not by formula.
struct Bucket {
    level: i128,
    at: i128,
    interval: i128,
    tau: i128,
}

impl Bucket {
    fn drained(&self, now: i128) -> i128 {
        (self.level - (now - self.at)).max(0)
    }

    fn request(&mut self, now: i128, q: i128) -> (bool, i64, i64, i64) {
        self.level = self.drained(now);
        self.at = now;
        let fits = |level: i128| level + q * self.interval <= self.tau;
        let allowed = fits(self.level);
        if allowed {
            self.level += q * self.interval;
        }
        let retry = if allowed {
            0
        } else if q * self.interval > self.tau {
            -1
        } else {
            (0..).find(|&w| fits((self.level - w).max(0))).unwrap()
        };
        let reset = (0..).find(|&w| self.level - w <= 0).unwrap();
        let remaining = (0..)
            .find(|&k| self.level + (k + 1) * self.interval > self.tau)
            .unwrap();
        (allowed, remaining as i64, retry as i64, reset as i64)
    }
}

const BASE: i64 = 1_764_000_000_000_000_000;

#[test]
fn small_rates_answer_as_the_bucket() {
    let mut runs = 0;
    for interval in 1..=4i64 {
        for max_burst in 0..=3i64 {
            for seed in 0..40u64 {
                let rate = Rate::with_interval(max_burst, i128::from(interval)).unwrap();
                let mut bucket = Bucket {
                    level: 0,
                    at: i128::from(BASE),
                    interval: i128::from(interval),
                    tau: i128::from(rate.tolerance),
                };
                let mut stored: Option<i64> = None;
                let mut now = BASE;
                let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                for step in 0..60 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    now += (x % 7) as i64;
                    let q = ((x >> 8) % 7) as i64;
                    // The key may have expired at its TAT (or not yet been reclaimed).
                    if stored.is_some_and(|tat| tat <= now) && (x >> 16) % 2 == 0 {
                        stored = None;
                    }
                    let d = decide(&rate, stored, now, q).unwrap();
                    let (allowed, remaining, retry, reset) =
                        bucket.request(i128::from(now), i128::from(q));
                    let at = format!("T={interval} burst={max_burst} seed={seed} step={step}");
                    assert_eq!(d.allowed, allowed, "{at}");
                    assert_eq!(d.remaining, remaining, "{at}");
                    assert_eq!(d.retry_after, retry, "{at}");
                    assert_eq!(d.reset_after, reset, "{at}");
                    assert_eq!(d.limit, max_burst + 1);
                    assert_eq!(d.store.is_some(), allowed && q > 0, "{at}");
                    if let Some(tat) = d.store {
                        assert_eq!(tat, now + reset, "{at}");
                        stored = Some(tat);
                    }
                    runs += 1;
                }
            }
        }
    }
    assert_eq!(runs, 4 * 4 * 40 * 60);
}

#[test]
fn a_million_per_second() {
    let rate = Rate::new(999, 1_000_000, 1_000_000_000).unwrap();
    assert_eq!(
        (rate.interval, rate.tolerance, rate.limit),
        (1_000, 1_000_000, 1_000)
    );
    let mut stored = None;
    for i in 0..1_000 {
        let d = decide(&rate, stored, BASE, 1).unwrap();
        assert!(d.allowed);
        assert_eq!(d.remaining, 999 - i);
        stored = d.store;
    }
    let refused = decide(&rate, stored, BASE, 1).unwrap();
    assert_eq!(
        reply(&refused),
        [0, 1_000, 0, 1, 1],
        "retry after 1 us, rounded up to 1 ms"
    );
    assert_eq!(refused.retry_after, 1_000);
    // One interval later, one more fits.
    let later = decide(&rate, stored, BASE + 1_000, 1).unwrap();
    assert!(later.allowed);
    assert_eq!(later.remaining, 0);
    // A billion per second is an interval of 1 ns; two billion would be 0.
    assert_eq!(
        Rate::new(0, 1_000_000_000, 1_000_000_000).unwrap().interval,
        1
    );
    assert_eq!(
        Rate::new(0, 2_000_000_000, 1_000_000_000),
        Err(rate_too_high())
    );
}

#[test]
fn a_burst_of_zero_admits_one_per_interval() {
    let rate = Rate::new(0, 1, 1_000_000_000).unwrap();
    let first = decide(&rate, None, BASE, 1).unwrap();
    assert_eq!(reply(&first), [1, 1, 0, 0, 1_000]);
    let second = decide(&rate, first.store, BASE + 400_000_000, 1).unwrap();
    assert_eq!(reply(&second), [0, 1, 0, 600, 600]);
    assert_eq!(second.store, None);
    let third = decide(&rate, first.store, BASE + 1_000_000_000, 1).unwrap();
    assert!(third.allowed);
    // Two at once never fit a burst of 0.
    let two = decide(&rate, None, BASE, 2).unwrap();
    assert_eq!(reply(&two), [0, 1, 1, -1, 0]);
}

#[test]
fn quantities_above_the_burst_never_fit() {
    let rate = Rate::new(4, 10, 1_000_000_000).unwrap();
    let some = decide(&rate, None, BASE, 3).unwrap();
    for q in [6, 7, 1_000, i64::MAX / 2, i64::MAX] {
        let d = decide(&rate, some.store, BASE, q).unwrap();
        assert_eq!(reply(&d), [0, 5, 2, -1, 300], "q={q}");
        assert_eq!(d.store, None);
    }
    // Exactly the burst fits an empty bucket.
    assert!(decide(&rate, None, BASE, 5).unwrap().allowed);
}

#[test]
fn a_tat_far_in_the_future_refuses_until_it_nears() {
    let rate = Rate::new(4, 1, 1_000_000_000).unwrap();
    let century = 100 * 365 * 86_400 * 1_000_000_000i64;
    let d = decide(&rate, Some(BASE + century), BASE, 1).unwrap();
    assert!(!d.allowed);
    assert_eq!(d.reset_after, century);
    assert_eq!(d.retry_after, century + 1_000_000_000 - 5_000_000_000);
    assert_eq!(d.remaining, 0);
    // A forged TAT at the end of time: still an answer, never an overflow.
    let end = decide(&rate, Some(i64::MAX), BASE, 1).unwrap();
    assert!(!end.allowed);
    assert_eq!(end.reset_after, i64::MAX - BASE);
    assert_eq!(end.retry_after, i64::MAX - BASE - 4_000_000_000);
    let peek = decide(&rate, Some(i64::MAX), BASE, 0).unwrap();
    assert!(!peek.allowed);
    assert_eq!(peek.store, None);
}

#[test]
fn time_going_backwards_counts_from_the_stored_tat() {
    let rate = Rate::new(2, 1, 1_000_000_000).unwrap();
    let first = decide(&rate, None, BASE, 1).unwrap();
    // A request from before the first (an `AT` in the past) sees the TAT further away.
    let earlier = decide(&rate, first.store, BASE - 500_000_000, 1).unwrap();
    assert!(earlier.allowed);
    assert_eq!(earlier.reset_after, 2_500_000_000);
    assert_eq!(earlier.remaining, 0);
    let refused = decide(&rate, earlier.store, BASE - 500_000_000, 1).unwrap();
    assert_eq!(refused.retry_after, 500_000_000);
}

#[test]
fn arithmetic_past_the_year_2262_is_refused_clearly() {
    let year = 365 * 86_400 * 1_000_000_000i128;
    // 10,000 years in one burst: the tolerance itself does not fit.
    assert_eq!(Rate::new(0, 1, 10_000 * year), Err(burst_too_long()));
    assert_eq!(Rate::new(i64::MAX, 1, 1), Err(burst_too_long()));
    assert_eq!(Rate::new(i64::MAX - 1, 1, 2), Err(burst_too_long()));
    // 250 years fits a tolerance, but not counted from 2025.
    let rate = Rate::new(0, 1, 250 * year).unwrap();
    assert_eq!(decide(&rate, None, BASE, 1), Err(burst_too_long()));
    // 200 years fits both.
    let rate = Rate::new(0, 1, 200 * year).unwrap();
    let d = decide(&rate, None, BASE, 1).unwrap();
    assert_eq!(d.store, Some(BASE + rate.interval));
    assert_eq!(Rate::new(-1, 1, 1), Err(Error::NotInteger));
    assert_eq!(Rate::new(0, 0, 1), Err(Error::NotInteger));
    assert_eq!(decide(&rate, None, BASE, -1), Err(Error::NotInteger));
}

#[test]
fn milliseconds_round_up() {
    assert_eq!(ms_rounded_up(0), 0);
    assert_eq!(ms_rounded_up(1), 1);
    assert_eq!(ms_rounded_up(1_000_000), 1);
    assert_eq!(ms_rounded_up(1_000_001), 2);
    assert_eq!(ms_rounded_up(-1), -1);
    assert_eq!(ms_rounded_up(i64::MAX), i64::MAX / 1_000_000 + 1);
}

#[test]
fn request_times_and_expiry() {
    let server = 1_700_000_000_123_456_789i64;
    assert_eq!(request_time(None, server, 60_000), Ok(server));
    assert_eq!(
        request_time(Some(1_700_000_000_000), server, 60_000),
        Ok(1_700_000_000_000_000_000)
    );
    // Ahead within max-future: the server's now; further: refused.
    assert_eq!(
        request_time(Some(1_700_000_060_000), server, 60_000),
        Ok(server)
    );
    assert_eq!(
        request_time(Some(1_700_000_060_124), server, 60_000),
        Err(Error::TooFarInFuture)
    );
    // At the server's now the key expires at its TAT (ms rounded up)...
    assert_eq!(expires_at_ms(server, server, server), 1_700_000_000_124);
    assert_eq!(expires_at_ms(2_000_000, server, server), 2);
    // ... and a request a second in the past leaves a key that lives a second longer.
    let past = server - 1_000_000_000;
    assert_eq!(expires_at_ms(past + 5, past, server), 1_700_000_000_124);
    assert_eq!(expires_at_ms(i64::MAX, 0, i64::MAX), 18_446_744_073_710);
}

#[test]
fn stored_values() {
    assert_eq!(
        parse_tat(b"1700000000000000000"),
        Some(1_700_000_000_000_000_000)
    );
    assert_eq!(parse_tat(b"0"), Some(0));
    for bad in [
        &b""[..],
        b"-1",
        b"abc",
        b"1.5",
        b" 1",
        b"01",
        b"99999999999999999999",
    ] {
        assert_eq!(parse_tat(bad), None, "{bad:?}");
    }
}

proptest! {
    /// Any numbers at all: an answer or a clear error, never a panic, and the answer within
    /// its bounds.
    #[test]
    fn never_panics(
        max_burst in prop_oneof![0..10i64, any::<i64>()],
        count in prop_oneof![1..10i64, any::<i64>()],
        period in prop_oneof![1..10_000i128, 1..400_000_000_000_000_000_000_000i128],
        stored in proptest::option::of(prop_oneof![0..i64::MAX, BASE..BASE + 1_000_000_000_000]),
        now in prop_oneof![0..i64::MAX, BASE..BASE + 1_000_000_000_000],
        quantity in prop_oneof![0..10i64, any::<i64>()],
    ) {
        if let Ok(rate) = Rate::new(max_burst, count, period) {
            if let Ok(d) = decide(&rate, stored, now, quantity) {
                prop_assert!(d.remaining >= 0 && d.remaining <= rate.limit);
                // Within the tolerance, or the stored TAT's distance when that is further.
                let stored_distance = stored.map_or(0, |tat| tat.saturating_sub(now));
                prop_assert!(d.reset_after >= 0);
                prop_assert!(d.reset_after <= rate.tolerance.max(stored_distance));
                prop_assert!(d.retry_after >= -1);
                if let Some(tat) = d.store {
                    prop_assert!(tat > now || (quantity == 0));
                    prop_assert!(tat - now <= rate.tolerance);
                }
                let _ = reply(&d);
                let _ = cell::reply(&rate, &d, stored, now);
                let _ = expires_at_ms(d.store.unwrap_or(now), now, now.saturating_add(now));
            }
        }
        let _ = cell::rate(max_burst, count, period as i64);
    }
}

/// TSTHROTTLE.ALLOW's period takes a unit: a bare number (redis-cell's seconds) is refused,
/// saying why, instead of being read as milliseconds.
#[test]
fn periods_need_a_unit() {
    assert_eq!(parse_period(b"60s"), Ok(60_000));
    assert_eq!(parse_period(b"1m"), Ok(60_000));
    assert_eq!(parse_period(b"500ms"), Ok(500));
    assert_eq!(
        parse_period(b"60").map_err(|e| e.to_string()),
        Err(
            "ERR invalid duration '60': TSTHROTTLE.ALLOW's period needs a unit (60s, 1m, \
             500ms): CL.THROTTLE takes seconds, so a bare number here is refused rather than \
             read as ms"
                .into()
        )
    );
    assert!(matches!(
        parse_period(b"0"),
        Err(Error::DurationHint(_, PERIOD_FORM))
    ));
    assert!(matches!(
        parse_period(b"1M"),
        Err(Error::DurationHint(_, crate::args::DURATION_FORM))
    ));
}
