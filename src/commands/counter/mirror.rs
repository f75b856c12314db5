//! In-memory mirrors of the slot counts of recently read counters.
//!
//! Why: a counter's hash is usually listpack-encoded (up to 512 fields by default), where
//! every field lookup is a linear scan. A SUM over 180 daily slots would cost 180 such scans.
//! A mirror, an ordered copy of the slots, answers any window with one range walk.
//!
//! Correctness rules. The hash stays the only source of truth; a mirror is a cache that is
//! dropped whenever it might be stale:
//! * tally's own writes go through `HashSlots`, which updates hash and mirror together;
//! * any keyspace event on a mirrored key (a user's HSET/HDEL/DEL, RENAME, RESTORE, expiry,
//!   eviction, effects arriving on a replica, ...) drops its mirror;
//! * flushes, SWAPDB and loading drop every mirror;
//! * every use first compares the hash's field count with the one recorded.
//!
//! Mirrors are built by reads (SUM, RANGE) and maintained by writes; a write to a counter
//! without a mirror does not build one (that would cost a full scan of the hash).
//!
//! Owns: the counters' read cache. May not touch: keys (it is given slots by the counter
//! commands).

use std::os::raw::c_int;

use super::caches::Caches;
use crate::counter::{Counter, OrderedSlots};
use crate::memo_map::DbMaps;

/// A counter with more slots than this is never mirrored: building its mirror walks its
/// whole hash inside one command (0.3-1 ms per thousand fields, the most on servers built
/// with libc malloc), and it would take a large part of the cache. Its reads probe or walk
/// its hash instead, bounded by the slots a counter may keep (`MAX_SAMPLES`).
pub const MAX_SLOTS_PER_MIRROR: usize = 4096;

/// What an allocation costs besides the bytes asked: the allocator's header and rounding
/// (16 bytes with glibc malloc, which some servers are built with; jemalloc rounds up to
/// size classes).
const PER_ALLOCATION: usize = 16;

/// The least a mirror holds per field of its hash: a slot and its running total.
const MIN_BYTES_PER_FIELD: usize = std::mem::size_of::<(i64, i64)>() + std::mem::size_of::<i128>();

/// Estimated bytes of a mirror besides its slots and parsed counter: its entry in the
/// map (vector slot, index entry, shared name header) and the allocator's rounding.
const ENTRY_OVERHEAD: usize = std::mem::size_of::<Mirror>() + 96;

#[derive(Default)]
pub struct Mirror {
    /// (resolution ms, slot index) -> count, for every stored slot.
    pub slots: OrderedSlots,
    /// Field count of the hash when the mirror was last known to match it.
    pub fields: usize,
    /// The counter's settings and bookkeeping as last written by tally (its `_tally` and
    /// `_state`, parsed), so a command on a mirrored counter reads nothing from the hash.
    pub counter: Option<Counter>,
    /// Writes counted in the second `write_second` (ms / 1000), to tell a hot key.
    write_second: i64,
    writes_in_second: u32,
    /// The hash was asked into the hashtable encoding (see [`Mirror::wants_hashtable`]).
    hashtable_asked: bool,
    /// The bytes this mirror was last counted at in [`Mirrors::bytes`].
    counted_bytes: usize,
}

/// A mirrored hash with at least this many fields, written at least
/// [`HOT_WRITES_PER_SECOND`] times within one second, is moved to the hashtable encoding.
/// An increment looks up one field per resolution and a listpack is searched from its
/// start (the newest slots, the ones written, are at its end): at 16 fields, 7 listpack
/// lookups already cost about what 7 hashtable ones do, and at 256 fields twenty times
/// more. The hashtable costs 2-3 times the memory, hence only for keys written that often
/// (a few, by nature) and never for the many counters written now and then.
pub const HASHTABLE_MIN_FIELDS: usize = 16;
pub const HOT_WRITES_PER_SECOND: u32 = 64;

impl Mirror {
    /// Estimated bytes this mirror holds under `name`.
    fn bytes(&self, name: &[u8]) -> usize {
        ENTRY_OVERHEAD
            + name.len()
            + self.slots.heap_bytes(PER_ALLOCATION)
            + self
                .counter
                .as_ref()
                .map_or(0, |c| c.heap_bytes(PER_ALLOCATION))
    }

