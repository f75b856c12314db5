//! Reads: window sums, ranges of slots and INFO's extent of the stored slots.
//!
//! Owns: the read arithmetic. May not touch: Redis (pure).

use super::{collect_ordered, collect_ordered_sealed, Counter, SlotStore};
use crate::args::format_duration;
use crate::error::{Error, Result};
use crate::window::{first_kept, slot_index, slot_start, slots_covering};

/// What `TSCOUNTER.INFO` reports of a counter's stored slots: how many, and the starts of
/// the oldest and the newest (all resolutions together).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extent {
    pub slots: i64,
    pub first: Option<i64>,
    pub last: Option<i64>,
}

impl Extent {
    /// Widens `first ..= last` to include a slot starting at `start`.
    pub(super) fn include(&mut self, start: i64) {
        self.first = Some(self.first.map_or(start, |f| f.min(start)));
        self.last = Some(self.last.map_or(start, |l| l.max(start)));
    }

    /// Counts one stored slot of resolution `res_ms` (a walk of the store).
    pub fn add_slot(&mut self, res_ms: i64, index: i64) {
        self.include(slot_start(index, res_ms));
        self.slots += 1;
    }
}

impl Counter {
    /// Sums of each window ending with the slot that contains `t` (`t <= now`), counting
    /// only slots still kept at `now`.
    pub fn sum(
        &self,
        store: &mut dyn SlotStore,
        now: i64,
        t: i64,
        windows: &[i64],
    ) -> Result<Vec<i64>> {
        let mut sums = vec![0; windows.len()];
        self.sum_into(store, now, t, windows, &mut sums)?;
        Ok(sums)
    }

    /// The sum of one window ending with the slot that contains `now` ([`Counter::sum`]
    /// of `[window]` at `t = now`): the usual read, asked straight of a store that sums
    /// ranges itself (a mirrored counter).
    pub fn window_sum(&self, store: &mut dyn SlotStore, now: i64, window: i64) -> Result<i64> {
        let (res_ms, lo, hi) = self.window_range(now, now, window)?;
        if let Some(sum) = store.range_sum(res_ms, lo, hi) {
            return i64::try_from(sum).map_err(|_| Error::Overflow);
        }
        let mut sum = [0];
        self.sum_into(store, now, now, &[window], &mut sum)?;
        let [sum] = sum;
        Ok(sum)
    }

    /// The slots a window ending with the slot that contains `t` sums, among those still
    /// kept at `now`: (resolution ms, first index, last index), empty when first > last.
    fn window_range(&self, now: i64, t: i64, window: i64) -> Result<(i64, i64, i64)> {
        let res = self.resolution_for(window)?;
        let hi = slot_index(t, res.ms);
        // `first_kept(now, ..)`, with one division less in the usual read (`t == now`).
        let now_index = if t == now {
            hi
        } else {
            slot_index(now, res.ms)
        };
        let first = now_index.saturating_sub(res.samples).saturating_add(1);
        let lo = (hi - slots_covering(window, res.ms) + 1).max(first);
        Ok((res.ms, lo, hi))
    }

