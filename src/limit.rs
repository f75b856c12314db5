//! Pure arithmetic of `TSCOUNTER.LIMIT`: decides a multi-window rate-limit call and how
//! long a refused caller must wait. No Redis imports; reads the counter through
//! [`SlotStore`] and never writes (the command layer applies the increment with
//! [`Counter::incrby`] when the call is allowed).
//!
//! Waiting time. With nothing else written, the sum of one window changes only when its
//! resolution's slot boundaries are crossed: a stored slot enters the window when the
//! window's newest slot reaches it (slots after the one containing `at` exist when `AT`
//! is in the past) and leaves `k = ceil(window / res)` slots later. Slot counts may be
//! negative (`INCRBY` takes any sign), so a window can pass and fail again as time moves:
//! each window yields the sorted time intervals in which it fails, and the answer is the
//! first time after `at` outside all of them.

use crate::counter::{collect_ordered, Counter, SlotStore};
use crate::error::{Error, Result};
use crate::window::{first_kept, slot_index, slots_covering};

/// Most `window max` pairs one call may carry.
pub const MAX_LIMITS: usize = 16;

/// Outcome of one `LIMIT` call, in the order of its reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// True if every window has room for the increment (the caller then applies it).
    pub allowed: bool,
    /// 0 when allowed; -1 when the increment exceeds some `max` (no wait helps); else the
    /// smallest `d >= 1` after which the same call would be allowed, nothing else written.
    pub retry_after_ms: i64,
    /// Each window's sum after the call, in argument order: with the increment when it is
    /// allowed and the window's resolution keeps `at` (where the increment lands).
    pub sums: Vec<i64>,
}

/// One `window max` pair, resolved to slot indexes of the resolution SUM uses for it.
struct Window {
    res_ms: i64,
    /// Slots the window covers, `ceil(window / res_ms)`.
    slots: i64,
    /// Oldest slot counted at `at`: the window's oldest, or the oldest kept at `now`.
    first: i64,
    /// The slot containing `at`, newest of the window.
    last: i64,
    max: i64,
    /// True if the resolution keeps `at` at `now`, so `INCRBY ... AT at` adds to it.
    receives_increment: bool,
}

/// Decides `TSCOUNTER.LIMIT` at time `at` for a server clock `now` (`at <= now`; a later
/// `at` moves the clock to `at`). `limits` are `(window ms, max)` pairs; the sums are those of
/// `TSCOUNTER.SUM window AT at`, so they count only slots still kept at `now`. The call is
/// allowed iff `sum + increment <= max` for every pair. Reads the store once; never writes.
///
/// `retry_after_ms` of a refused call is the first `d >= 1` at which the same call, at time
/// `at + d` with the clock at `max(now, at + d)`, would be allowed. Slots after the one
/// containing `now` are not considered (tally never writes them). If no such time fits in
/// an `i64` (only for `at` within a few windows of `i64::MAX`), it is -1, as when no wait
/// helps.
///
/// Errors: a negative `increment` or `max` (`NotInteger`), a window no resolution spans (as
/// SUM), a sum outside `i64` (`Overflow`), and an allowed non-zero increment at a time no
/// resolution keeps (`OutsideKeptRange`, as the `INCRBY` it would run).
pub fn decide(
    counter: &Counter,
    store: &mut dyn SlotStore,
    now: i64,
    at: i64,
    increment: i64,
    limits: &[(i64, i64)],
) -> Result<Decision> {
    if increment < 0 || limits.iter().any(|&(_, max)| max < 0) {
        return Err(Error::NotInteger);
    }
    let now = now.max(at);
    let mut windows = Vec::with_capacity(limits.len());
    for &(window, max) in limits {
        let res = counter.resolution_for(window)?;
        let slots = slots_covering(window, res.ms).max(0);
        let last = slot_index(at, res.ms);
        let kept_from = first_kept(now, res.ms, res.samples);
        windows.push(Window {
            res_ms: res.ms,
            slots,
            first: last.saturating_sub(slots.saturating_sub(1)).max(kept_from),
            last,
            max,
            receives_increment: last >= kept_from,
        });
    }
    // One ordered read per resolution, from the oldest slot any of its windows counts at
    // `at` to the slot containing `now`: at most `samples` slots, since all are kept.
    let mut spans: Vec<(i64, i64, i64)> = Vec::new();
    for w in &windows {
        match spans.iter_mut().find(|span| span.0 == w.res_ms) {
            Some(span) => span.1 = span.1.min(w.first),
            None => spans.push((w.res_ms, w.first, slot_index(now, w.res_ms))),
        }
    }
    let stored = collect_ordered(store, &spans);
    let window_slots: Vec<&[(i64, i64)]> = windows
        .iter()
        .map(|w| {
            let all = spans
                .iter()
                .position(|span| span.0 == w.res_ms)
                .and_then(|at| stored.get(at))
                .map_or(&[][..], |slots| slots.as_slice());
            let from = all.partition_point(|&(index, _)| index < w.first);
            all.get(from..).unwrap_or(&[])
        })
        .collect();
    let sums: Vec<i128> = windows
        .iter()
        .zip(&window_slots)
        .map(|(w, slots)| {
            slots
                .iter()
                .take_while(|&&(index, _)| index <= w.last)
                .map(|&(_, count)| i128::from(count))
                .sum()
        })
        .collect();
    let plain_sums = sums
        .iter()
        .map(|&s| i64::try_from(s).map_err(|_| Error::Overflow))
        .collect::<Result<Vec<i64>>>()?;
    let increment_wide = i128::from(increment);
    if windows.iter().any(|w| increment > w.max) {
        return Ok(Decision {
            allowed: false,
            retry_after_ms: -1,
            sums: plain_sums,
        });
    }
    let passes = |sum: i128, max: i64| sum + increment_wide <= i128::from(max);
    if windows.iter().zip(&sums).all(|(w, &s)| passes(s, w.max)) {
        let kept_somewhere = counter
            .resolutions
            .iter()
            .any(|r| slot_index(at, r.ms) >= first_kept(now, r.ms, r.samples));
        if increment != 0 && !kept_somewhere {
            return Err(Error::OutsideKeptRange);
        }
        // Allowed: every sum plus the increment is at most its max, so it fits an i64.
        let sums = windows
            .iter()
            .zip(plain_sums)
            .map(|(w, s)| {
                if w.receives_increment {
                    s.saturating_add(increment)
                } else {
                    s
                }
            })
            .collect();
        return Ok(Decision {
            allowed: true,
            retry_after_ms: 0,
            sums,
        });
    }
    let walks = windows
        .iter()
        .zip(&window_slots)
        .zip(&sums)
        .map(|((w, slots), &sum)| FailingTimes::new(w, slots, sum, at, increment).peekable())
        .collect();
    let wait = first_time_outside(walks);
    let retry_after_ms = i64::try_from(wait)
        .ok()
        .filter(|&d| at.checked_add(d).is_some())
        .unwrap_or(-1);
    Ok(Decision {
        allowed: false,
        retry_after_ms,
        sums: plain_sums,
    })
}

