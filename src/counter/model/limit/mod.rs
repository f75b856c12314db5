//! Pure arithmetic of `TSCOUNTER.LIMIT` and `TSCOUNTER.MLIMIT`: decides a multi-window
//! rate-limit call over one or several counters, how long a refused caller must wait and,
//! with `DETAILS`, when each window's sum next falls. No Redis imports; reads each counter
//! through [`SlotStore`] and never writes (the command layer applies the increment with
//! [`Counter::incrby`] when the call is allowed).
//!
//! Waiting time. With nothing else written, the sum of one window changes only when its
//! resolution's slot boundaries are crossed: a stored slot enters the window when the
//! window's newest slot reaches it (slots after the one containing `at` exist when `AT`
//! is in the past) and leaves `k = ceil(window / res)` slots later. Slot counts may be
//! negative (`INCRBY` takes any sign), so a window can pass and fail again as time moves:
//! each window yields the sorted time intervals in which it fails, and the answer is the
//! first time after `at` outside all of them, all windows of all keys together. (The
//! largest of the keys' own waits is not the answer: a key that passes at `at` may fail
//! later, when a slot written after `at` enters its window.)

use crate::counter::model::{collect_ordered_sealed, Counter, SlotStore};
use crate::error::{Error, Result};
use crate::window::{first_kept, slot_index, slots_covering};

/// Most `window max` pairs one key may carry.
pub const MAX_LIMITS: usize = 16;

/// Most keys one `MLIMIT` call may limit.
pub const MAX_KEYS: usize = 16;

/// Outcome of one `LIMIT` or `MLIMIT` call, in the order of its reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// True if every window of every key has room for the increment (the caller then
    /// applies it to every key).
    pub allowed: bool,
    /// 0 when allowed; -1 when the increment exceeds some `max` (no wait helps); else the
    /// smallest `d >= 1` after which the same call would be allowed, nothing else written.
    pub retry_after_ms: i64,
    /// Per key, in argument order (one for `LIMIT`): its windows after the call.
    pub keys: Vec<Outcome>,
}

/// One key's windows after a call, in argument order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Each window's sum: with the increment when the call is allowed and the window's
    /// resolution keeps `at` (where the increment lands).
    pub sums: Vec<i64>,
    /// With `DETAILS`: per window `[sum, remaining, reset_ms]`, `remaining` the room left
    /// under `max` (never below 0) and `reset_ms` the delay from `at` until the sum next
    /// falls (0 when the sum is 0, or when it never falls).
    pub details: Option<Vec<[i64; 3]>>,
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

/// One key's pairs read from its counter at `at`: what deciding a call needs of that key,
/// owned, so several keys (each read under its own borrow of the caches) are decided
/// together.
pub struct Check {
    at: i64,
    increment: i64,
    windows: Vec<Window>,
    /// The stored slots of each resolution the windows use, oldest first, from the oldest
    /// slot any of its windows counts at `at` to the slot containing `now`.
    stored: Vec<Vec<(i64, i64)>>,
    prefixes: Vec<Prefix>,
    /// Per window: which of `stored` holds its slots, and the range `from..to` of them it
    /// counts at `at`.
    ranges: Vec<(usize, usize, usize)>,
    /// Each window's sum at `at`, before the call.
    sums: Vec<i64>,
    /// What the `INCRBY` of an allowed call would answer instead of writing, if anything.
    unwritable: Option<Error>,
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
    decide_all(
        &[check(counter, store, now, at, increment, limits, false)?],
        false,
    )
}

/// Reads one key's pairs for a call (see [`decide`] for the arguments and errors). With
/// `dry_run`, also finds whether the increment could be written (every count it changes
/// stays within `i64`): a call over several keys must know that before it writes any of
/// them; one key's `INCRBY` checks it itself before writing.
pub fn check(
    counter: &Counter,
    store: &mut dyn SlotStore,
    now: i64,
    at: i64,
    increment: i64,
    limits: &[(i64, i64)],
    dry_run: bool,
) -> Result<Check> {
    if increment < 0 || limits.iter().any(|&(_, max)| max < 0) {
        return Err(Error::NotInteger);
    }
    let now = now.max(at);
    let windows = windows_of(counter, now, at, limits)?;
    // One ordered read per resolution, from the oldest slot any of its windows counts at
    // `at` to the slot containing `now`: at most `samples` slots, since all are kept.
    let mut spans: Vec<(i64, i64, i64)> = Vec::new();
    for w in &windows {
        match spans.iter_mut().find(|span| span.0 == w.res_ms) {
            Some(span) => span.1 = span.1.min(w.first),
            None => spans.push((w.res_ms, w.first, slot_index(now, w.res_ms))),
        }
    }
    let stored = collect_ordered_sealed(store, &spans, &counter.sealed_bounds());
    // Per resolution, the running totals of its slots (`prefix[k]`: the first `k` slots),
    // and whether no count is negative: every window's sum is then two lookups, and a
    // refused window's wait a binary search (a walk of 99000 slots per window otherwise).
    let prefixes: Vec<Prefix> = stored.iter().map(|slots| Prefix::new(slots)).collect();
    let mut ranges = Vec::with_capacity(windows.len());
    let mut sums = Vec::with_capacity(windows.len());
    for w in &windows {
        let at = spans
            .iter()
            .position(|span| span.0 == w.res_ms)
            .unwrap_or(usize::MAX);
        let all = stored.get(at).map_or(&[][..], |slots| slots.as_slice());
        let from = all.partition_point(|&(index, _)| index < w.first);
        let to = all.partition_point(|&(index, _)| index <= w.last).max(from);
        let running = |k: usize| {
            prefixes
                .get(at)
                .and_then(|p| p.sums.get(k))
                .copied()
                .unwrap_or(0)
        };
        sums.push(i64::try_from(running(to) - running(from)).map_err(|_| Error::Overflow)?);
        ranges.push((at, from, to));
    }
    let kept_somewhere = kept_somewhere(counter, now, at);
    let unwritable = if increment == 0 {
        None
    } else if !kept_somewhere {
        Some(crate::error::outside_kept_range(at))
    } else if dry_run && !increment_fits(counter, store, now, at, increment) {
        Some(Error::Overflow)
    } else {
        None
    };
    Ok(Check {
        at,
        increment,
        windows,
        stored,
        prefixes,
        ranges,
        sums,
        unwritable,
    })
}

