//! The reference model of a leaderboard that rank tests check replies against: counts by
//! slot index and member, summed and ordered the way TSRANK answers.

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
