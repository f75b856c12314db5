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
    // Per resolution, the running totals of its slots (`prefix[k]`: the first `k` slots),
    // and whether no count is negative: every window's sum is then two lookups, and a
    // refused window's wait a binary search (a walk of 99000 slots per window otherwise).
    let prefixes: Vec<Prefix> = stored.iter().map(|slots| Prefix::new(slots)).collect();
    let window_slots: Vec<WindowSlots> = windows
        .iter()
        .map(|w| {
            let at = spans.iter().position(|span| span.0 == w.res_ms);
            let all = at
                .and_then(|at| stored.get(at))
                .map_or(&[][..], |slots| slots.as_slice());
            let from = all.partition_point(|&(index, _)| index < w.first);
            let to = all.partition_point(|&(index, _)| index <= w.last).max(from);
            let prefix = at.and_then(|at| prefixes.get(at));
            let running = |k: usize| prefix.and_then(|p| p.sums.get(k)).copied().unwrap_or(0);
            WindowSlots {
                slots: all.get(from..).unwrap_or(&[]),
                sum: running(to) - running(from),
                // Running totals of the window's slots from its first, when no count is
                // negative (the sum then only falls as slots leave).
                totals: prefix
                    .filter(|p| p.no_negative)
                    .and_then(|p| p.sums.get(from..)),
            }
        })
        .collect();
    let sums: Vec<i128> = window_slots.iter().map(|w| w.sum).collect();
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
        .map(|(w, slots)| FailingTimes::new(w, slots, at, increment).peekable())
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

/// The running totals of one resolution's stored slots, oldest first.
struct Prefix {
    /// `sums[k]`: the counts of the first `k` slots.
    sums: Vec<i128>,
    /// True if no count is negative.
    no_negative: bool,
}

impl Prefix {
    fn new(slots: &[(i64, i64)]) -> Prefix {
        let mut sums = Vec::with_capacity(slots.len() + 1);
        let mut total = 0i128;
        sums.push(total);
        for &(_, count) in slots {
            total += i128::from(count);
            sums.push(total);
        }
        Prefix {
            sums,
            no_negative: slots.iter().all(|&(_, count)| count >= 0),
        }
    }
}

/// One window's stored slots at `at`, from its oldest counted slot on (later slots
/// included), and its sum.
struct WindowSlots<'a> {
    slots: &'a [(i64, i64)],
    sum: i128,
    /// `totals[k] - totals[0]`: the counts of `slots[..k]`; `None` if some count is
    /// negative.
    totals: Option<&'a [i128]>,
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
    /// Running totals of `leaving` (see [`WindowSlots::totals`]).
    totals: Option<&'a [i128]>,
    done: bool,
}

impl<'a> FailingTimes<'a> {
    fn new(w: &Window, window: &WindowSlots<'a>, at: i64, increment: i64) -> Self {
        let slots = window.slots;
        let entering_from = slots.partition_point(|&(index, _)| index <= w.last);
        FailingTimes {
            res_ms: i128::from(w.res_ms),
            span: i128::from(w.slots),
            at: i128::from(at),
            room: i128::from(w.max) - i128::from(increment),
            entering: slots.get(entering_from..).unwrap_or(&[]),
            leaving: slots,
            newest: i128::from(w.last),
            sum: window.sum,
            totals: window.totals,
            done: false,
        }
    }

    /// The one failing interval when no slot is to enter and no count is negative (asked
    /// before the walk starts): the sum then only falls as slots leave, so the window
    /// fails from now until the first leave that brings it within `room`, found by a
    /// binary search of the running totals. `None` when that does not apply.
    fn while_falling(&mut self) -> Option<Option<(i128, i128)>> {
        if !self.entering.is_empty() {
            return None;
        }
        let totals = self.totals?;
        let base = *totals.first()?;
        self.done = true;
        if self.sum <= self.room {
            return Some(None);
        }
        // Leaves needed: the least `k` with `sum - (totals[k] - base) <= room`.
        let need = self.sum - self.room;
        let leaving = totals.get(1..=self.leaving.len()).unwrap_or(&[]);
        let k = leaving.partition_point(|&total| total - base < need);
        let from = self.delay_to(self.newest).max(1);
        let to = match self.leaving.get(k) {
            Some(&(index, _)) => self.delay_to(i128::from(index) + self.span),
            // (Unreachable: once every slot has left, the sum is 0 <= room.)
            None => i128::MAX,
        };
        Some((from < to).then_some((from, to)))
    }

    /// The delay after which the window's newest slot is `index`.
    fn delay_to(&self, index: i128) -> i128 {
        index * self.res_ms - self.at
    }
}

impl Iterator for FailingTimes<'_> {
    type Item = (i128, i128);

    fn next(&mut self) -> Option<(i128, i128)> {
        if self.done {
            return None;
        }
        if let Some(interval) = self.while_falling() {
            return interval;
        }
        // The walk below moves `leaving` on: the running totals no longer match it.
        self.totals = None;
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
mod tests;
