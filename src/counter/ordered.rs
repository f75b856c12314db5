//! An ordered copy of a counter's slots (the read mirrors keep one per cached counter),
//! with running totals per resolution so that any window is summed with two binary
//! searches instead of a walk.
//!
//! Owns: that data structure. May not touch: Redis (pure).

use std::collections::{BTreeMap, VecDeque};

/// A counter's slots in order, with running totals per resolution for range sums.
#[derive(Default)]
pub struct OrderedSlots {
    map: BTreeMap<(i64, i64), i64>,
    /// Per resolution, built by its first range sum and kept in step by the usual writes
    /// (at its newest slot, and trimming at its oldest); a write anywhere else drops it.
    totals: Vec<(i64, Totals)>,
}

/// Running totals of one resolution's stored slots, oldest first.
struct Totals {
    /// `(slot index, total of the slots up to and including it)`, one entry per slot.
    running: VecDeque<(i64, i128)>,
    /// The running total before the first entry: what the slots trimmed since the totals
    /// were built held (every later entry still includes them, so differences stay exact).
    base: i128,
}

impl Totals {
    /// The total of the entries before position `n`.
    fn before(&self, n: usize) -> i128 {
        n.checked_sub(1)
            .and_then(|k| self.running.get(k))
            .map_or(self.base, |&(_, total)| total)
    }

    /// The position of the first entry whose slot index is `lo` or more. Indexes are
    /// distinct and increasing, so it is at most `lo - first index`, and exactly that when
    /// no slot is missing in between (the usual busy counter): checked, then searched.
    fn first_at_or_after(&self, lo: i64) -> usize {
        let len = self.running.len();
        if let Some(&(first, _)) = self.running.front() {
            let guess = usize::try_from(lo.saturating_sub(first)).map_or(0, |g| g.min(len));
            let before_ok = guess
                .checked_sub(1)
                .and_then(|k| self.running.get(k))
                .is_none_or(|&(index, _)| index < lo);
            let at_ok = self
                .running
                .get(guess)
                .is_none_or(|&(index, _)| index >= lo);
            if before_ok && at_ok {
                return guess;
            }
        }
        self.running.partition_point(|&(i, _)| i < lo)
    }

    fn newest(&self) -> i128 {
        self.before(self.running.len())
    }

    /// Follows a write of `delta` at `index` (`new`: the slot was not stored before);
    /// false when the totals cannot follow it and must be dropped.
    fn follow(&mut self, index: i64, delta: i128, new: bool) -> bool {
        let newest = self.newest();
        match self.running.back_mut() {
            Some(last) if last.0 == index && !new => {
                last.1 += delta;
                true
            }
            Some(&mut (last_index, _)) if index > last_index && new => {
                self.running.push_back((index, newest + delta));
                true
            }
            None if new => {
                self.running.push_back((index, newest + delta));
                true
            }
            _ => false,
        }
    }

    /// Follows the removal of the slot at `index`; false when the totals must be dropped.
    fn forget(&mut self, index: i64) -> bool {
        match (self.running.front(), self.running.back()) {
            (Some(&(first, total)), _) if first == index => {
                self.base = total;
                self.running.pop_front();
                true
            }
            (_, Some(&(last, _))) if last == index => {
                self.running.pop_back();
                true
            }
            _ => false,
        }
    }
}

impl OrderedSlots {
    pub fn get(&self, slot: &(i64, i64)) -> Option<&i64> {
        self.map.get(slot)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn iter(&self) -> std::collections::btree_map::Iter<'_, (i64, i64), i64> {
        self.map.iter()
    }

