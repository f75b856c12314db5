//! In-memory mirrors of the slot counts of recently read counters, and their accounting.
//!
//! Why: a counter's hash is usually listpack-encoded (up to 512 fields by default), where
//! every field lookup is a linear scan. A SUM over 180 daily slots would cost 180 such scans.
//! A mirror, an ordered copy of the slots, answers any window with one range walk.
//!
//! Correctness rules (kept by the command layer, `counter::commands`). The hash stays the
//! only source of truth; a mirror is a cache that is dropped whenever it might be stale:
//! * tally's own writes go through its `HashSlots`, which updates hash and mirror together;
//! * any keyspace event on a mirrored key (a user's HSET/HDEL/DEL, RENAME, RESTORE, expiry,
//!   eviction, effects arriving on a replica, ...) drops its mirror;
//! * flushes, SWAPDB and loading drop every mirror;
//! * every use first compares the hash's field count with the one recorded ([`Mirrors::find`]).
//!
//! Mirrors are built by reads (SUM, RANGE) and by writes to hot keys; a write to a counter
//! written now and then does not build one (that would cost a full scan of the hash).
//! Their bytes stay within the budget each call is given (the read caches' share the
//! command layer computes).
//!
//! Owns: the mirrors and their byte accounting. May not touch: Redis (pure; the command
//! layer gives it the slots it reads from a hash).

use crate::collections::memo_map::DbMaps;
use crate::counter::model::{Counter, HotWrites, OrderedSlots};

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

/// A mirrored hash with at least this many fields, written at least
/// `HOT_WRITES_PER_SECOND` times within one second (see [`HotWrites`]), is moved to the
/// hashtable encoding. An increment looks up one field per resolution and a listpack is
/// searched from its start (the newest slots, the ones written, are at its end): at 16
/// fields, 7 listpack lookups already cost about what 7 hashtable ones do, and at 256
/// fields twenty times more. The hashtable costs 2-3 times the memory, hence only for keys
/// written that often (a few, by nature) and never for the many counters written now and
/// then.
pub const HASHTABLE_MIN_FIELDS: usize = 16;

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

impl Mirror {
    /// An empty mirror of a hash of `fields` fields, to be filled with its slots.
    pub fn of_fields(fields: usize) -> Mirror {
        Mirror {
            fields,
            ..Mirror::default()
        }
    }

    /// Estimated bytes this mirror holds under a name of `name_len` bytes.
    fn bytes(&self, name_len: usize) -> usize {
        ENTRY_OVERHEAD
            + name_len
            + self.slots.heap_bytes(PER_ALLOCATION)
            + self
                .counter
                .as_ref()
                .map_or(0, |c| c.heap_bytes(PER_ALLOCATION))
    }
}

/// Where a mirror is in [`Mirrors`], valid until the mirrors change (no other mirror is
/// added or removed while a command holds one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MirrorAt {
    db: i32,
    entry: usize,
}

/// Every mirror, with its totals.
#[derive(Default)]
pub struct Mirrors {
    /// Per database (a lookup hashes only the key name, and a key used again right after
    /// is found without hashing it).
    by_db: DbMaps<Mirror>,
    slots: usize,
    /// Estimated bytes of every mirror, kept within the budget each call gives.
    bytes: usize,
    /// Where eviction takes its next mirror (see `DbMaps::evict_next`).
    hand: usize,
}

impl Mirrors {
    /// Estimated bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Slots held (`INFO tally`).
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Drops the mirror of one key.
    pub fn forget(&mut self, db: i32, name: &[u8]) {
        let removed = self.by_db.db(db).and_then(|keys| keys.remove(name));
        if let Some(old) = removed {
            self.uncount(&old);
        }
    }

    /// The valid mirror of `name` in `db`, one whose hash has `fields` fields; a stale one
    /// (the hash changed behind it) is dropped.
    #[inline]
    pub fn find(&mut self, db: i32, name: &[u8], fields: usize) -> Option<MirrorAt> {
        let keys = self.by_db.db(db)?;
        let entry = keys.position(name)?;
        let (_, mirror) = keys.at_mut(entry)?;
        if mirror.fields == fields {
            return Some(MirrorAt { db, entry });
        }
        if let Some(old) = keys.remove_at(entry) {
            self.uncount(&old);
        }
        None
    }

    /// The mirror at `at`.
    #[inline]
    pub fn get_mut(&mut self, at: MirrorAt) -> Option<&mut Mirror> {
        let (_, mirror) = self.by_db.db(at.db)?.at_mut(at.entry)?;
        Some(mirror)
    }

