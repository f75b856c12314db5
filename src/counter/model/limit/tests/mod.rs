//! Unit tests of the parent module.

use super::*;
use crate::counter::model::{parse_resolution_text, Resolution};
use crate::testutil::{MapStore, Rng};

mod multi_key;

fn res(text: &str) -> Vec<Resolution> {
    parse_resolution_text(text).unwrap()
}

const T0: i64 = 1_700_000_000_000;

/// A counter with `count` added at each `(ts, count)`, the clock at `now`.
fn counter_with(text: &str, now: i64, events: &[(i64, i64)]) -> (Counter, MapStore) {
    let mut c = Counter::new(res(text));
    let mut s = MapStore::ordered();
    for &(ts, by) in events {
        c.incrby(&mut s, now, ts, by).unwrap();
    }
    (c, s)
}

fn decision(allowed: bool, retry_after_ms: i64, sums: &[i64]) -> Decision {
    Decision {
        allowed,
        retry_after_ms,
        keys: vec![Outcome {
            sums: sums.to_vec(),
            details: None,
        }],
    }
}

#[test]
fn room_in_every_window_is_allowed_with_the_increment_in_the_sums() {
    let now = T0 + 500;
    let (c, mut s) = counter_with("1s:60 1m:60", now, &[(T0 - 3_000, 2), (T0, 1)]);
    assert_eq!(
        decide(&c, &mut s, now, now, 1, &[(5_000, 5), (60_000, 100)]),
        Ok(decision(true, 0, &[4, 4]))
    );
    // Exactly reaching the max is allowed.
    assert_eq!(
        decide(&c, &mut s, now, now, 2, &[(5_000, 5)]),
        Ok(decision(true, 0, &[5]))
    );
}

#[test]
fn a_full_window_refuses_until_enough_count_has_left() {
    // 1s slots; a 5s window at T0 + 500 covers the slots of T0-4s ..= T0.
    let now = T0 + 500;
    let (c, mut s) = counter_with(
        "1s:60",
        now,
        &[(T0 - 4_000, 2), (T0 - 2_000, 1), (T0 - 1_000, 1), (T0, 1)],
    );
    // 5 + 1 > 5. The slot of T0-4s leaves when the clock reaches T0 + 1s: d = 500 ms,
    // and then 3 + 1 <= 5.
    assert_eq!(
        decide(&c, &mut s, now, now, 1, &[(5_000, 5)]),
        Ok(decision(false, 500, &[5]))
    );
    // Needing 3 more: T0-4s leaving frees only 2; T0-2s leaves at T0 + 3s.
    assert_eq!(
        decide(&c, &mut s, now, now, 3, &[(5_000, 5)]),
        Ok(decision(false, 2_500, &[5]))
    );
}

#[test]
fn an_increment_above_a_max_never_passes() {
    let (c, mut s) = counter_with("1s:60", T0, &[]);
    assert_eq!(
        decide(&c, &mut s, T0, T0, 6, &[(60_000, 100), (5_000, 5)]),
        Ok(decision(false, -1, &[0, 0]))
    );
}

#[test]
fn increment_zero_only_checks() {
    let (c, mut s) = counter_with("1s:60", T0, &[(T0, 5)]);
    assert_eq!(
        decide(&c, &mut s, T0, T0, 0, &[(5_000, 5)]),
        Ok(decision(true, 0, &[5]))
    );
    // Over the max already: refused until the slot of T0 leaves the 5 s window.
    assert_eq!(
        decide(&c, &mut s, T0 + 10, T0 + 10, 0, &[(5_000, 4)]),
        Ok(decision(false, 4_990, &[5]))
    );
    // Checking at a time no resolution keeps is no error: nothing would be written.
    assert_eq!(
        decide(&c, &mut s, T0, T0 - 3_600_000, 0, &[(5_000, 4)]),
        Ok(decision(true, 0, &[0]))
    );
}

#[test]
fn the_binding_window_need_not_be_the_first() {
    // 5 in 5s is free again soon, but 10 in 1m waits for the minute-old events.
    let now = T0 + 200;
    let (c, mut s) = counter_with(
        "1s:120 1m:120",
        now,
        &[(T0 - 50_000, 6), (T0 - 20_000, 3), (T0, 1)],
    );
    // 1m window on 1s slots: 60 slots ending with T0's; T0-50s leaves at T0 + 10 s.
    assert_eq!(
        decide(&c, &mut s, now, now, 1, &[(5_000, 5), (60_000, 10)]),
        Ok(decision(false, 9_800, &[1, 10]))
    );
    // A 3m window uses the 1m resolution (1s:120 spans only 2m): the minute holding
    // T0-50s leaves the 3-minute window three minutes after it started.
    let minute = slot_index(T0 - 50_000, 60_000);
    let leaves = (minute + 3) * 60_000 - now;
    assert_eq!(
        decide(&c, &mut s, now, now, 1, &[(5_000, 5), (180_000, 10)]),
        Ok(decision(false, leaves, &[1, 10]))
    );
}