/// [`check`] of one key for a call that needs its windows' sums alone: without `DETAILS`,
/// an allowed call, and a call refused because the increment is above a `max` (no wait
/// helps), answer from the sums. The sums come from [`Counter::sum`], which reads a sealed
/// run's packed field once (a header for a whole run) where `check` lists every slot: a
/// week-long window over a long counter costs its packed fields, not its slots. `None`
/// when the call needs the slots (`DETAILS`, or a refusal whose wait must be found): then
/// call [`check`].
pub fn check_sums_only(
    counter: &Counter,
    store: &mut dyn SlotStore,
    now: i64,
    at: i64,
    increment: i64,
    limits: &[(i64, i64)],
    details: bool,
) -> Result<Option<Check>> {
    if details || increment < 0 || limits.iter().any(|&(_, max)| max < 0) {
        return Ok(None);
    }
    let now = now.max(at);
    let windows = windows_of(counter, now, at, limits)?;
    let lengths: Vec<i64> = limits.iter().map(|&(window, _)| window).collect();
    let sums = counter.sum(store, now, at, &lengths)?;
    let kept_somewhere = kept_somewhere(counter, now, at);
    let read = Check {
        at,
        increment,
        windows,
        stored: Vec::new(),
        prefixes: Vec::new(),
        ranges: Vec::new(),
        sums,
        unwritable: (increment != 0 && !kept_somewhere).then_some(Error::OutsideKeptRange),
    };
    Ok((read.passes() || read.exceeds_a_max()).then_some(read))
}

/// The `(window, max)` pairs resolved to slot indexes at `at`, the clock at `now`.
fn windows_of(counter: &Counter, now: i64, at: i64, limits: &[(i64, i64)]) -> Result<Vec<Window>> {
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
    Ok(windows)
}

/// True if some resolution keeps `at` at `now` (an increment there can be written).
fn kept_somewhere(counter: &Counter, now: i64, at: i64) -> bool {
    counter
        .resolutions
        .iter()
        .any(|r| slot_index(at, r.ms) >= first_kept(now, r.ms, r.samples))
}

/// True if adding `increment` at `at` to every resolution that keeps it leaves every count
/// within `i64` (what [`Counter::incrby`] checks before it writes).
fn increment_fits(
    counter: &Counter,
    store: &mut dyn SlotStore,
    now: i64,
    at: i64,
    increment: i64,
) -> bool {
    counter.resolutions.iter().all(|r| {
        let index = slot_index(at, r.ms);
        index < first_kept(now, r.ms, r.samples)
            || store
                .get(r.ms, index)
                .unwrap_or(0)
                .checked_add(increment)
                .is_some()
    })
}

/// Decides a call over the keys of `checks` (all read at the same `at` with the same
/// increment): allowed iff every window of every key has room. `details` asks for
/// [`Outcome::details`]. Errors: an allowed call whose increment some key could not take
/// (see [`check`]).
pub fn decide_all(checks: &[Check], details: bool) -> Result<Decision> {
    let exceeds_a_max = checks.iter().any(Check::exceeds_a_max);
    let allowed = !exceeds_a_max && checks.iter().all(Check::passes);
    if allowed {
        if let Some(error) = checks.iter().find_map(|c| c.unwritable.clone()) {
            return Err(error);
        }
    }
    let retry_after_ms = if allowed {
        0
    } else if exceeds_a_max {
        -1
    } else {
        let walks = checks
            .iter()
            .flat_map(|c| (0..c.windows.len()).filter_map(|i| c.failing_times(i)))
            .map(Iterator::peekable)
            .collect();
        let wait = first_time_outside(walks);
        let at = checks.first().map_or(0, |c| c.at);
        i64::try_from(wait)
            .ok()
            .filter(|&d| at.checked_add(d).is_some())
            .unwrap_or(-1)
    };
    Ok(Decision {
        allowed,
        retry_after_ms,
        keys: checks.iter().map(|c| c.outcome(allowed, details)).collect(),
    })
}

