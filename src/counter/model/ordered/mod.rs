//! An ordered copy of a counter's slots (the read mirrors keep one per cached counter):
//! per resolution, its slots in a deque sorted by index, with running totals so that any
//! window is summed with two binary searches instead of a walk.
//!
//! Why a sorted deque and not a search tree: the writes of a busy counter go to each
//! resolution's newest slot (the back: found and updated without a search) and trimming
//! takes its oldest (the front); SUM's windows end at the newest slot. A write into the
//! middle (an `AT` in the past) shifts the shorter side of the deque and leaves the
//! running totals from there on to be recomputed by the next range sum.
//!
//! Owns: that data structure. May not touch: Redis (pure).

use std::collections::VecDeque;

/// Resolutions looked up by a scan in order rather than a binary search (see
/// `OrderedSlots::position`).
const SCANNED_RESOLUTIONS: usize = 16;

/// A counter's slots in order, with running totals per resolution for range sums.
#[derive(Default)]
pub struct OrderedSlots {
    /// One entry per resolution that has slots, sorted by resolution (a forged hash may
    /// hold slot fields of any number of resolutions: found by binary search).
    resolutions: Vec<Resolution>,
    len: usize,
}

/// The stored slots of one resolution.
struct Resolution {
    res_ms: i64,
    /// `(slot index, count)`, indexes strictly increasing.
    slots: VecDeque<(i64, i64)>,
    /// `sums[k]`: `base` plus the counts of `slots[..=k]`, computed for a prefix of the
    /// slots only (a write at position `k` truncates it to `k`; range sums extend it).
    sums: VecDeque<i128>,
    /// The running total before the first slot: what the slots trimmed from the front
    /// held (every later sum still includes them, so differences stay exact).
    base: i128,
}

impl Resolution {
    fn new(res_ms: i64) -> Resolution {
        Resolution {
            res_ms,
            slots: VecDeque::new(),
            sums: VecDeque::new(),
            base: 0,
        }
    }

    /// `Ok(position)` of the slot `index`, or `Err(position)` where it would go. The
    /// newest slot is checked first (the usual write).
    fn find(&self, index: i64) -> Result<usize, usize> {
        match self.slots.back() {
            None => Err(0),
            Some(&(newest, _)) if newest == index => Ok(self.slots.len() - 1),
            Some(&(newest, _)) if newest < index => Err(self.slots.len()),
            Some(_) => self.slots.binary_search_by_key(&index, |&(i, _)| i),
        }
    }

    /// The position of the first slot whose index is `lo` or more. Indexes are distinct
    /// and increasing, so at most `newest index - lo + 1` slots follow it, and exactly
    /// that many when no slot is missing in between (the usual busy counter): checked,
    /// then searched. Counted from the newest slot: reads end there, so the slots
    /// checked share its cache lines.
    fn first_at_or_after(&self, lo: i64) -> usize {
        let len = self.slots.len();
        if let Some(&(newest, _)) = self.slots.back() {
            let following = usize::try_from(newest.saturating_sub(lo).saturating_add(1));
            let guess = len.saturating_sub(following.unwrap_or(0));
            let before_ok = guess
                .checked_sub(1)
                .and_then(|k| self.slots.get(k))
                .is_none_or(|&(index, _)| index < lo);
            let at_ok = self.slots.get(guess).is_none_or(|&(index, _)| index >= lo);
            if before_ok && at_ok {
                return guess;
            }
        }
        self.slots.partition_point(|&(i, _)| i < lo)
    }

    /// The running total of the slots before position `n`, computing missing sums up to it.
    #[inline]
    fn before(&mut self, n: usize) -> i128 {
        if self.sums.len() < n {
            self.extend_sums(n);
        }
        n.checked_sub(1)
            .and_then(|k| self.sums.get(k))
            .copied()
            .unwrap_or(self.base)
    }

    /// Computes the running totals of the first `n` slots (a write truncated them).
    #[cold]
    fn extend_sums(&mut self, n: usize) {
        while self.sums.len() < n {
            let at = self.sums.len();
            let previous = at
                .checked_sub(1)
                .and_then(|k| self.sums.get(k))
                .copied()
                .unwrap_or(self.base);
            let count = self.slots.get(at).map_or(0, |&(_, c)| c);
            self.sums.push_back(previous + i128::from(count));
        }
    }