#[test]
fn an_empty_counter_allows_up_to_the_max() {
    let c = Counter::new(res("1s:60 1m:60"));
    let mut s = MapStore::ordered();
    assert_eq!(
        decide(&c, &mut s, T0, T0, 5, &[(5_000, 5), (3_600_000, 7)]),
        Ok(decision(true, 0, &[5, 5]))
    );
}

#[test]
fn bad_arguments_are_errors() {
    let c = Counter::new(res("1s:60"));
    let mut s = MapStore::ordered();
    assert_eq!(
        decide(&c, &mut s, T0, T0, -1, &[(5_000, 5)]),
        Err(Error::NotInteger)
    );
    assert_eq!(
        decide(&c, &mut s, T0, T0, 1, &[(5_000, -5)]),
        Err(Error::NotInteger)
    );
    assert!(decide(&c, &mut s, T0, T0, 1, &[(61_000, 5)]).is_err());
    // Allowed, but no resolution keeps the time: the INCRBY would be refused.
    assert_eq!(
        decide(&c, &mut s, T0, T0 - 61_000, 1, &[(5_000, 5)]),
        Err(Error::OutsideKeptRange)
    );
}

/// Negative counts make a window pass and fail again as slots leave: the answer is the
/// first time every window passes, not the first time each one alone does.
#[test]
fn negative_counts_can_refuse_again_later() {
    let now = T0 + 100;
    // 1s slots, 3s window: T0-2s: +5, T0-1s: -4, T0: +3. Sum 4.
    let (c, mut s) = counter_with("1s:60", now, &[(T0 - 2_000, 5), (T0 - 1_000, -4), (T0, 3)]);
    // max 3: at T0+1s the +5 leaves (sum -1: passes).
    assert_eq!(
        decide(&c, &mut s, now, now, 0, &[(3_000, 3)]),
        Ok(decision(false, 900, &[4]))
    );
    // Add a 2s window, max 2: it passes now (-1) but fails at T0+1s (3) when the 3s
    // window first passes; both pass at T0+2s (3 and 0). Each window alone would
    // wait 900 and 0 ms: the largest of those is not the answer.
    assert_eq!(
        decide(&c, &mut s, now, now, 0, &[(3_000, 3), (2_000, 2)]),
        Ok(decision(false, 1_900, &[4, -1]))
    );
}

/// With `AT` in the past, slots written after `at` enter the window as time moves on.
#[test]
fn later_slots_enter_when_at_is_in_the_past() {
    let now = T0 + 2_500;
    let (c, mut s) = counter_with("1s:60", now, &[(T0, 1), (T0 + 2_000, 4)]);
    // At T0 + 500 the 5 s window holds 1; the slot of T0 leaves at T0 + 5 s, but the
    // 4 of T0 + 2 s has entered by then and stays until T0 + 7 s.
    assert_eq!(
        decide(&c, &mut s, now, T0 + 500, 1, &[(5_000, 1)]),
        Ok(decision(false, 6_500, &[1]))
    );
    // The same call, checked at the clock: the sums count the later slot.
    assert_eq!(
        decide(&c, &mut s, now, now, 1, &[(5_000, 1)]),
        Ok(decision(false, 4_500, &[5]))
    );
}

#[test]
fn extreme_times_do_not_overflow() {
    for text in ["1ms:10000", "1ms:3 7ms:5 1d:2"] {
        let c = Counter::new(res(text));
        for at in [i64::MIN, i64::MIN + 1, -1, 0, i64::MAX - 1, i64::MAX] {
            let mut s = MapStore::ordered();
            let mut writer = c.clone();
            let _ = writer.incrby(&mut s, at, at, i64::MAX);
            let _ = writer.incrby(&mut s, at, at.saturating_sub(1), i64::MAX);
            for increment in [0, 1, i64::MAX] {
                let got = decide(&c, &mut s, at, at, increment, &[(1, 0), (2, i64::MAX)]);
                let _ = decide(&writer, &mut s, at, at, increment, &[(1, 5), (3, 7)]);
                if let Ok(d) = got {
                    assert!(d.retry_after_ms >= -1);
                }
            }
        }
    }
}

/// Brute force: the first `d` in `1..=horizon` at which SUM at `at + d` (clock at
/// `max(now, at + d)`) passes every pair; `None` if none does.
fn model_retry(
    c: &Counter,
    s: &mut MapStore,
    now: i64,
    at: i64,
    increment: i64,
    limits: &[(i64, i64)],
    horizon: i64,
) -> Option<i64> {
    (1..=horizon).find(|&d| passes(c, s, now, at + d, increment, limits))
}