    /// Gives memory back down to `budget`, and says whether a hash of `fields` fields may
    /// be mirrored within it (every field is at least a slot and its running total, so a
    /// hash whose slots alone would not fit is never walked to find that out).
    pub fn make_room(&mut self, budget: usize, fields: usize) -> bool {
        self.evict_to(budget);
        fields.saturating_mul(MIN_BYTES_PER_FIELD) <= budget
    }

    /// Keeps `mirror` (just built from its hash) for `name` in `db` if it fits: at most
    /// [`MAX_SLOTS_PER_MIRROR`] slots and `budget` bytes, others evicted to make room.
    pub fn insert(
        &mut self,
        db: i32,
        name: &[u8],
        mut mirror: Mirror,
        budget: usize,
    ) -> Option<MirrorAt> {
        if mirror.slots.len() > MAX_SLOTS_PER_MIRROR {
            return None;
        }
        mirror.counted_bytes = mirror.bytes(name.len());
        let room = budget.checked_sub(mirror.counted_bytes)?;
        self.evict_to(room);
        self.slots += mirror.slots.len();
        self.bytes += mirror.counted_bytes;
        let entry = self.by_db.db_or_new(db).insert_at(name, mirror);
        Some(MirrorAt { db, entry })
    }

    /// Counts the mirror at `at` again after a command used it: `slots_before` is how many
    /// slots it held before, `built` says it was made by this command (its parsed counter
    /// may have been kept with it since). A mirror grown past [`MAX_SLOTS_PER_MIRROR`] goes;
    /// when the bytes changed, others are evicted down to `budget()`.
    pub fn settle(
        &mut self,
        at: MirrorAt,
        slots_before: usize,
        built: bool,
        budget: impl FnOnce() -> usize,
    ) {
        let Some(keys) = self.by_db.db(at.db) else {
            return;
        };
        let Some((name, mirror)) = keys.at_mut(at.entry) else {
            return;
        };
        let after = mirror.slots.len();
        let (old_bytes, new_bytes) = if after != slots_before || built {
            // Slots came or went (or the parsed counter was just kept): count again.
            let new_bytes = mirror.bytes(name.len());
            (
                std::mem::replace(&mut mirror.counted_bytes, new_bytes),
                new_bytes,
            )
        } else {
            (mirror.counted_bytes, mirror.counted_bytes)
        };
        if after > MAX_SLOTS_PER_MIRROR {
            // Grown past the limit by writes: this one goes, the others stay.
            if let Some(old) = keys.remove_at(at.entry) {
                self.slots = (self.slots + after).saturating_sub(slots_before);
                self.bytes = (self.bytes + new_bytes).saturating_sub(old_bytes);
                self.uncount(&old);
                return;
            }
        }
        self.slots = (self.slots + after).saturating_sub(slots_before);
        self.bytes = (self.bytes + new_bytes).saturating_sub(old_bytes);
        if new_bytes != old_bytes {
            self.evict_to(budget());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::model::Resolution;

    fn mirror_of(fields: usize, slots: &[((i64, i64), i64)]) -> Mirror {
        let mut mirror = Mirror::of_fields(fields);
        mirror.slots = OrderedSlots::from_unordered(slots.to_vec());
        mirror
    }

    #[test]
    fn a_mirror_is_found_only_while_its_field_count_matches() {
        let mut mirrors = Mirrors::default();
        let at = mirrors.insert(
            0,
            b"c",
            mirror_of(4, &[((1000, 1), 5), ((1000, 2), 6)]),
            1 << 20,
        );
        assert!(at.is_some());
        assert_eq!(mirrors.find(0, b"c", 4), at);
        assert_eq!(mirrors.slots(), 2);
        assert!(mirrors.bytes() > 0);
        // The hash changed behind it: the stale mirror goes, with its bytes.
        assert_eq!(mirrors.find(0, b"c", 5), None);
        assert_eq!(mirrors.find(0, b"c", 4), None);
        assert_eq!((mirrors.slots(), mirrors.bytes()), (0, 0));
        assert_eq!(mirrors.find(3, b"c", 4), None);
    }

    #[test]
    fn databases_keep_their_own_mirrors() {
        let mut mirrors = Mirrors::default();
        let a = mirrors.insert(0, b"k", mirror_of(3, &[((1000, 1), 1)]), 1 << 20);
        let b = mirrors.insert(9, b"k", mirror_of(4, &[((1000, 1), 2)]), 1 << 20);
        assert_eq!(mirrors.find(0, b"k", 3), a);
        assert_eq!(mirrors.find(9, b"k", 4), b);
        mirrors.forget(9, b"k");
        assert_eq!(mirrors.find(9, b"k", 4), None);
        assert_eq!(mirrors.find(0, b"k", 3), a);
        assert_eq!(mirrors.slots(), 1);
    }

    #[test]
    fn the_budget_bounds_what_is_held_and_evicts_in_turn() {
        let one = mirror_of(3, &[((1000, 1), 1)]).bytes(2);
        let mut mirrors = Mirrors::default();
        for i in 0..10u8 {
            let name = [b'k', b'0' + i];
            assert!(mirrors
                .insert(0, &name, mirror_of(3, &[((1000, 1), 1)]), 3 * one)
                .is_some());
            assert!(mirrors.bytes() <= 3 * one);
        }
        assert_eq!(mirrors.slots(), 3);
        // The newest three stay.
        assert!(mirrors.find(0, b"k9", 3).is_some());
        assert!(mirrors.find(0, b"k0", 3).is_none());
        // One that alone exceeds the budget is not kept, and evicts nothing.
        assert_eq!(
            mirrors.insert(0, b"big", mirror_of(3, &[((1000, 1), 1)]), one - 1),
            None
        );
        assert_eq!(mirrors.slots(), 3);
        // A budget of nothing gives everything back.
        assert!(!mirrors.make_room(0, 1));
        assert_eq!((mirrors.slots(), mirrors.bytes()), (0, 0));
        // A hash too large for the budget is refused before it is walked.
        assert!(mirrors.make_room(1 << 20, 100));
        assert!(!mirrors.make_room(100, 100));
    }

    #[test]
    fn too_many_slots_are_never_mirrored() {
        let slots: Vec<_> = (0..=MAX_SLOTS_PER_MIRROR as i64)
            .map(|i| ((1000, i), 1))
            .collect();
        let mut mirrors = Mirrors::default();
        let fields = slots.len() + 2;
        assert_eq!(
            mirrors.insert(0, b"c", mirror_of(fields, &slots), usize::MAX),
            None
        );
        assert_eq!((mirrors.slots(), mirrors.bytes()), (0, 0));
    }

    #[test]
    fn settling_counts_what_a_command_changed() {
        let mut mirrors = Mirrors::default();
        let Some(at) = mirrors.insert(0, b"c", mirror_of(3, &[((1000, 1), 1)]), 1 << 20) else {
            panic!("not kept");
        };
        let before = mirrors.bytes();
        // Unchanged: nothing recounted, the budget not even asked.
        mirrors.settle(at, 1, false, || panic!("budget asked"));
        assert_eq!(mirrors.bytes(), before);
        // A write added slots and kept the parsed counter.
        if let Some(mirror) = mirrors.get_mut(at) {
            mirror.slots.insert((1000, 2), 1);
            mirror.slots.insert((1000, 3), 1);
            mirror.counter = Some(Counter::new(vec![Resolution {
                ms: 1000,
                samples: 60,
            }]));
        }
        mirrors.settle(at, 1, false, || 1 << 20);
        assert_eq!(mirrors.slots(), 3);
        assert!(mirrors.bytes() > before);
        // Grown (its bytes with it) over the budget now: the mirror itself is evicted,
        // the totals with it.
        if let Some(mirror) = mirrors.get_mut(at) {
            for index in 4..100 {
                mirror.slots.insert((1000, index), 1);
            }
        }
        mirrors.settle(at, 3, false, || 0);
        assert_eq!((mirrors.slots(), mirrors.bytes()), (0, 0));
    }

    #[test]
    fn a_mirror_grown_past_the_limit_goes() {
        let mut mirrors = Mirrors::default();
        let slots: Vec<_> = (0..MAX_SLOTS_PER_MIRROR as i64)
            .map(|i| ((1000, i), 1))
            .collect();
        let Some(at) = mirrors.insert(0, b"c", mirror_of(slots.len() + 2, &slots), usize::MAX)
        else {
            panic!("not kept");
        };
        if let Some(mirror) = mirrors.get_mut(at) {
            mirror.slots.insert((1000, -1), 1);
        }
        mirrors.settle(at, MAX_SLOTS_PER_MIRROR, false, || usize::MAX);
        assert_eq!(mirrors.find(0, b"c", MAX_SLOTS_PER_MIRROR + 2), None);
        assert_eq!((mirrors.slots(), mirrors.bytes()), (0, 0));
    }
}