    /// Sets the slot `index` to `count`; its old count, if it was stored.
    fn set(&mut self, index: i64, count: i64) -> Option<i64> {
        match self.find(index) {
            Ok(at) => {
                let old = self.slots.get(at)?.1;
                self.set_at(at, count);
                Some(old)
            }
            Err(at) => {
                self.slots.insert(at, (index, count));
                if at == self.sums.len() && at + 1 == self.slots.len() {
                    // A new newest slot after fully computed sums: one more sum.
                    let previous = self.sums.back().copied().unwrap_or(self.base);
                    self.sums.push_back(previous + i128::from(count));
                } else {
                    self.sums.truncate(at);
                }
                None
            }
        }
    }

    /// Sets the count of the stored slot at position `at` (found by [`Resolution::find`]).
    fn set_at(&mut self, at: usize, count: i64) {
        let Some(slot) = self.slots.get_mut(at) else {
            return;
        };
        let delta = i128::from(count) - i128::from(std::mem::replace(&mut slot.1, count));
        if at + 1 == self.sums.len() {
            // The last computed sum (the newest slot, usually): kept in step.
            if let Some(sum) = self.sums.back_mut() {
                *sum += delta;
            }
        } else {
            self.sums.truncate(at);
        }
    }

    /// Removes the slot `index`; its count, if it was stored.
    fn remove(&mut self, index: i64) -> Option<i64> {
        let at = self.find(index).ok()?;
        let (_, count) = self.slots.remove(at)?;
        if at == 0 {
            // Trimming the oldest slot: the later sums stay right, the base moves.
            if let Some(sum) = self.sums.pop_front() {
                self.base = sum;
            }
        } else {
            self.sums.truncate(at);
        }
        Some(count)
    }

    /// The sum of the slots `lo ..= hi`.
    fn range_sum(&mut self, lo: i64, hi: i64) -> i128 {
        if lo > hi {
            return 0;
        }
        let len = self.slots.len();
        // Windows usually end at the newest slot: no search for that end, and its running
        // total is the last one when all are computed.
        let (to, total) = match self.slots.back() {
            Some(&(newest, _)) if newest <= hi => match self.sums.back() {
                Some(&total) if self.sums.len() == len => (len, total),
                _ => (len, self.before(len)),
            },
            _ => {
                let to = self.slots.partition_point(|&(i, _)| i <= hi);
                (to, self.before(to))
            }
        };
        let from = self.first_at_or_after(lo);
        if from >= to {
            return 0;
        }
        total - self.before(from)
    }
}

impl OrderedSlots {
    /// Slots given in any order (a walk of the hash): sorted once. Of two entries for the
    /// same slot the later one counts, as if inserted one by one.
    pub fn from_unordered(mut slots: Vec<((i64, i64), i64)>) -> OrderedSlots {
        // Stable: equal slots keep their order, and the last of each run is kept.
        slots.sort_by_key(|&(slot, _)| slot);
        let mut ordered = OrderedSlots::default();
        let mut entries = slots.into_iter().peekable();
        while let Some(((res_ms, index), count)) = entries.next() {
            if entries
                .peek()
                .is_some_and(|&(next, _)| next == (res_ms, index))
            {
                continue;
            }
            if ordered
                .resolutions
                .last()
                .is_none_or(|r| r.res_ms != res_ms)
            {
                ordered.resolutions.push(Resolution::new(res_ms));
            }
            if let Some(resolution) = ordered.resolutions.last_mut() {
                resolution.slots.push_back((index, count));
                ordered.len += 1;
            }
        }
        ordered
    }

    fn position(&self, res_ms: i64) -> Result<usize, usize> {
        // Most counters have a few resolutions: a short vector is scanned in order (every
        // write visits each resolution in turn, a pattern the branch predictor learns;
        // a binary search's chain of dependent loads costs more), a long one (a forged
        // hash) searched.
        if self.resolutions.len() <= SCANNED_RESOLUTIONS {
            let at = self
                .resolutions
                .iter()
                .position(|r| r.res_ms >= res_ms)
                .unwrap_or(self.resolutions.len());
            return match self.resolutions.get(at) {
                Some(r) if r.res_ms == res_ms => Ok(at),
                _ => Err(at),
            };
        }
        self.resolutions.binary_search_by_key(&res_ms, |r| r.res_ms)
    }