    pub fn range(
        &self,
        slots: std::ops::RangeInclusive<(i64, i64)>,
    ) -> std::collections::btree_map::Range<'_, (i64, i64), i64> {
        self.map.range(slots)
    }

    pub fn insert(&mut self, (res_ms, index): (i64, i64), count: i64) -> Option<i64> {
        let old = self.map.insert((res_ms, index), count);
        let delta = i128::from(count) - i128::from(old.unwrap_or(0));
        if let Some(at) = self.totals_of(res_ms) {
            let kept = self
                .totals
                .get_mut(at)
                .is_some_and(|(_, totals)| totals.follow(index, delta, old.is_none()));
            if !kept {
                self.totals.swap_remove(at);
            }
        }
        old
    }

    pub fn remove(&mut self, &(res_ms, index): &(i64, i64)) -> Option<i64> {
        let old = self.map.remove(&(res_ms, index))?;
        if let Some(at) = self.totals_of(res_ms) {
            let kept = self
                .totals
                .get_mut(at)
                .is_some_and(|(_, totals)| totals.forget(index));
            if !kept {
                self.totals.swap_remove(at);
            }
        }
        Some(old)
    }

    fn totals_of(&self, res_ms: i64) -> Option<usize> {
        self.totals.iter().position(|(r, _)| *r == res_ms)
    }

    /// The sum of the slots `lo ..= hi` of resolution `res_ms`.
    pub fn range_sum(&mut self, res_ms: i64, lo: i64, hi: i64) -> i128 {
        if lo > hi {
            return 0;
        }
        let at = match self.totals_of(res_ms) {
            Some(at) => at,
            None => {
                // One walk of the resolution's slots, then every range is two binary
                // searches until a write the totals cannot follow.
                let mut total = 0i128;
                let running = self
                    .map
                    .range((res_ms, i64::MIN)..=(res_ms, i64::MAX))
                    .map(|(&(_, index), &count)| {
                        total += i128::from(count);
                        (index, total)
                    })
                    .collect();
                self.totals.push((res_ms, Totals { running, base: 0 }));
                self.totals.len() - 1
            }
        };
        let Some((_, totals)) = self.totals.get(at) else {
            return 0;
        };
        // Windows usually end at the newest slot: no search for that end.
        let to = match totals.running.back() {
            Some(&(newest, _)) if newest <= hi => totals.running.len(),
            _ => totals.running.partition_point(|&(i, _)| i <= hi),
        };
        let from = totals.first_at_or_after(lo);
        totals.before(to) - totals.before(from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Rng;

    /// Random writes, removals and range sums, compared with sums over a plain map.
    #[test]
    fn range_sums_match_a_walk_whatever_the_writes() {
        let mut rng = Rng(5);
        let mut slots = OrderedSlots::default();
        let mut plain: BTreeMap<(i64, i64), i64> = BTreeMap::new();
        let resolutions = [1_000, 60_000];
        let mut newest = [0i64; 2];
        for step in 0..20_000 {
            let r = rng.below(2) as usize;
            let res = resolutions[r];
            match rng.below(10) {
                // Mostly writes at the newest slot or just after it (the hot path).
                0..=4 => {
                    newest[r] += rng.below(2);
                    let count = rng.below(9) - 2;
                    slots.insert((res, newest[r]), count);
                    plain.insert((res, newest[r]), count);
                }
                5 => {
                    let index = newest[r] - rng.below(300);
                    let count = rng.below(9) - 2;
                    slots.insert((res, index), count);
                    plain.insert((res, index), count);
                }
                6 => {
                    // The newest slot, the oldest (trimming) or any.
                    let oldest = plain
                        .range((res, i64::MIN)..)
                        .next()
                        .filter(|(k, _)| k.0 == res)
                        .map(|(k, _)| k.1);
                    let index = match rng.below(3) {
                        0 => newest[r],
                        1 => oldest.filter(|k| *k <= newest[r]).unwrap_or(newest[r]),
                        _ => newest[r] - rng.below(300),
                    };
                    assert_eq!(slots.remove(&(res, index)), plain.remove(&(res, index)));
                }
                _ => {
                    let hi = newest[r] - rng.below(5);
                    let lo = hi - rng.below(400);
                    let want: i128 = plain
                        .range((res, lo)..=(res, hi))
                        .map(|(_, &c)| i128::from(c))
                        .sum();
                    assert_eq!(
                        slots.range_sum(res, lo, hi),
                        want,
                        "step {step}: {lo}..={hi}"
                    );
                }
            }
            assert_eq!(slots.len(), plain.len());
        }
    }
}