/// Whether SUM at `t` (clock at `max(now, t)`) plus `increment` passes every pair.
fn passes(
    c: &Counter,
    s: &mut MapStore,
    now: i64,
    t: i64,
    increment: i64,
    limits: &[(i64, i64)],
) -> bool {
    let windows: Vec<i64> = limits.iter().map(|&(w, _)| w).collect();
    let sums = c.sum(s, now.max(t), t, &windows).unwrap();
    sums.iter()
        .zip(limits)
        .all(|(&sum, &(_, max))| sum + increment <= max)
}

/// A counter of 1 to 3 random resolutions (1 to 40 ms, 1 to 30 samples each).
fn random_counter(rng: &mut Rng) -> Counter {
    let mut resolutions: Vec<(i64, i64)> = Vec::new();
    for _ in 0..1 + rng.below(3) {
        let ms = 1 + rng.below(40);
        if resolutions.iter().all(|&(r, _)| r != ms) {
            resolutions.push((ms, 1 + rng.below(30)));
        }
    }
    let text: Vec<String> = resolutions
        .iter()
        .map(|(ms, samples)| format!("{ms}ms:{samples}"))
        .collect();
    Counter::new(res(&text.join(" ")))
}

/// The next event of a random workload, `(ts, count)`: the clock `now` moves on by up to
/// an eighth of `widest`, the event lands up to `widest` in the past, its count signed
/// when `negatives`.
fn random_event(rng: &mut Rng, now: &mut i64, widest: i64, negatives: bool) -> (i64, i64) {
    *now += rng.below(widest / 8 + 1);
    let ts = *now - rng.below(widest + 1);
    let by = if negatives {
        rng.below(9) - 3
    } else {
        1 + rng.below(4)
    };
    (ts, by)
}