    fn resolution(&self, res_ms: i64) -> Option<&Resolution> {
        self.resolutions.get(self.position(res_ms).ok()?)
    }

    fn resolution_mut(&mut self, res_ms: i64) -> Option<&mut Resolution> {
        let at = self.position(res_ms).ok()?;
        self.resolutions.get_mut(at)
    }

    pub fn get(&self, &(res_ms, index): &(i64, i64)) -> Option<&i64> {
        let resolution = self.resolution(res_ms)?;
        let at = resolution.find(index).ok()?;
        resolution.slots.get(at).map(|(_, count)| count)
    }

    /// The heap bytes these slots hold (capacities, not lengths: what the allocator gave),
    /// each allocation counted with `per_allocation` bytes of the allocator's own.
    pub fn heap_bytes(&self, per_allocation: usize) -> usize {
        let used = |bytes| super::allocated(bytes, per_allocation);
        used(self.resolutions.capacity() * std::mem::size_of::<Resolution>())
            + self
                .resolutions
                .iter()
                .map(|r| {
                    used(r.slots.capacity() * std::mem::size_of::<(i64, i64)>())
                        + used(r.sums.capacity() * std::mem::size_of::<i128>())
                })
                .sum::<usize>()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every slot as `((res_ms, index), count)`, in order.
    pub fn iter(&self) -> impl Iterator<Item = ((i64, i64), i64)> + '_ {
        self.resolutions.iter().flat_map(|r| {
            let res_ms = r.res_ms;
            r.slots
                .iter()
                .map(move |&(index, count)| ((res_ms, index), count))
        })
    }

    /// The slots `lo ..= hi` of resolution `res_ms` as `(index, count)`, oldest first.
    pub fn range(&self, res_ms: i64, lo: i64, hi: i64) -> impl Iterator<Item = (i64, i64)> + '_ {
        let slots = self.resolution(res_ms).map(|r| {
            let from = r.first_at_or_after(lo);
            r.slots.range(from.min(r.slots.len())..)
        });
        slots
            .into_iter()
            .flatten()
            .copied()
            .take_while(move |&(index, _)| index <= hi)
    }

    /// The position of resolution `res_ms`, looked for at `hint` first: a write visits
    /// the resolutions in order, so the next one is usually where the last one ended.
    fn position_from(&self, hint: usize, res_ms: i64) -> Result<usize, usize> {
        match self.resolutions.get(hint) {
            Some(r) if r.res_ms == res_ms => Ok(hint),
            _ => self.position(res_ms),
        }
    }

    /// [`OrderedSlots::get`] of each of `slots` (the slots of one write, one per resolution,
    /// in the order of the resolutions) into `out`.
    pub fn get_many(&self, slots: &[(i64, i64)], out: &mut [Option<i64>]) {
        let mut hint = 0;
        for (&(res_ms, index), out) in slots.iter().zip(out) {
            *out = match self.position_from(hint, res_ms) {
                Ok(at) => {
                    hint = at + 1;
                    self.resolutions.get(at).and_then(|r| {
                        let found = r.find(index).ok()?;
                        r.slots.get(found).map(|&(_, count)| count)
                    })
                }
                Err(_) => None,
            };
        }
    }

    /// [`OrderedSlots::insert`] of each `(res_ms, index, count)` of `writes` (one write's,
    /// in the order of the resolutions).
    pub fn insert_many(&mut self, writes: &[(i64, i64, i64)]) {
        let mut hint = 0;
        for &(res_ms, index, count) in writes {
            let at = match self.position_from(hint, res_ms) {
                Ok(at) => at,
                Err(at) => {
                    self.resolutions.insert(at, Resolution::new(res_ms));
                    at
                }
            };
            hint = at + 1;
            let Some(resolution) = self.resolutions.get_mut(at) else {
                continue;
            };
            if resolution.set(index, count).is_none() {
                self.len += 1;
            }
        }
    }

    pub fn insert(&mut self, (res_ms, index): (i64, i64), count: i64) -> Option<i64> {
        let at = match self.position(res_ms) {
            Ok(at) => at,
            Err(at) => {
                self.resolutions.insert(at, Resolution::new(res_ms));
                at
            }
        };
        let old = self.resolutions.get_mut(at)?.set(index, count);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    pub fn remove(&mut self, &(res_ms, index): &(i64, i64)) -> Option<i64> {
        let at = self.position(res_ms).ok()?;
        let resolution = self.resolutions.get_mut(at)?;
        let old = resolution.remove(index)?;
        self.len -= 1;
        if resolution.slots.is_empty() {
            self.resolutions.remove(at);
        }
        Some(old)
    }

    /// Adds `increment` to the newest stored slot of each resolution, when those slots
    /// are the ones that contain `ts` for exactly the resolutions `res_ms` (in order), no
    /// other resolution is stored and no new count is 0 or overflows: then fills `writes`
    /// with `(res_ms, index, new count)` and returns how many. Otherwise `None` and nothing
    /// changed. (A hot counter's usual write: no division, no search.)
    pub fn add_to_newest(
        &mut self,
        res_ms: &[i64],
        ts: i64,
        increment: i64,
        writes: &mut [(i64, i64, i64)],
    ) -> Option<usize> {
        if res_ms.is_empty()
            || self.resolutions.len() != res_ms.len()
            || writes.len() < res_ms.len()
        {
            return None;
        }
        // First check every slot, then change them.
        for ((resolution, &ms), write) in self.resolutions.iter().zip(res_ms).zip(writes.iter_mut())
        {
            let &(index, count) = resolution.slots.back()?;
            let start = index.checked_mul(ms)?;
            let contains_ts = resolution.res_ms == ms
                && start <= ts
                && ts.checked_sub(start).is_some_and(|offset| offset < ms);
            let new = count.checked_add(increment).filter(|&new| new != 0);
            *write = (ms, index, new.filter(|_| contains_ts)?);
        }
        for (resolution, &(_, _, new)) in self.resolutions.iter_mut().zip(writes.iter()) {
            if let Some(newest) = resolution.slots.len().checked_sub(1) {
                resolution.set_at(newest, new);
            }
        }
        Some(res_ms.len())
    }

    /// The sum of the slots `lo ..= hi` of resolution `res_ms`.
    pub fn range_sum(&mut self, res_ms: i64, lo: i64, hi: i64) -> i128 {
        self.resolution_mut(res_ms)
            .map_or(0, |resolution| resolution.range_sum(lo, hi))
    }
}

