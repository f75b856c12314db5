//! Helpers shared by the unit tests of the pure modules.

use std::collections::BTreeMap;

use crate::counter::model::SlotStore;
use crate::rank::model::{BoardStore, DrainedSlot, NextSource};

/// A counter's slots in a plain ordered map. Range reads use the trait's default (one
/// probe per position) unless made with [`MapStore::ordered`], which reads ranges from the
/// map as the command layer's mirror does (needed for the widest spans).
#[derive(Clone, Default)]
pub struct MapStore(pub BTreeMap<(i64, i64), i64>, bool);

impl MapStore {
    pub fn ordered() -> MapStore {
        MapStore(BTreeMap::new(), true)
    }
}

impl SlotStore for MapStore {
    fn get(&mut self, res_ms: i64, index: i64) -> Option<i64> {
        self.0.get(&(res_ms, index)).copied()
    }
    fn put(&mut self, res_ms: i64, index: i64, count: i64) {
        assert_ne!(count, 0, "zero counts are never stored");
        self.0.insert((res_ms, index), count);
    }
    fn remove(&mut self, res_ms: i64, index: i64) -> bool {
        self.0.remove(&(res_ms, index)).is_some()
    }
    fn stored_slots(&mut self) -> usize {
        self.0.len()
    }
    fn each_slot(&mut self, f: &mut dyn FnMut(i64, i64, i64)) {
        // Reverse order, to prove callers do not rely on any order.
        for (&(r, i), &c) in self.0.iter().rev() {
            f(r, i, c);
        }
    }
    fn ordered_slots(&mut self, res_ms: i64, lo: i64, hi: i64, out: &mut Vec<(i64, i64)>) {
        if !self.1 {
            let mut index = lo;
            while index <= hi {
                if let Some(count) = self.get(res_ms, index) {
                    out.push((index, count));
                }
                index += 1;
            }
        } else if lo <= hi {
            let slots = self.0.range((res_ms, lo)..=(res_ms, hi));
            out.extend(slots.map(|(&(_, index), &count)| (index, count)));
        }
    }
}

/// A leaderboard in plain maps, as the native keys hold it: the sorted set (`totals`), the
/// slot hashes by index with their raw values (so a user's edits can be stored), which of
/// them a command holds open (`open`, all when `None`), the one being drained, and every
/// write made through the store, in order, as the native command it replicates as.
#[derive(Clone, Debug, Default)]
pub struct MemBoard {
    pub totals: BTreeMap<Vec<u8>, i64>,
    pub slots: BTreeMap<i64, BTreeMap<Vec<u8>, Vec<u8>>>,
    pub open: Option<Vec<i64>>,
    pub draining: i64,
    pub writes: Vec<String>,
}

impl MemBoard {
    /// A healthy board's increment (what TSRANK.INCRBY stores): `by` added to the member's
    /// count in slot `index` and to its total.
    pub fn incr(&mut self, index: i64, member: &str, by: i64) {
        let slot = self.slots.entry(index).or_default();
        let count = slot.entry(member.into()).or_insert_with(|| b"0".to_vec());
        let new = crate::args::parse_i64(count).unwrap_or(0) + by;
        *count = new.to_string().into_bytes();
        *self.totals.entry(member.into()).or_insert(0) += by;
    }

    /// `member`'s count in slot `index` as tally reads it (not a positive integer: 0).
    pub fn count(&self, index: i64, member: &[u8]) -> i64 {
        let value = self.slots.get(&index).and_then(|slot| slot.get(member));
        value.map_or(0, |v| crate::args::parse_i64(v).unwrap_or(0).max(0))
    }

    /// `member`'s counts summed over the slots `indexes`.
    pub fn count_over(&self, member: &[u8], indexes: impl IntoIterator<Item = i64>) -> i64 {
        indexes.into_iter().map(|i| self.count(i, member)).sum()
    }

    /// Every member of the sorted set and of the slot hashes.
    pub fn members(&self) -> Vec<Vec<u8>> {
        let mut all: Vec<Vec<u8>> = self.totals.keys().cloned().collect();
        all.extend(self.slots.values().flat_map(|slot| slot.keys().cloned()));
        all.sort();
        all.dedup();
        all
    }

