//! The reference model of a leaderboard that rank tests check replies against: counts by
//! slot index and member, summed and ordered the way TSRANK answers. Counts go up and
//! down (negative increments) but never below 0; a member can be removed everywhere.

use std::collections::BTreeMap;

/// Reference model: slot index -> member -> count.
#[derive(Default)]
pub struct RankModel {
    pub slots: BTreeMap<i64, BTreeMap<String, i64>>,
}

impl RankModel {
    /// Adds `n` to `member` in slot `slot`.
    pub fn add(&mut self, slot: i64, member: &str, n: i64) {
        *self
            .slots
            .entry(slot)
            .or_default()
            .entry(member.to_string())
            .or_default() += n;
    }

    /// Applies one INCRBY's `(increment, member)` pairs to slot `slot`, all or none: `None`
    /// (nothing applied) if a count would go below 0 on the way, else each pair's new total
    /// over slots `from ..= to`.
    pub fn incrby(
        &mut self,
        slot: i64,
        pairs: &[(i64, String)],
        (from, to): (i64, i64),
    ) -> Option<Vec<i64>> {
        let mut trial = self.slots.get(&slot).cloned().unwrap_or_default();
        for (n, member) in pairs {
            let count = trial.entry(member.clone()).or_default();
            *count += n;
            if *count < 0 {
                return None;
            }
        }
        let mut replies = Vec::new();
        for (n, member) in pairs {
            self.add(slot, member, *n);
            replies.push(self.totals(from, to).get(member).copied().unwrap_or(0));
        }
        Some(replies)
    }

    /// Removes `members` from every slot; returns how many of them (each counted once) had
    /// a non-zero total over slots `from ..= to`.
    pub fn rem(&mut self, members: &[String], (from, to): (i64, i64)) -> i64 {
        let totals = self.totals(from, to);
        let distinct: std::collections::BTreeSet<&String> = members.iter().collect();
        let had = distinct
            .iter()
            .filter(|m| totals.get(**m).copied().unwrap_or(0) > 0)
            .count();
        for counts in self.slots.values_mut() {
            for m in members {
                counts.remove(m);
            }
        }
        had as i64
    }

    /// Slots in `from ..= to` that hold a non-zero count.
    pub fn live_slots(&self, from: i64, to: i64) -> usize {
        self.slots
            .range(from..=to)
            .filter(|(_, counts)| counts.values().any(|c| *c > 0))
            .count()
    }

    /// Totals over slots `from ..= to`.
    pub fn totals(&self, from: i64, to: i64) -> BTreeMap<String, i64> {
        let mut out = BTreeMap::new();
        for (_, counts) in self.slots.range(from..=to) {
            for (m, c) in counts {
                *out.entry(m.clone()).or_default() += c;
            }
        }
        out
    }

    /// Positive `totals` in leaderboard order: total descending, ties by member descending
    /// (as `ZREVRANGE` orders them).
    pub fn ranked(totals: &BTreeMap<String, i64>) -> Vec<(String, i64)> {
        let mut v: Vec<(String, i64)> = totals
            .iter()
            .filter(|(_, t)| **t > 0)
            .map(|(m, t)| (m.clone(), *t))
            .collect();
        v.sort_by(|a, b| {
            b.1.cmp(&a.1)
                .then_with(|| b.0.as_bytes().cmp(a.0.as_bytes()))
        });
        v
    }

    /// `member`'s non-zero counts in slots `from ..= to` as `(slot start, count)`, oldest
    /// first (what TSRANK.HISTORY answers).
    pub fn history(&self, member: &str, from: i64, to: i64, slot_ms: i64) -> Vec<(i64, i64)> {
        self.slots
            .range(from..=to)
            .filter_map(|(slot, counts)| {
                let n = counts.get(member).copied().unwrap_or(0);
                (n > 0).then_some((slot * slot_ms, n))
            })
            .collect()
    }
}
