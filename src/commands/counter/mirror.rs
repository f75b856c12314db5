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

use crate::collections::memo_map::DbMaps;
use crate::counter::{Counter, HotWrites, OrderedSlots};

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
    /// Writes within the current second, to move a hot key's hash to the hashtable
    /// encoding (see [`HASHTABLE_MIN_FIELDS`]).
    pub writes: HotWrites,
    /// The bytes this mirror was last counted at in [`Mirrors::bytes`].
    counted_bytes: usize,
}

/// A mirrored hash with at least this many fields, written at least
/// `HOT_WRITES_PER_SECOND` times within one second (see [`HotWrites`]), is moved to the
/// hashtable encoding. An increment looks up one field per resolution and a listpack is
/// searched from its start (the newest slots, the ones written, are at its end): at 16
/// fields, 7 listpack lookups already cost about what 7 hashtable ones do, and at 256
/// fields twenty times more. The hashtable costs 2-3 times the memory, hence only for keys
/// written that often (a few, by nature) and never for the many counters written now and
/// then.
pub const HASHTABLE_MIN_FIELDS: usize = 16;

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
}

/// Every mirror, with its totals (held in the family's `Caches`).
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

impl Mirrors {
    /// Runs `f` with the mirror of `name` in `db` if there is a valid one. A missing or
    /// stale mirror is rebuilt from `load` (every stored slot; false: not to be mirrored)
    /// first when `wanted` says so (asked only then). `fields` is the hash's current field
    /// count.
    pub(super) fn with_mirror<T>(
        &mut self,
        (db, name, fields): (c_int, &[u8], usize),
        wanted: impl FnOnce() -> bool,
        load: &mut dyn FnMut(&mut Mirror) -> bool,
        f: impl FnOnce(Option<&mut Mirror>) -> T,
    ) -> T {
        let mirrors = self;
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
            let wanted = wanted();
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

    /// The mirror of `name` in `db` if it is valid for a hash of `fields` fields.
    pub(super) fn valid(&mut self, db: c_int, name: &[u8], fields: usize) -> Option<&mut Mirror> {
        let mirror = self.by_db.db(db)?.get_mut(name)?;
        (mirror.fields == fields).then_some(mirror)
    }
}