    /// Counts a write at `now` (ms, asked only while it matters); true once, when the key
    /// has become hot enough for the hashtable encoding.
    pub fn wants_hashtable(&mut self, now: impl FnOnce() -> i64) -> bool {
        if self.hashtable_asked {
            return false;
        }
        let second = now().div_euclid(1000);
        if second != self.write_second {
            self.write_second = second;
            self.writes_in_second = 0;
        }
        self.writes_in_second = self.writes_in_second.saturating_add(1);
        self.hashtable_asked = self.writes_in_second >= HOT_WRITES_PER_SECOND;
        self.hashtable_asked
    }
}

/// Every mirror, with its totals (held in [`Caches::mirrors`]).
#[derive(Default)]
pub(super) struct Mirrors {
    /// Per database (a lookup hashes only the key name, and a key used again right after
    /// is found without hashing it).
    by_db: DbMaps<Mirror>,
    pub(super) slots: usize,
    /// Estimated bytes of every mirror, kept within the budget the caller gives.
    pub(super) bytes: usize,
    /// Where eviction takes its next mirror (see `DbMaps::evict_next`).
    hand: usize,
}

impl Mirrors {
    /// Drops the mirror of one key.
    pub(super) fn forget(&mut self, db: c_int, name: &[u8]) {
        let removed = self.by_db.db(db).and_then(|keys| keys.remove(name));
        if let Some(old) = removed {
            self.uncount(&old);
        }
    }

    /// Takes a removed mirror out of the totals.
    fn uncount(&mut self, old: &Mirror) {
        self.slots = self.slots.saturating_sub(old.slots.len());
        self.bytes = self.bytes.saturating_sub(old.counted_bytes);
    }

    /// Evicts mirrors in turn until at most `limit` bytes are held.
    fn evict_to(&mut self, limit: usize) {
        while self.bytes > limit {
            let Some((_, old)) = self.by_db.evict_next(&mut self.hand) else {
                // Nothing left to evict: the totals can only be drift.
                self.slots = 0;
                self.bytes = 0;
                return;
            };
            self.uncount(&old);
        }
    }
}

/// When a missing mirror is built from the hash.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Build {
    /// Reads: a large counter read once is likely read again.
    Always,
    /// Writes: only once the key has been written [`WRITES_BEFORE_MIRROR`] times lately.
    IfHot,
    Never,
}

/// What the mirrors may hold now: the counters' share of the read caches' budget.
fn budget() -> usize {
    crate::commands::caches::budget_of(crate::layout::COUNTER)
}

