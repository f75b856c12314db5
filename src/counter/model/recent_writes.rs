//! Which counters are written often: a small fixed table of recent write counts per key,
//! telling the counter commands when a key's in-memory mirror is worth building
//! ([`RecentWrites`]), and a mirrored key's writes within one second, telling when its
//! hash is worth the hashtable encoding ([`HotWrites`]).
//!
//! Why hand-written: a direct-mapped table of 1024 counts, no allocation and one cache
//! line per write, forgets by being overwritten; a map (or an LRU crate, none of which
//! `Cargo.lock` holds) would allocate per key and need evicting. Every write to a counter
//! without a mirror counts here (`make bench`: TSCOUNTER.INCR 100k keys).
//!
//! Owns: those counts. May not touch: Redis (pure).

use std::os::raw::c_int;

use crate::collections::name_set::NameIds;

/// Writes to a key without a mirror, counted by a hash of (db, name): a key written this
/// often lately gets a mirror built by its next write, so hot counters stop reading their
/// hash while a crowd of keys written once each never pays for a scan.
const WRITES_BEFORE_MIRROR: u8 = 3;
/// Keys whose writes are counted at once: a direct-mapped table of this many entries. A
/// key keeps its entry for about this many writes of other keys, so among many keys
/// written at random, few reach the count by chance (each such build walks a hash).
const COUNTED_KEYS: usize = 1024;

/// One entry of [`RecentWrites`]: the high bits of the key's id, and its writes.
#[derive(Clone, Copy, Default)]
struct WriteCount {
    tag: u32,
    writes: u8,
}

/// Writes counted per key without a mirror (the counter commands keep one): a fixed
/// table (8 KB, no allocation per write) where each key has one entry, chosen by its id;
/// a key written after another took its entry starts counting again. The count only
/// decides when a mirror is worth building: a key that looks hot by chance (two keys with
/// the same id) costs one build, never a wrong answer.
pub struct RecentWrites {
    counts: Box<[WriteCount; COUNTED_KEYS]>,
    ids: NameIds,
}

impl Default for RecentWrites {
    fn default() -> Self {
        RecentWrites {
            counts: Box::new([WriteCount::default(); COUNTED_KEYS]),
            ids: NameIds::default(),
        }
    }
}

impl RecentWrites {
    /// Counts a write to `name` in `db`; true when the key has been written
    /// [`WRITES_BEFORE_MIRROR`] times while it held its entry (the count then starts over).
    pub fn count(&mut self, db: c_int, name: &[u8]) -> bool {
        let id = self.ids.id(name) ^ (db as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let tag = (id >> 32) as u32;
        let Some(entry) = self.counts.get_mut(id as usize % COUNTED_KEYS) else {
            return false;
        };
        if entry.tag != tag || entry.writes == 0 {
            *entry = WriteCount { tag, writes: 0 };
        }
        entry.writes = entry.writes.saturating_add(1);
        if entry.writes >= WRITES_BEFORE_MIRROR {
            entry.writes = 0;
            return true;
        }
        false
    }
}

/// Writes within one second that make a mirrored key hot enough for the hashtable
/// encoding of its hash (the command layer's `HASHTABLE_MIN_FIELDS` says from what size).
pub const HOT_WRITES_PER_SECOND: u32 = 64;

/// A mirrored key's writes counted within the current second, until it is found hot.
#[derive(Default)]
pub struct HotWrites {
    /// The second counted in (ms / 1000).
    second: i64,
    writes: u32,
    /// The hash was asked into the hashtable encoding: asked once only.
    asked: bool,
}

impl HotWrites {
    /// Counts a write at `now` (ms, asked only while it matters); true once, when the key
    /// has become hot enough for the hashtable encoding.
    pub fn wants_hashtable(&mut self, now: impl FnOnce() -> i64) -> bool {
        if self.asked {
            return false;
        }
        let second = now().div_euclid(1000);
        if second != self.second {
            self.second = second;
            self.writes = 0;
        }
        self.writes = self.writes.saturating_add(1);
        self.asked = self.writes >= HOT_WRITES_PER_SECOND;
        self.asked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_written_again_and_again_is_counted_hot_and_a_crowd_is_not() {
        let mut recent = RecentWrites::default();
        // Three writes in a row: hot once, then counted again from zero.
        assert!(!recent.count(0, b"hot"));
        assert!(!recent.count(0, b"hot"));
        assert!(recent.count(0, b"hot"));
        assert!(!recent.count(0, b"hot"));
        // The same name in another database is another key.
        assert!(!recent.count(1, b"hot"));
        // A crowd of keys written a few times each in turn, far more keys than entries:
        // almost none looks hot.
        let hot = (0..3)
            .flat_map(|_| 0..100_000)
            .filter(|i| recent.count(0, format!("c:{i}").as_bytes()))
            .count();
        assert!(hot < 1_000, "{hot} keys of a crowd looked hot");
    }

    #[test]
    fn a_key_is_hot_after_enough_writes_within_one_second_and_asked_once() {
        let mut hot = HotWrites::default();
        // Writes spread over seconds never make it hot.
        for i in 0..1000 {
            assert!(!hot.wants_hashtable(|| 5_000 + i * (1000 / 8)), "write {i}");
        }
        let mut hot = HotWrites::default();
        let start = 1_795_424_400_000;
        for i in 0..HOT_WRITES_PER_SECOND - 1 {
            assert!(!hot.wants_hashtable(|| start + i as i64));
        }
        assert!(hot.wants_hashtable(|| start + 999));
        // Once asked, never again, and the clock is not read.
        for _ in 0..1000 {
            assert!(!hot.wants_hashtable(|| unreachable!("clock read")));
        }
        // The count starts over in a new second.
        let mut hot = HotWrites::default();
        for i in 0..HOT_WRITES_PER_SECOND - 1 {
            assert!(!hot.wants_hashtable(|| start + 500 + i as i64 * 5));
        }
        assert!(!hot.wants_hashtable(|| start + 1000));
    }
}