/// The in-memory copy answers a counter's reads by itself: a read of a mirrored counter
/// goes straight to it (no hash involved). Writes change this copy only, so the command
/// layer writes through its hash store, never through this.
impl super::SlotStore for OrderedSlots {
    fn get(&mut self, res_ms: i64, index: i64) -> Option<i64> {
        OrderedSlots::get(self, &(res_ms, index)).copied()
    }
    fn put(&mut self, res_ms: i64, index: i64, count: i64) {
        self.insert((res_ms, index), count);
    }
    fn get_many(&mut self, slots: &[(i64, i64)], out: &mut [Option<i64>]) {
        OrderedSlots::get_many(self, slots, out);
    }
    fn put_many(&mut self, slots: &[(i64, i64, i64)]) {
        self.insert_many(slots);
    }
    fn remove(&mut self, res_ms: i64, index: i64) -> bool {
        OrderedSlots::remove(self, &(res_ms, index)).is_some()
    }
    fn stored_slots(&mut self) -> usize {
        self.len
    }
    fn each_slot(&mut self, f: &mut dyn FnMut(i64, i64, i64)) {
        for ((res_ms, index), count) in self.iter() {
            f(res_ms, index, count);
        }
    }
    fn ordered_slots(&mut self, res_ms: i64, lo: i64, hi: i64, out: &mut Vec<(i64, i64)>) {
        if lo <= hi {
            out.extend(self.range(res_ms, lo, hi));
        }
    }
    fn probes_are_cheap(&mut self, _probes: i64) -> bool {
        true
    }
    fn range_sum(&mut self, res_ms: i64, lo: i64, hi: i64) -> Option<i128> {
        Some(OrderedSlots::range_sum(self, res_ms, lo, hi))
    }
}

#[cfg(test)]
mod tests;