/// Random resolutions, random signed increments backfilled into the past, random
/// pairs, `at` now or in the past: `decide` agrees with SUM for the sums, with a real
/// INCRBY followed by SUM for the sums after an allowed call, and with the brute-force
/// search for the waiting time.
#[test]
fn model_based_random_limits() {
    let mut checked = 0;
    let mut refused_with_wait = 0;
    for seed in 1..=300u64 {
        let mut rng = Rng(seed);
        let mut c = random_counter(&mut rng);
        let mut s = MapStore::ordered();
        let widest = c.resolutions.iter().map(|r| r.span()).max().unwrap();
        let coarsest = c.resolutions.iter().map(|r| r.ms).max().unwrap();
        let mut now = T0 + rng.below(100_000) - 50_000;
        let negatives = rng.below(3) == 0;
        for _ in 0..rng.below(80) {
            let (ts, by) = random_event(&mut rng, &mut now, widest, negatives);
            let _ = c.incrby(&mut s, now, ts, by);
        }
        for _ in 0..6 {
            let at = match rng.below(3) {
                0 => now - rng.below(widest + 1),
                _ => now,
            };
            let limits: Vec<(i64, i64)> = (0..1 + rng.below(4))
                .map(|_| (1 + rng.below(widest), rng.below(25)))
                .collect();
            let increment = rng.below(6);
            let windows: Vec<i64> = limits.iter().map(|&(w, _)| w).collect();
            let got = decide(&c, &mut s, now, at, increment, &limits);
            let before = c.sum(&mut s, now, at, &windows).unwrap();
            let passes = before
                .iter()
                .zip(&limits)
                .all(|(&sum, &(_, max))| sum + increment <= max);
            let context = format!("seed {seed} now {now} at {at} +{increment} {limits:?}");
            if limits.iter().any(|&(_, max)| increment > max) {
                assert_eq!(got, Ok(decision(false, -1, &before)), "{context}");
            } else if passes {
                let mut after_counter = c.clone();
                let mut after_store = s.clone();
                let written = if increment == 0 {
                    Ok(0)
                } else {
                    after_counter.incrby(&mut after_store, now, at, increment)
                };
                match written {
                    Ok(_) => {
                        let after = after_counter
                            .sum(&mut after_store, now, at, &windows)
                            .unwrap();
                        assert_eq!(got, Ok(decision(true, 0, &after)), "{context}");
                    }
                    Err(e) => assert_eq!(got, Err(e), "{context}"),
                }
            } else {
                // Every slot has left every window once the newest slot is past the
                // one containing `now` by a whole span.
                let horizon = (now - at) + widest + coarsest + 1;
                let want = model_retry(&c, &mut s, now, at, increment, &limits, horizon);
                let want = want.expect("a wait always helps when increment <= max");
                assert_eq!(got, Ok(decision(false, want, &before)), "{context}");
                refused_with_wait += 1;
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 1_000 && refused_with_wait >= 200,
        "{refused_with_wait}"
    );
}

/// `[sum, remaining, reset_ms]` of each window of `limits` on the counter at `at` (clock
/// `now`), by brute force: the sums as SUM gives them, and the first `d` in `1..=horizon`
/// at which SUM at `at + d` (clock at `max(now, at + d)`) is below SUM at `at + d - 1`.
fn model_details(
    c: &Counter,
    s: &mut MapStore,
    now: i64,
    at: i64,
    limits: &[(i64, i64)],
    horizon: i64,
) -> Vec<[i64; 3]> {
    limits
        .iter()
        .map(|&(window, max)| {
            let sum_at = |s: &mut MapStore, t: i64| c.sum(s, now.max(t), t, &[window]).unwrap()[0];
            let sum = sum_at(s, at);
            let mut reset = 0;
            if sum != 0 {
                let mut before = sum;
                for d in 1..=horizon {
                    let later = sum_at(s, at + d);
                    if later < before {
                        reset = d;
                        break;
                    }
                    before = later;
                }
            }
            [sum, (max - sum).max(0), reset]
        })
        .collect()
}

#[test]
fn details_give_room_and_when_the_sum_next_falls() {
    // 1s slots; a 5s window at T0 + 500 covers the slots of T0-4s ..= T0.
    let now = T0 + 500;
    let (c, mut s) = counter_with("1s:60", now, &[(T0 - 4_000, 2), (T0 - 2_000, 1), (T0, 1)]);
    let read = check(&c, &mut s, now, now, 1, &[(5_000, 5), (2_000, 1)], false).unwrap();
    // Refused by the 2s window (1 + 1 > 1). The 5s sum falls when T0-4s leaves (newest
    // slot T0+1s: 500 ms from now); the 2s sum when T0 leaves (T0+2s).
    assert_eq!(
        decide_all(&[read], true),
        Ok(Decision {
            allowed: false,
            retry_after_ms: 1_500,
            keys: vec![Outcome {
                sums: vec![4, 1],
                details: Some(vec![[4, 1, 500], [1, 0, 1_500]]),
            }],
        })
    );
    // Allowed: the sums and the room count the increment; an empty window's sum that the
    // increment starts falls when the slot of `at` leaves.
    let (c, mut s) = counter_with("1s:60", now, &[]);
    let read = check(&c, &mut s, now, now, 2, &[(5_000, 5)], false).unwrap();
    assert_eq!(
        decide_all(&[read], true).map(|d| d.keys),
        Ok(vec![Outcome {
            sums: vec![2],
            details: Some(vec![[2, 3, 4_500]]),
        }])
    );
    // A check (increment 0) of an empty window: reset 0.
    let read = check(&c, &mut s, now, now, 0, &[(5_000, 5)], false).unwrap();
    assert_eq!(
        decide_all(&[read], true).map(|d| d.keys),
        Ok(vec![Outcome {
            sums: vec![0],
            details: Some(vec![[0, 5, 0]]),
        }])
    );
}

/// A call answered from the sums alone decides as the full check does, on random counters
/// (negative counts, `AT` in the past, windows beyond the kept span, maxima around the sums).
#[test]
fn sums_only_decides_as_the_full_check() {
    let mut answered = 0;
    for seed in 0..300u64 {
        let mut rng = Rng(seed);
        let now = T0 + rng.below(60_000);
        let events: Vec<(i64, i64)> = (0..rng.below(40))
            .map(|_| (now - rng.below(600_000), rng.below(20) - 3))
            .collect();
        let (c, mut s) = counter_with("1s:60 10s:30 1m:20", now, &events);
        let at = now - rng.below(30_000);
        let increment = rng.below(5);
        let limits: Vec<(i64, i64)> = (0..1 + rng.below(4))
            .map(|_| {
                let window = [1_000, 5_000, 60_000, 300_000, 1_200_000][rng.below(5) as usize];
                (window, rng.below(60))
            })
            .collect();
        let full = check(&c, &mut s, now, at, increment, &limits, false)
            .and_then(|read| decide_all(&[read], false));
        match check_sums_only(&c, &mut s, now, at, increment, &limits, false) {
            Ok(Some(read)) => {
                answered += 1;
                assert_eq!(decide_all(&[read], false), full, "seed {seed}");
            }
            Ok(None) => assert!(full.is_ok_and(|d| !d.allowed && d.retry_after_ms >= 0)),
            Err(e) => assert_eq!(Err(e), full, "seed {seed}"),
        }
        // DETAILS always needs the slots.
        assert!(matches!(
            check_sums_only(&c, &mut s, now, at, increment, &limits, true),
            Ok(None) | Err(_)
        ));
    }
    assert!(answered > 100, "{answered}");
}
