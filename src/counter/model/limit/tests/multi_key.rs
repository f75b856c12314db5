//! Unit tests of MLIMIT's decision over several keys.

use super::*;

/// The whole call waits for the first time every window of every key passes. With `AT` in
/// the past, a key that passes at `at` can fail later (a slot written after `at` enters),
/// so the largest of the keys' own waits is not always the answer.
#[test]
fn the_calls_wait_is_not_always_the_largest_of_the_keys_waits() {
    let now = T0 + 10_000;
    // Key a: 1 at T0 + 3s, after `at` = T0: passes at T0, fails from T0+3s to T0+8s.
    let (a, mut sa) = counter_with("1s:60", now, &[(T0 + 3_000, 1)]);
    // Key b: 1 at T0: fails until T0 leaves the 5s window, at T0+5s.
    let (b, mut sb) = counter_with("1s:60", now, &[(T0, 1)]);
    let limits = [(5_000, 1)];
    let alone_a = decide(&a, &mut sa, now, T0, 1, &limits).unwrap();
    let alone_b = decide(&b, &mut sb, now, T0, 1, &limits).unwrap();
    assert_eq!((alone_a.allowed, alone_b.retry_after_ms), (true, 5_000));
    let both = [
        check(&a, &mut sa, now, T0, 1, &limits, true).unwrap(),
        check(&b, &mut sb, now, T0, 1, &limits, true).unwrap(),
    ];
    let decision = decide_all(&both, false).unwrap();
    assert_eq!((decision.allowed, decision.retry_after_ms), (false, 8_000));
    assert_eq!(
        model_retry_all(
            &mut [(a, sa), (b, sb)],
            now,
            T0,
            1,
            &[&limits, &limits],
            20_000
        ),
        Some(8_000)
    );
}

/// A dry run finds the count an allowed increment would overflow, so a call over several
/// keys refuses before writing any of them.
#[test]
fn an_increment_that_would_overflow_a_count_is_an_error_before_any_write() {
    // The 1m resolution holds i64::MAX - 1 in the minute of T0; no window reads it.
    let (c, mut s) = counter_with("1s:60 1m:60", T0, &[]);
    s.0.insert((60_000, slot_index(T0, 60_000)), i64::MAX - 1);
    let fine = counter_with("1s:60", T0, &[]);
    let (fine_c, mut fine_s) = fine;
    let checks = [
        check(&fine_c, &mut fine_s, T0, T0, 2, &[(5_000, 5)], true).unwrap(),
        check(&c, &mut s, T0, T0, 2, &[(5_000, 5)], true).unwrap(),
    ];
    assert_eq!(decide_all(&checks, false), Err(Error::Overflow));
    // An increment of 1 fits.
    let checks = [check(&c, &mut s, T0, T0, 1, &[(5_000, 5)], true).unwrap()];
    assert!(decide_all(&checks, false).unwrap().allowed);
}

/// Brute force over several keys: the first `d` in `1..=horizon` at which every key's
/// pairs pass at `at + d`.
fn model_retry_all(
    keys: &mut [(Counter, MapStore)],
    now: i64,
    at: i64,
    increment: i64,
    limits: &[&[(i64, i64)]],
    horizon: i64,
) -> Option<i64> {
    (1..=horizon).find(|&d| {
        keys.iter_mut()
            .zip(limits)
            .all(|((c, s), limits)| passes(c, s, now, at + d, increment, limits))
    })
}