    /// Up to `n` fields of the slot being drained, as a scan step returns them.
    pub fn scan_draining(&self, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let slot = self.slots.get(&self.draining).into_iter().flatten();
        slot.take(n).map(|(m, v)| (m.clone(), v.clone())).collect()
    }

    fn open_slots(&self) -> Vec<i64> {
        match &self.open {
            Some(open) => open.clone(),
            None => self.slots.keys().copied().collect(),
        }
    }
}

impl BoardStore for MemBoard {
    type Member = Vec<u8>;

    fn member(&mut self, name: &[u8]) -> Option<Vec<u8>> {
        Some(name.to_vec())
    }
    fn total(&mut self, member: &Vec<u8>) -> Option<i64> {
        self.totals.get(member).copied()
    }
    fn set_total(&mut self, name: &[u8], member: &Vec<u8>, total: i64) {
        assert!(total > 0, "a total set is positive");
        self.totals.insert(member.clone(), total);
        let name = String::from_utf8_lossy(name);
        self.writes.push(format!("ZADD {total} {name}"));
    }
    fn remove_total(&mut self, name: &[u8], member: &Vec<u8>) {
        self.totals.remove(member);
        self.writes
            .push(format!("ZREM {}", String::from_utf8_lossy(name)));
    }
    fn slot_sum(&mut self, member: &Vec<u8>) -> i64 {
        self.count_over(member, self.open_slots())
    }
}

impl DrainedSlot for MemBoard {
    fn remove_count(&mut self, name: &[u8], member: &Vec<u8>) {
        if let Some(slot) = self.slots.get_mut(&self.draining) {
            slot.remove(member);
            // The server deletes a hash whose last field goes.
            if slot.is_empty() {
                self.slots.remove(&self.draining);
            }
        }
        let name = String::from_utf8_lossy(name);
        self.writes.push(format!("HDEL {} {name}", self.draining));
    }
}

/// Fields a scan step of a [`MemBoard`] returns (a hash scan returns a few at a time).
const SCANNED_PER_STEP: usize = 3;

/// The board's keys as next totals read them; the excluded slot is the one `draining`
/// names (the oldest, the next to leave). A cursor is a position in the map's order.
impl NextSource for MemBoard {
    type Cursor = usize;

    fn new_cursor(&self) -> usize {
        0
    }
    fn scan_totals(&mut self, cursor: &mut usize, out: &mut Vec<(Vec<u8>, Vec<u8>)>) -> bool {
        let rows = self.totals.iter().skip(*cursor).take(SCANNED_PER_STEP);
        out.extend(rows.map(|(m, t)| (m.clone(), t.to_string().into_bytes())));
        *cursor += SCANNED_PER_STEP;
        *cursor < self.totals.len()
    }
    fn scan_slot(
        &mut self,
        index: i64,
        cursor: &mut usize,
        out: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> bool {
        let Some(slot) = self.slots.get(&index) else {
            return false;
        };
        let rows = slot.iter().skip(*cursor).take(SCANNED_PER_STEP);
        out.extend(rows.map(|(m, v)| (m.clone(), v.clone())));
        *cursor += SCANNED_PER_STEP;
        *cursor < slot.len()
    }
    fn total(&mut self, member: &[u8]) -> i64 {
        self.totals.get(member).copied().unwrap_or(0)
    }
    fn excluded_count(&mut self, member: &[u8]) -> i64 {
        self.count(self.draining, member)
    }
}

/// splitmix64: a tiny seeded PRNG, so tests are reproducible from their seed and need no
/// external crate. The same seed always gives the same sequence.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n <= 0` counts as 1, giving 0).
    pub fn below(&mut self, n: i64) -> i64 {
        (self.next_u64() % n.max(1) as u64) as i64
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal via Box-Muller.
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1], safe for ln
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Log-normal, exp(3 + N(0, 1)): positive, skewed, spanning several decades.
    pub fn lognormal(&mut self) -> f64 {
        (3.0 + self.normal()).exp()
    }
}
