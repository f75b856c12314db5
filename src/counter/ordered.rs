//! An ordered copy of a counter's slots (the read mirrors keep one per cached counter),
//! with running totals per resolution so that a long window is summed with two binary
//! searches instead of a walk.
//!
//! Owns: that data structure. May not touch: Redis (pure).

use std::collections::BTreeMap;

/// A counter's slots in order, with running totals per resolution for long range sums.
#[derive(Default)]
pub struct OrderedSlots {
    map: BTreeMap<(i64, i64), i64>,
    /// Per resolution: `(slot index, total of the slots up to and including it)`, built by
    /// the first long range sum and kept in step by writes at its end (the usual writes:
    /// the newest slot); a write anywhere else drops it. At most one entry per slot.
    totals: Vec<(i64, Vec<(i64, i128)>)>,
}

/// Range sums spanning fewer slot positions than this walk the slots.
const SHORT_RANGE: i64 = 64;

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
        self.follow(res_ms, index, delta, old.is_none());
        old
    }

    pub fn remove(&mut self, &(res_ms, index): &(i64, i64)) -> Option<i64> {
        let old = self.map.remove(&(res_ms, index))?;
        let at = self.totals.iter().position(|(r, _)| *r == res_ms);
        if let Some(at) = at {
            let keep = self
                .totals
                .get_mut(at)
                .is_some_and(|(_, t)| t.last().is_some_and(|l| l.0 == index) && t.pop().is_some());
            if !keep {
                self.totals.swap_remove(at);
            }
        }
        Some(old)
    }

    /// Keeps the running totals of `res_ms` in step with a write of `delta` at `index`
    /// (`new`: the slot was not stored before), or drops them.
    fn follow(&mut self, res_ms: i64, index: i64, delta: i128, new: bool) {
        let Some(at) = self.totals.iter().position(|(r, _)| *r == res_ms) else {
            return;
        };
        let kept = self
            .totals
            .get_mut(at)
            .is_some_and(|(_, totals)| match totals.last_mut() {
                Some(last) if last.0 == index && !new => {
                    last.1 += delta;
                    true
                }
                Some(&mut (last_index, total)) if index > last_index && new => {
                    totals.push((index, total + delta));
                    true
                }
                None if new => {
                    totals.push((index, delta));
                    true
                }
                _ => false,
            });
        if !kept {
            self.totals.swap_remove(at);
        }
    }

    /// The sum of the slots `lo ..= hi` of resolution `res_ms`.
    pub fn range_sum(&mut self, res_ms: i64, lo: i64, hi: i64) -> i128 {
        let kept = self.totals.iter().position(|(r, _)| *r == res_ms);
        // Running totals answer any range with two binary searches; without them, a short
        // range is walked rather than building them.
        if kept.is_none() && hi.saturating_sub(lo) < SHORT_RANGE {
            let slots = self.map.range((res_ms, lo)..=(res_ms, hi));
            return slots.map(|(_, &count)| i128::from(count)).sum();
        }
        let at = match kept {
            Some(at) => at,
            None => {
                let mut total = 0i128;
                let totals = self
                    .map
                    .range((res_ms, i64::MIN)..=(res_ms, i64::MAX))
                    .map(|(&(_, index), &count)| {
                        total += i128::from(count);
                        (index, total)
                    })
                    .collect();
                self.totals.push((res_ms, totals));
                self.totals.len() - 1
            }
        };
        let Some((_, totals)) = self.totals.get(at) else {
            return 0;
        };
        // Total of the slots before position `n` of `totals`.
        let before = |n: usize| {
            n.checked_sub(1)
                .and_then(|k| totals.get(k))
                .map_or(0, |&(_, total)| total)
        };
        let from = totals.partition_point(|&(i, _)| i < lo);
        let to = totals.partition_point(|&(i, _)| i <= hi);
        before(to) - before(from)
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
                    let index = if rng.below(2) == 0 {
                        newest[r]
                    } else {
                        newest[r] - rng.below(300)
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