/// The delays `d >= 1` at which one window fails, as sorted disjoint half-open intervals
/// `[from, to)`, produced lazily: the search stops reading a window once it is past the
/// answer. A merge of two sorted streams over the window's stored slots (from its oldest
/// counted slot at `at` on): slot `i` enters when the window's newest slot reaches `i`
/// and leaves `slots` (the window's length in slots) later.
struct FailingTimes<'a> {
    res_ms: i128,
    span: i128,
    at: i128,
    /// Largest passing sum: `max - increment`.
    room: i128,
    /// Slots after the one containing `at`, still to enter, oldest first.
    entering: &'a [(i64, i64)],
    /// Slots still to leave, oldest first.
    leaving: &'a [(i64, i64)],
    /// The window's newest slot and its sum, from the last event on.
    newest: i128,
    sum: i128,
    done: bool,
}

impl<'a> FailingTimes<'a> {
    /// `slots`: the window's stored slots from `w.first` on; `sum`: its sum at `at`.
    fn new(w: &Window, slots: &'a [(i64, i64)], sum: i128, at: i64, increment: i64) -> Self {
        let entering_from = slots.partition_point(|&(index, _)| index <= w.last);
        FailingTimes {
            res_ms: i128::from(w.res_ms),
            span: i128::from(w.slots),
            at: i128::from(at),
            room: i128::from(w.max) - i128::from(increment),
            entering: slots.get(entering_from..).unwrap_or(&[]),
            leaving: slots,
            newest: i128::from(w.last),
            sum,
            done: false,
        }
    }

    /// The delay after which the window's newest slot is `index`.
    fn delay_to(&self, index: i128) -> i128 {
        index * self.res_ms - self.at
    }
}

impl Iterator for FailingTimes<'_> {
    type Item = (i128, i128);

    fn next(&mut self) -> Option<(i128, i128)> {
        while !self.done {
            let next_enter = self.entering.first().map(|&(index, _)| i128::from(index));
            let next_leave = self
                .leaving
                .first()
                .map(|&(index, _)| i128::from(index) + self.span);
            let next = match (next_enter, next_leave) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            // The sum holds from the current newest slot until the next event.
            let failing = (self.sum > self.room).then(|| {
                let from = self.delay_to(self.newest).max(1);
                (from, next.map_or(i128::MAX, |next| self.delay_to(next)))
            });
            match next {
                Some(next) => {
                    while let Some((&(index, count), rest)) = self.entering.split_first() {
                        if i128::from(index) != next {
                            break;
                        }
                        self.sum += i128::from(count);
                        self.entering = rest;
                    }
                    while let Some((&(index, count), rest)) = self.leaving.split_first() {
                        if i128::from(index) + self.span != next {
                            break;
                        }
                        self.sum -= i128::from(count);
                        self.leaving = rest;
                    }
                    self.newest = next;
                }
                None => self.done = true,
            }
            if let Some((from, to)) = failing.filter(|&(from, to)| from < to) {
                return Some((from, to));
            }
        }
        None
    }
}