impl Caches {
    /// Runs `f` with the mirror of `name` in `db` if there is a valid one. A missing or stale
    /// mirror is rebuilt from `load` (every stored slot; false: not to be mirrored) first when
    /// `build` says so. `fields` is the hash's current field count.
    pub fn with_mirror<T>(
        &self,
        db: c_int,
        name: &[u8],
        fields: usize,
        build: Build,
        load: &mut dyn FnMut(&mut Mirror) -> bool,
        f: impl FnOnce(Option<&mut Mirror>) -> T,
    ) -> T {
        let Ok(mut mirrors) = self.mirrors.try_borrow_mut() else {
            return f(None);
        };
        if self.clear_pending.replace(false) {
            *mirrors = Mirrors::default();
        }
        // The common case, one lookup: a valid mirror.
        let valid = match mirrors.by_db.db_or_new(db).get_mut(name) {
            Some(mirror) if mirror.fields == fields => true,
            Some(_) => {
                // Stale: the hash changed behind it.
                if let Some(old) = mirrors.by_db.db_or_new(db).remove(name) {
                    mirrors.uncount(&old);
                }
                false
            }
            None => false,
        };
        if !valid {
            let wanted = match build {
                Build::Always => true,
                Build::IfHot => self.is_hot(db, name),
                Build::Never => false,
            };
            // Asked here, where a mirror may be made (and by every write to a key
            // without one, new keys included): never while memory is tight. With no
            // mirror held there is nothing to give back, and no build: nothing to ask.
            if !wanted && mirrors.bytes == 0 {
                return f(None);
            }
            let budget = budget();
            mirrors.evict_to(budget);
            // A hash whose slots alone would not fit is never walked to find that out
            // (every field is at least a slot and its running total).
            if !wanted || fields.saturating_mul(MIN_BYTES_PER_FIELD) > budget {
                return f(None);
            }
            let mut mirror = Mirror {
                fields,
                ..Mirror::default()
            };
            if !load(&mut mirror) || mirror.slots.len() > MAX_SLOTS_PER_MIRROR {
                return f(None);
            }
            mirror.counted_bytes = mirror.bytes(name);
            if mirror.counted_bytes > budget {
                return f(None);
            }
            mirrors.evict_to(budget - mirror.counted_bytes);
            mirrors.slots += mirror.slots.len();
            mirrors.bytes += mirror.counted_bytes;
            mirrors.by_db.db_or_new(db).insert(name, mirror);
        }
        let Some(mirror) = mirrors.by_db.db_or_new(db).get_mut(name) else {
            return f(None);
        };
        let before = mirror.slots.len();
        let result = f(Some(&mut *mirror));
        let after = mirror.slots.len();
        let (old_bytes, new_bytes) = if after != before || !valid {
            // Slots came or went (or the parsed counter was just kept): count again.
            let new_bytes = mirror.bytes(name);
            (
                std::mem::replace(&mut mirror.counted_bytes, new_bytes),
                new_bytes,
            )
        } else {
            (mirror.counted_bytes, mirror.counted_bytes)
        };
        mirrors.slots = (mirrors.slots + after).saturating_sub(before);
        mirrors.bytes = (mirrors.bytes + new_bytes).saturating_sub(old_bytes);
        if after > MAX_SLOTS_PER_MIRROR {
            // Grown past the limit by writes: this one goes, the others stay.
            if let Some(old) = mirrors.by_db.db_or_new(db).remove(name) {
                mirrors.uncount(&old);
            }
        }
        if new_bytes != old_bytes {
            mirrors.evict_to(budget());
        }
        result
    }

    /// Runs `f` with the mirror of `name` in `db` if there is one valid for a hash of `fields`
    /// fields (`None` otherwise: nothing is built). For reads: `f` must not change the slots.
    pub fn with_valid_mirror<T>(
        &self,
        db: c_int,
        name: &[u8],
        fields: usize,
        f: impl FnOnce(&mut Mirror) -> T,
    ) -> Option<T> {
        let mut mirrors = self.mirrors.try_borrow_mut().ok()?;
        if self.clear_pending.get() {
            return None;
        }
        let mirror = mirrors.by_db.db(db)?.get_mut(name)?;
        if mirror.fields != fields {
            return None;
        }
        Some(f(mirror))
    }
}

impl Caches {
    /// Counts a write to `name` in `db` (a key without a mirror); true when the key is written
    /// often enough to be worth one.
    fn is_hot(&self, db: c_int, name: &[u8]) -> bool {
        self.recent_writes
            .try_borrow_mut()
            .is_ok_and(|mut recent| recent.count(db, name))
    }

    /// A copy of the parsed counter kept with the mirror of `name` in `db`, if the mirror is
    /// valid for a hash of `fields` fields.
    pub fn cached_counter(&self, db: c_int, name: &[u8], fields: usize) -> Option<Counter> {
        self.with_valid_mirror(db, name, fields, |mirror| mirror.counter.clone())
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_hot_after_enough_writes_within_one_second_and_asked_once() {
        let mut mirror = Mirror::default();
        // Writes spread over seconds never make it hot.
        for i in 0..1000 {
            assert!(
                !mirror.wants_hashtable(|| 5_000 + i * (1000 / 8)),
                "write {i}"
            );
        }
        let mut mirror = Mirror::default();
        let start = 1_795_424_400_000;
        for i in 0..HOT_WRITES_PER_SECOND - 1 {
            assert!(!mirror.wants_hashtable(|| start + i as i64));
        }
        assert!(mirror.wants_hashtable(|| start + 999));
        // Once asked, never again, and the clock is not read.
        for _ in 0..1000 {
            assert!(!mirror.wants_hashtable(|| unreachable!("clock read")));
        }
        // The count starts over in a new second.
        let mut mirror = Mirror::default();
        for i in 0..HOT_WRITES_PER_SECOND - 1 {
            assert!(!mirror.wants_hashtable(|| start + 500 + i as i64 * 5));
        }
        assert!(!mirror.wants_hashtable(|| start + 1000));
    }
}