    /// [`Counter::sum`] into `out` (as long as `windows`: a caller's stack array, so the
    /// usual read allocates nothing).
    pub fn sum_into(
        &self,
        store: &mut dyn SlotStore,
        now: i64,
        t: i64,
        windows: &[i64],
        out: &mut [i64],
    ) -> Result<()> {
        // Each window becomes a slot-index range of one resolution (an error for a window
        // no resolution keeps: a read changes nothing, so failing midway is as good).
        let range_of = |window: i64| self.window_range(now, t, window);
        if out.len() != windows.len() {
            return Err(Error::Invalid("one sum per window".into()));
        }
        // A store that sums ranges itself (a mirrored counter) answers each window directly
        // (the usual read: no allocation).
        let mut direct = 0;
        for (&window, out) in windows.iter().zip(out.iter_mut()) {
            let (res_ms, lo, hi) = range_of(window)?;
            let sum = if lo > hi {
                Some(0)
            } else {
                store.range_sum(res_ms, lo, hi)
            };
            let Some(sum) = sum else { break };
            *out = i64::try_from(sum).map_err(|_| Error::Overflow)?;
            direct += 1;
        }
        if direct == windows.len() {
            return Ok(());
        }
        let mut ranges = windows
            .iter()
            .map(|&window| range_of(window))
            .collect::<Result<Vec<_>>>()?;
        // The parts of the windows in sealed runs are summed from the runs' packed fields
        // (a header each for whole runs); the rest, the newest runs, slot by slot below.
        let sealed = self.sum_sealed_parts(store, &mut ranges);
        // Every window of one resolution ends with the same slot, so the widest of them
        // covers the others: one ordered list of its stored slots and their prefix sums
        // answer every window with two binary searches.
        let mut spans: Vec<(i64, i64, i64)> = Vec::new();
        for &(res_ms, lo, hi) in ranges.iter().filter(|&&(_, lo, hi)| lo <= hi) {
            match spans.iter_mut().find(|span| span.0 == res_ms) {
                Some(span) => {
                    span.1 = span.1.min(lo);
                    span.2 = span.2.max(hi);
                }
                None => spans.push((res_ms, lo, hi)),
            }
        }
        let slots = collect_ordered(store, &spans);
        let prefixes: Vec<Vec<i128>> = slots
            .iter()
            .map(|slots| {
                let mut prefix = Vec::with_capacity(slots.len() + 1);
                let mut total = 0i128;
                prefix.push(total);
                for &(_, count) in slots {
                    total += i128::from(count);
                    prefix.push(total);
                }
                prefix
            })
            .collect();
        let mut sums = sealed;
        for (sum, &(res_ms, lo, hi)) in sums.iter_mut().zip(&ranges) {
            let Some(at) = spans.iter().position(|span| span.0 == res_ms) else {
                continue;
            };
            let (Some(slots), Some(prefix)) = (slots.get(at), prefixes.get(at)) else {
                continue;
            };
            if lo > hi {
                continue;
            }
            let from = slots.partition_point(|&(index, _)| index < lo);
            let to = slots.partition_point(|&(index, _)| index <= hi);
            if let (Some(a), Some(b)) = (prefix.get(from), prefix.get(to)) {
                *sum += b - a;
            }
        }
        for (out, sum) in out.iter_mut().zip(sums) {
            *out = i64::try_from(sum).map_err(|_| Error::Overflow)?;
        }
        Ok(())
    }

    /// Sums the parts of `ranges` (`(res_ms, lo, hi)`, one per window) that lie in runs the
    /// timer has sealed, with [`SlotStore::sealed_sum`], and moves each range's `lo` past
    /// them. The windows of one resolution all end with the same slot, so their sealed parts
    /// nest: each run's packed field is read once however many windows cover it. All zero
    /// (ranges unchanged) for a store that keeps no packed runs.
    fn sum_sealed_parts(
        &self,
        store: &mut dyn SlotStore,
        ranges: &mut [(i64, i64, i64)],
    ) -> Vec<i128> {
        let mut sums = vec![0i128; ranges.len()];
        // (window, its new lo) applied once every part is summed: a store without packed
        // runs answers `None` and then every range stays as it was.
        let mut moved = Vec::new();
        for (r, t) in self.resolutions.iter().zip(&self.tracks) {
            if t.n == 0 {
                continue;
            }
            let sealed_end = t.unsealed_from();
            // This resolution's windows reaching into sealed runs, narrowest first.
            let mut at: Vec<(i64, i64, usize)> = ranges
                .iter()
                .enumerate()
                .filter(|(_, &(ms, lo, hi))| ms == r.ms && lo <= hi && lo < sealed_end)
                // Nothing is stored before the track's oldest slot.
                .map(|(i, &(_, lo, hi))| (lo.max(t.lo), hi.min(sealed_end - 1), i))
                .collect();
            at.sort_unstable_by(|a, b| b.cmp(a));
            // From the narrowest window's start backwards, each step adding the runs
            // between one window's start and the previous one's.
            let mut total = 0i128;
            let mut upto: Option<i64> = None;
            for (lo, hi, i) in at {
                let part_hi = upto.map_or(hi, |u| (u - 1).min(hi));
                if lo <= part_hi {
                    match store.sealed_sum(r.ms, lo, part_hi) {
                        Some(part) => total += part,
                        None => return vec![0i128; ranges.len()],
                    }
                }
                upto = Some(upto.map_or(lo, |u| u.min(lo)));
                if let Some(sum) = sums.get_mut(i) {
                    *sum = total;
                }
                moved.push((i, sealed_end));
            }
        }
        for (i, sealed_end) in moved {
            if let Some(range) = ranges.get_mut(i) {
                range.1 = range.1.max(sealed_end);
            }
        }
        sums
    }