/// The smallest `d >= 1` outside every window's failing intervals. The candidate only
/// grows, and each window is read only until its intervals pass the candidate, so every
/// window's slots are walked at most once.
fn first_time_outside(mut walks: Vec<std::iter::Peekable<FailingTimes<'_>>>) -> i128 {
    let mut candidate: i128 = 1;
    loop {
        let mut moved = false;
        for walk in walks.iter_mut() {
            while walk.next_if(|&(_, to)| to <= candidate).is_some() {}
            if let Some(&(from, to)) = walk.peek() {
                if from <= candidate {
                    candidate = to;
                    moved = true;
                }
            }
        }
        if !moved {
            return candidate;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::{parse_resolution_text, Resolution};
    use crate::testutil::Rng;
    use std::collections::BTreeMap;

    #[derive(Clone, Default)]
    struct MapStore(BTreeMap<(i64, i64), i64>);

    impl SlotStore for MapStore {
        fn get(&mut self, res_ms: i64, index: i64) -> Option<i64> {
            self.0.get(&(res_ms, index)).copied()
        }
        fn put(&mut self, res_ms: i64, index: i64, count: i64) {
            self.0.insert((res_ms, index), count);
        }
        fn remove(&mut self, res_ms: i64, index: i64) -> bool {
            self.0.remove(&(res_ms, index)).is_some()
        }
        fn stored_slots(&mut self) -> usize {
            self.0.len()
        }
        fn each_slot(&mut self, f: &mut dyn FnMut(i64, i64, i64)) {
            for (&(r, i), &c) in self.0.iter().rev() {
                f(r, i, c);
            }
        }
        // An ordered range read, as the command layer's mirror does (the trait's default
        // probes `lo..=hi` one by one, too slow for the widest spans of these tests).
        fn ordered_slots(&mut self, res_ms: i64, lo: i64, hi: i64, out: &mut Vec<(i64, i64)>) {
            if lo <= hi {
                let slots = self.0.range((res_ms, lo)..=(res_ms, hi));
                out.extend(slots.map(|(&(_, index), &count)| (index, count)));
            }
        }
    }

    fn res(text: &str) -> Vec<Resolution> {
        parse_resolution_text(text).unwrap()
    }

    const T0: i64 = 1_700_000_000_000;

    /// A counter with `count` added at each `(ts, count)`, the clock at `now`.
    fn counter_with(text: &str, now: i64, events: &[(i64, i64)]) -> (Counter, MapStore) {
        let mut c = Counter::new(res(text));
        let mut s = MapStore::default();
        for &(ts, by) in events {
            c.incrby(&mut s, now, ts, by).unwrap();
        }
        (c, s)
    }

    fn decision(allowed: bool, retry_after_ms: i64, sums: &[i64]) -> Decision {
        Decision {
            allowed,
            retry_after_ms,
            sums: sums.to_vec(),
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
        let mut s = MapStore::default();
        assert_eq!(
            decide(&c, &mut s, T0, T0, 5, &[(5_000, 5), (3_600_000, 7)]),
            Ok(decision(true, 0, &[5, 5]))
        );
    }

    #[test]
    fn bad_arguments_are_errors() {
        let c = Counter::new(res("1s:60"));
        let mut s = MapStore::default();
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
        for text in ["1ms:100000", "1ms:3 7ms:5 1d:2"] {
            let c = Counter::new(res(text));
            for at in [i64::MIN, i64::MIN + 1, -1, 0, i64::MAX - 1, i64::MAX] {
                let mut s = MapStore::default();
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
        let windows: Vec<i64> = limits.iter().map(|&(w, _)| w).collect();
        (1..=horizon).find(|&d| {
            let t = at + d;
            let sums = c.sum(s, now.max(t), t, &windows).unwrap();
            sums.iter()
                .zip(limits)
                .all(|(&sum, &(_, max))| sum + increment <= max)
        })
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
            let mut c = Counter::new(res(&text.join(" ")));
            let mut s = MapStore::default();
            let widest = c.resolutions.iter().map(|r| r.span()).max().unwrap();
            let coarsest = c.resolutions.iter().map(|r| r.ms).max().unwrap();
            let mut now = T0 + rng.below(100_000) - 50_000;
            let negatives = rng.below(3) == 0;
            for _ in 0..rng.below(80) {
                now += rng.below(widest / 8 + 1);
                let ts = now - rng.below(widest + 1);
                let by = if negatives {
                    rng.below(9) - 3
                } else {
                    1 + rng.below(4)
                };
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
}