/// Random keys (1 to 4, each with its own resolutions and traffic, signed counts
/// backfilled into the past), random pairs per key, `at` now or in the past, DETAILS: the
/// decision over all keys agrees with SUM for the sums, with a real INCRBY of every key
/// followed by SUM for an allowed call, and with brute-force searches for the waiting time
/// and each window's reset. Where no count is negative and `at` is now, the call's wait is
/// also the largest of the keys' own waits.
#[test]
fn model_based_random_multi_key_limits() {
    let (mut checked, mut refused_with_wait, mut allowed) = (0, 0, 0);
    for seed in 1..=250u64 {
        let mut rng = Rng(seed ^ 0x5eed);
        let key_count = 1 + rng.below(4) as usize;
        let mut keys: Vec<(Counter, MapStore)> = Vec::new();
        for _ in 0..key_count {
            keys.push((random_counter(&mut rng), MapStore::ordered()));
        }
        let widest = keys
            .iter()
            .flat_map(|(c, _)| c.resolutions.iter().map(|r| r.span()))
            .max()
            .unwrap();
        let coarsest = keys
            .iter()
            .flat_map(|(c, _)| c.resolutions.iter().map(|r| r.ms))
            .max()
            .unwrap();
        let mut now = T0 + rng.below(100_000) - 50_000;
        let negatives = rng.below(3) == 0;
        for _ in 0..rng.below(120) {
            let (ts, by) = random_event(&mut rng, &mut now, widest, negatives);
            let k = rng.below(key_count as i64) as usize;
            let (c, s) = &mut keys[k];
            let _ = c.incrby(s, now, ts, by);
        }
        for _ in 0..5 {
            let at = match rng.below(3) {
                0 => now - rng.below(widest + 1),
                _ => now,
            };
            let increment = rng.below(6);
            let limits: Vec<Vec<(i64, i64)>> = keys
                .iter()
                .map(|(c, _)| {
                    let span = c.resolutions.iter().map(|r| r.span()).max().unwrap();
                    (0..1 + rng.below(3))
                        .map(|_| (1 + rng.below(span), rng.below(12 * key_count as i64)))
                        .collect()
                })
                .collect();
            let limit_refs: Vec<&[(i64, i64)]> = limits.iter().map(Vec::as_slice).collect();
            let context = format!("seed {seed} now {now} at {at} +{increment} {limits:?}");
            let checks: Vec<Check> = keys
                .iter_mut()
                .zip(&limits)
                .map(|((c, s), l)| check(c, s, now, at, increment, l, true).unwrap())
                .collect();
            let got = decide_all(&checks, true);
            let before: Vec<Vec<i64>> = keys
                .iter_mut()
                .zip(&limits)
                .map(|((c, s), l)| {
                    let windows: Vec<i64> = l.iter().map(|&(w, _)| w).collect();
                    c.sum(s, now, at, &windows).unwrap()
                })
                .collect();
            let passes = before.iter().zip(&limits).all(|(sums, l)| {
                sums.iter()
                    .zip(l)
                    .all(|(&sum, &(_, max))| sum + increment <= max)
            });
            let exceeds = limits.iter().flatten().any(|&(_, max)| increment > max);
            let horizon = (now - at) + widest + coarsest + 1;
            let mut after = keys.clone();
            let want_allowed = passes && !exceeds;
            if want_allowed && increment != 0 {
                let written: Result<Vec<i64>> = after
                    .iter_mut()
                    .map(|(c, s)| c.incrby(s, now, at, increment))
                    .collect();
                if let Err(e) = written {
                    assert_eq!(got, Err(e), "{context}");
                    checked += 1;
                    continue;
                }
            }
            let got = got.unwrap_or_else(|e| panic!("{context}: {e}"));
            let want_retry = if want_allowed {
                0
            } else if exceeds {
                -1
            } else {
                refused_with_wait += 1;
                model_retry_all(&mut keys, now, at, increment, &limit_refs, horizon)
                    .expect("a wait always helps when increment <= max")
            };
            allowed += usize::from(want_allowed);
            assert_eq!(
                (got.allowed, got.retry_after_ms),
                (want_allowed, want_retry),
                "{context}"
            );
            for (k, ((c, s), l)) in after.iter_mut().zip(&limits).enumerate() {
                let details = model_details(c, s, now, at, l, horizon);
                let sums: Vec<i64> = details.iter().map(|d| d[0]).collect();
                assert_eq!(
                    got.keys[k],
                    Outcome {
                        sums,
                        details: Some(details)
                    },
                    "{context} key {k}"
                );
            }
            if !negatives && at == now && !exceeds {
                let largest = keys
                    .iter_mut()
                    .zip(&limits)
                    .map(|((c, s), l)| decide(c, s, now, at, increment, l).unwrap().retry_after_ms)
                    .max()
                    .unwrap();
                assert_eq!(got.retry_after_ms, largest, "{context}");
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 1_000 && refused_with_wait >= 200 && allowed >= 200,
        "{checked} {refused_with_wait} {allowed}"
    );
}