    /// `(slot start, count)` of resolution `res_ms` for the slots from the one containing
    /// `from` to the one containing `to`, clamped to what is kept at `now`; oldest first.
    /// With `empty`, slots without a count are listed with 0.
    pub fn range(
        &self,
        store: &mut dyn SlotStore,
        now: i64,
        res_ms: i64,
        from: Option<i64>,
        to: Option<i64>,
        empty: bool,
    ) -> Result<Vec<(i64, i64)>> {
        let res = self
            .resolutions
            .iter()
            .copied()
            .find(|r| r.ms == res_ms)
            .ok_or_else(|| {
                let kept: Vec<String> = self
                    .resolutions
                    .iter()
                    .map(|r| format_duration(r.ms))
                    .collect();
                Error::Invalid(format!(
                    "the counter has no resolution '{}' (it has {})",
                    format_duration(res_ms),
                    kept.join(", ")
                ))
            })?;
        let kept_lo = first_kept(now, res.ms, res.samples);
        let kept_hi = slot_index(now, res.ms);
        let lo = from.map_or(kept_lo, |f| slot_index(f, res.ms).max(kept_lo));
        let hi = to.map_or(kept_hi, |t| slot_index(t, res.ms).min(kept_hi));
        if lo > hi {
            return Ok(Vec::new());
        }
        let counts: Vec<(i64, i64)> =
            collect_ordered_sealed(store, &[(res.ms, lo, hi)], &self.sealed_bounds())
                .into_iter()
                .flatten()
                .filter(|&(_, count)| count != 0)
                .collect();
        let start = |index: i64| slot_start(index, res.ms);
        if !empty {
            return Ok(counts.into_iter().map(|(i, c)| (start(i), c)).collect());
        }
        let mut stored = counts.into_iter().peekable();
        Ok((lo..=hi)
            .map(|index| {
                let count = stored.next_if(|&(i, _)| i == index).map_or(0, |(_, c)| c);
                (start(index), count)
            })
            .collect())
    }

    /// [`TSCOUNTER.INFO`]'s view of the stored slots, found from the bookkeeping with a
    /// few probes per resolution (its oldest and newest stored slot) instead of a walk of
    /// every stored slot. `None` when the bookkeeping does not account for exactly the
    /// stored slots (a user's edit) or the probes would pass `max_probes` (gaps at the
    /// ends of a resolution): the caller then walks the store.
    pub fn extent(&self, store: &mut dyn SlotStore, now: i64, max_probes: usize) -> Option<Extent> {
        let slots = self.stored_slots();
        if usize::try_from(slots).ok()? != store.stored_slots() {
            return None;
        }
        let mut probes_left = max_probes;
        let mut stored = |store: &mut dyn SlotStore, res_ms: i64, index: i64| {
            probes_left = probes_left.checked_sub(1)?;
            Some(store.get(res_ms, index).is_some())
        };
        let mut extent = Extent {
            slots,
            ..Extent::default()
        };
        for (r, t) in self.resolutions.iter().zip(&self.tracks) {
            if t.n == 0 {
                continue;
            }
            // Every stored slot lies in `lo .. lo + samples`, and tally writes none after
            // the one containing `now` (only a server clock stepped back leaves such a
            // slot; it then counts in `slots` but not in `last` until the clock passes it).
            let top =
                t.lo.saturating_add(r.samples)
                    .saturating_sub(1)
                    .min(slot_index(now, r.ms));
            let mut oldest = t.lo;
            while !stored(store, r.ms, oldest)? {
                if oldest >= top {
                    return None;
                }
                oldest += 1;
            }
            let mut newest = top;
            while newest > oldest && !stored(store, r.ms, newest)? {
                newest -= 1;
            }
            extent.include(slot_start(oldest, r.ms));
            extent.include(slot_start(newest, r.ms));
        }
        Some(extent)
    }
}