impl Check {
    /// True if the increment is above some `max` (no wait ever helps).
    fn exceeds_a_max(&self) -> bool {
        self.windows.iter().any(|w| self.increment > w.max)
    }

    /// True if every window has room for the increment at `at`.
    fn passes(&self) -> bool {
        let increment = i128::from(self.increment);
        self.windows
            .iter()
            .zip(&self.sums)
            .all(|(w, &sum)| i128::from(sum) + increment <= i128::from(w.max))
    }

    /// Window `i`'s stored slots from its oldest counted at `at` on, and its sum.
    fn window_slots(&self, i: usize) -> WindowSlots<'_> {
        let (at, from, _) = self.ranges.get(i).copied().unwrap_or((usize::MAX, 0, 0));
        let all = self
            .stored
            .get(at)
            .map_or(&[][..], |slots| slots.as_slice());
        let prefix = self.prefixes.get(at);
        WindowSlots {
            slots: all.get(from..).unwrap_or(&[]),
            sum: self.sums.get(i).copied().map_or(0, i128::from),
            totals: prefix
                .filter(|p| p.no_negative)
                .and_then(|p| p.sums.get(from..)),
        }
    }

    fn failing_times(&self, i: usize) -> Option<FailingTimes<'_>> {
        let w = self.windows.get(i)?;
        Some(FailingTimes::new(
            w,
            &self.window_slots(i),
            self.at,
            self.increment,
        ))
    }

    /// The key's windows after the call (`allowed`: with the increment).
    fn outcome(&self, allowed: bool, details: bool) -> Outcome {
        let added = |w: &Window| {
            if allowed && w.receives_increment {
                self.increment
            } else {
                0
            }
        };
        // Allowed: every sum plus the increment is at most its max, so it fits an i64.
        let sums: Vec<i64> = self
            .windows
            .iter()
            .zip(&self.sums)
            .map(|(w, &sum)| sum.saturating_add(added(w)))
            .collect();
        let details = details.then(|| {
            self.windows
                .iter()
                .zip(&sums)
                .enumerate()
                .map(|(i, (w, &sum))| {
                    let remaining = (i128::from(w.max) - i128::from(sum)).max(0);
                    let remaining = i64::try_from(remaining).unwrap_or(i64::MAX);
                    [sum, remaining, self.reset_ms(i, sum, added(w))]
                })
                .collect()
        });
        Outcome { sums, details }
    }

    /// The delay from `at` until window `i`'s sum (`sum`, with `added` in the slot of `at`)
    /// next falls, nothing else written: 0 when the sum is 0 or never falls.
    fn reset_ms(&self, i: usize, sum: i64, added: i64) -> i64 {
        let Some(w) = self.windows.get(i) else {
            return 0;
        };
        if sum == 0 {
            return 0;
        }
        let window = self.window_slots(i);
        let slots = window.slots;
        let (counted, entering) =
            slots.split_at(slots.partition_point(|&(index, _)| index <= w.last));
        let (res_ms, span, at) = (
            i128::from(w.res_ms),
            i128::from(w.slots),
            i128::from(self.at),
        );
        // The delay after which the window's newest slot is `newest`.
        let delay_to = |newest: i128| i64::try_from(newest * res_ms - at).unwrap_or(i64::MAX);
        // (`totals` exists when no count of the resolution is negative.)
        if entering.is_empty() && added >= 0 && window.totals.is_some() {
            // The usual case: the sum only falls, first when its oldest non-zero count
            // leaves (one slot leaves at a time).
            let oldest = counted
                .iter()
                .find(|&&(_, count)| count > 0)
                .map(|&(index, _)| index)
                .or((added > 0).then_some(w.last));
            return oldest.map_or(0, |index| delay_to(i128::from(index) + span));
        }
        // Otherwise, the net change each time the newest slot moves onto a slot that
        // enters or makes one leave; the first net fall is the answer.
        let mut events: Vec<(i128, i128)> =
            Vec::with_capacity(counted.len() + 2 * entering.len() + 1);
        for &(index, count) in counted {
            events.push((i128::from(index) + span, -i128::from(count)));
        }
        if added != 0 {
            events.push((i128::from(w.last) + span, -i128::from(added)));
        }
        for &(index, count) in entering {
            events.push((i128::from(index), i128::from(count)));
            events.push((i128::from(index) + span, -i128::from(count)));
        }
        events.sort_unstable();
        let mut rest = events.as_slice();
        while let Some(&(newest, _)) = rest.first() {
            let same = rest.partition_point(|&(t, _)| t == newest);
            let (group, after) = rest.split_at(same);
            if group.iter().map(|&(_, change)| change).sum::<i128>() < 0 {
                return delay_to(newest);
            }
            rest = after;
        }
        0
    }
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
