//! Helpers shared by the unit tests of the pure modules.

use std::collections::BTreeMap;

use crate::counter::SlotStore;

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
