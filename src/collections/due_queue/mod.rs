//! The expiry schedule's data: which key of which database next has work, and when.
//! Pure (no Redis): `expiry` owns the one instance and the timer around it.
//!
//! Two parts, in their textbook form:
//! * per database, each key's due time and queue slot, under a 64-bit keyed hash of its
//!   name, in a [`ShardedMap`] (it grows a small shard at a time: std's `HashMap` doubles
//!   in one step, 450 ms at 10M keys, see `sharded_map`);
//! * the queue: a `BTreeMap` keyed by (due time, number of the insert), holding the key's
//!   database id, hash and name. Scheduling a key earlier or removing it removes its entry.
//!   The insert's number, not the hash, follows the due time: keys due at one time
//!   (counters written in one second) are appended in order; keyed by hash they landed all
//!   over that time's part of the tree, and `TSCOUNTER.INCR` of 250k new counters took
//!   7-11 us a call at the server instead of 5-8 (`scale_schedule`).
//!
//! A database's id, not its number, is in the queue: SWAPDB swaps two ids (no pass over
//! keys), and a flushed database's entries, whose id names no database any more, are
//! dropped when their time comes or by the bounded [`DueQueue::compact_some`]; the whole
//! queue is set aside when no database is left. What a flush sets aside is freed a
//! bounded amount at a time ([`DueQueue::release_some`]): `FLUSHALL ASYNC` of 250k
//! scheduled counters answers in 0.1-0.3 ms (`scale_schedule`).
//!
//! Two names with the same 64-bit hash in one database (keyed by this process's random
//! keys, so nobody can choose them; about one chance in 10^12 among ten million keys)
//! share one due time: the later one is visited when it is next scheduled on its own.
//!
//! Against the hand-written queue it replaces (due time -> chunks of (id, name), entries
//! left in place when a key moved): `measured.rs`, 1M keys each due at its own time,
//! inserts 0.51 s (1.66 s before), scheduling every key again later 0.34 s (0.81 s),
//! popping all 0.36 s (0.99 s), the slowest step 0.6-1.4 ms; all due at one time, inserts
//! 0.38 s. At the server (`scale_schedule`, 250k counters, three runs on each of three
//! servers with the machine loaded): the slowest tick 4.8-8.1 ms (4.7-13.5 ms before),
//! INCR 4.5-7.8 us a call (4.3-8.8 us).
//!
//! Owns: that data structure. May not touch: Redis.

use std::collections::BTreeMap;
use std::hash::BuildHasherDefault;
use std::ops::Bound;
use std::os::raw::c_int;

use crate::collections::name_set::{IdHasher, NameIds};
use crate::collections::sharded_map::ShardedMap;

/// A database's keys (their ids, keyed hashes already) and their due times, in 256 shards:
/// every write looks its key up here, and the shards' headers (8 KB) stay in the CPU's
/// caches; ten million keys make shards of ~40k, whose growth moves ~1 MB in one step.
type DueOf = ShardedMap<u64, Slot, BuildHasherDefault<IdHasher>, 8>;

/// How far [`DueQueue::backlog`] counts: INFO reads it, and must not walk millions of due
/// keys.
pub const BACKLOG_COUNT_MAX: usize = 1_000;

/// A queue entry's place: its due time, then the number of its insert, so that keys due
/// at one time (counters written in one second) are appended after one another instead
/// of placed by their hash all over that time's part of the tree.
type Slot = (i64, u64);

/// A key in the queue: its database's id, its name's hash and its name.
struct Entry {
    id: u64,
    hash: u64,
    name: Box<[u8]>,
}

/// The queue: each scheduled key's slot and its entry.
type Queue = BTreeMap<Slot, Entry>;

/// Queue entries [`DueQueue::compact_some`] looks at per insert while entries of flushed
/// databases make up a third of the queue: more than an insert adds, so the queue stays
/// within half again the keys scheduled, whatever the pattern of writes and flushes.
const COMPACT_PER_INSERT: usize = 64;

/// Queues up to this many entries are never compacted on an insert.
const COMPACT_FROM: usize = 1024;

/// What [`DueQueue::pop_due_bounded`] found.
#[derive(Debug, PartialEq)]
pub enum Popped {
    /// A key due now, with its database.
    Due(c_int, Vec<u8>),
    /// Only entries no longer current so far (dropped): ask again.
    Skipped,
    /// Nothing is due.
    Nothing,
}

#[derive(Default)]
pub struct DueQueue {
    /// Every scheduled key, by due time; and the entries of flushed databases not yet
    /// dropped.
    queue: Queue,
    /// Each database's id and its keys' due times. The few databases in a tree: every
    /// write looks its own up, without hashing the number.
    dbs: BTreeMap<c_int, DbKeys>,
    /// Database id -> number: which database a queue entry belongs to. The queue holds
    /// ids, not numbers, so that SWAPDB swaps two ids instead of rewriting every entry,
    /// and a flushed database's entries (an id no longer here) are simply dropped.
    db_of_id: BTreeMap<u64, c_int>,
    next_id: u64,
    /// The number of the next insert into the queue.
    next_seq: u64,
    /// The names' ids: a keyed hash with this process's random keys (a few ns for a usual
    /// key name, where SipHash takes several times as long on every write).
    hasher: NameIds,
    /// The database, name and due time of the last insert, while nothing else changed the
    /// schedule: a hot key's next write, scheduling it again at the same time or later,
    /// then needs neither a hash of its name nor a lookup.
    last_insert: Option<(c_int, i64)>,
    last_name: Vec<u8>,
    /// Where [`DueQueue::compact_some`] goes on: the last slot it looked at.
    compact_after: Option<Slot>,
    /// Parts of the schedule that a flush emptied, freed a bounded amount at a time by
    /// [`DueQueue::release_some`]: freeing millions of entries at once would hold the
    /// server inside `FLUSHALL ASYNC`, which the server itself answers at once.
    retired: Vec<Retired>,
}

enum Retired {
    Queue(Queue),
    Keys(DueOf),
}

struct DbKeys {
    id: u64,
    due_of: DueOf,
}

impl DueQueue {
    /// Puts `key` in the queue at `due`, unless it is already there at an earlier time
    /// (an early visit is harmless: it recomputes the real due time).
    pub fn insert(&mut self, db: c_int, key: &[u8], due: i64) {
        if let Some((last_db, last_due)) = self.last_insert {
            if last_db == db && last_due <= due && self.last_name == key {
                return;
            }
        }
        let hash = self.hasher.id(key);
        let next_id = &mut self.next_id;
        let db_of_id = &mut self.db_of_id;
        let keys = self.dbs.entry(db).or_insert_with(|| {
            let id = *next_id;
            // 64 bits: never wraps, so an id is never given twice.
            *next_id += 1;
            db_of_id.insert(id, db);
            DbKeys {
                id,
                due_of: ShardedMap::default(),
            }
        });
        let kept_due = match keys.due_of.get_key_value(&hash).map(|(_, &kept)| kept) {
            Some((existing, _)) if existing <= due => existing,
            later => {
                let slot = (due, self.next_seq);
                // 64 bits: never wraps.
                self.next_seq += 1;
                keys.due_of.insert(hash, slot);
                let name = match later.and_then(|old| self.queue.remove(&old)) {
                    // The same name (or, one time in 10^12, another with its hash).
                    Some(entry) if *entry.name == *key => entry.name,
                    _ => Box::from(key),
                };
                let id = keys.id;
                self.queue.insert(slot, Entry { id, hash, name });
                due
            }
        };
        self.last_insert = Some((db, kept_due));
        self.last_name.clear();
        self.last_name.extend_from_slice(key);
        if self.has_many_left_behind() {
            self.compact_some(COMPACT_PER_INSERT);
        }
    }

    /// True while entries of flushed databases make up over a third of a queue of more
    /// than [`COMPACT_FROM`] entries.
    fn has_many_left_behind(&self) -> bool {
        self.queue.len() > COMPACT_FROM && self.tracked() * 3 < self.queue.len() * 2
    }

    /// Looks at up to `max_entries` queue entries from where the last call stopped,
    /// dropping those of flushed databases.
    pub fn compact_some(&mut self, max_entries: usize) {
        let from = match self.compact_after {
            Some(slot) => Bound::Excluded(slot),
            None => Bound::Unbounded,
        };
        let mut dead = Vec::new();
        let mut last = None;
        for (&slot, entry) in self.queue.range((from, Bound::Unbounded)).take(max_entries) {
            last = Some(slot);
            if !self.db_of_id.contains_key(&entry.id) {
                dead.push(slot);
            }
        }
        for slot in dead {
            self.queue.remove(&slot);
        }
        // Past the end: start again from the beginning next time.
        self.compact_after = last;
    }

    /// The next current key due at `now` or before, with its database, removed from the
    /// schedule; entries of flushed databases are dropped on the way (used by tests: the
    /// timer pops with [`DueQueue::pop_due_bounded`]).
    #[cfg(test)]
    pub fn pop_due(&mut self, now: i64) -> Option<(c_int, Vec<u8>)> {
        loop {
            match self.pop_due_bounded(now, usize::MAX) {
                Popped::Due(db, key) => return Some((db, key)),
                Popped::Skipped => {}
                Popped::Nothing => return None,
            }
        }
    }

    /// As [`DueQueue::pop_due`], dropping at most `max_dropped` entries of flushed
    /// databases: millions of them can lie ahead, and the timer looks at its clock between
    /// two calls.
    pub fn pop_due_bounded(&mut self, now: i64, max_dropped: usize) -> Popped {
        let mut dropped = 0usize;
        loop {
            if dropped >= max_dropped {
                return Popped::Skipped;
            }
            let Some(first) = self.queue.first_entry() else {
                return Popped::Nothing;
            };
            let slot = *first.key();
            if slot.0 > now {
                return Popped::Nothing;
            }
            let entry = first.remove();
            if let Some(db) = self.take_if_current(&entry, slot) {
                self.last_insert = None;
                return Popped::Due(db, entry.name.into_vec());
            }
            dropped += 1;
        }
    }

    /// If `entry`, taken from `slot`, is its key's current one, removes its key's due
    /// time and returns its database.
    fn take_if_current(&mut self, entry: &Entry, slot: Slot) -> Option<c_int> {
        let db = *self.db_of_id.get(&entry.id)?;
        let keys = self.dbs.get_mut(&db)?;
        match keys.due_of.get_key_value(&entry.hash) {
            Some((_, &kept)) if kept == slot => {
                keys.due_of.remove_entry(&entry.hash);
                Some(db)
            }
            _ => None,
        }
    }

    /// Keys in the schedule.
    pub fn tracked(&self) -> usize {
        self.dbs.values().map(|keys| keys.due_of.len()).sum()
    }

    /// Drops `key`'s entry, if any (the key is gone: nothing left to expire).
    pub fn remove(&mut self, db: c_int, key: &[u8]) {
        self.last_insert = None;
        let hash = self.hasher.id(key);
        if let Some(keys) = self.dbs.get_mut(&db) {
            if let Some((_, slot)) = keys.due_of.remove_entry(&hash) {
                self.queue.remove(&slot);
            }
        }
    }

    /// SWAPDB: the two databases trade their entries. O(1) in the number of keys: the
    /// queue's entries keep their ids, which now name the other database.
    pub fn swap_dbs(&mut self, a: c_int, b: c_int) {
        self.last_insert = None;
        if a == b {
            return;
        }
        let of_a = self.dbs.remove(&a);
        let of_b = self.dbs.remove(&b);
        if let Some(keys) = of_a {
            self.db_of_id.insert(keys.id, b);
            self.dbs.insert(b, keys);
        }
        if let Some(keys) = of_b {
            self.db_of_id.insert(keys.id, a);
            self.dbs.insert(a, keys);
        }
    }

    /// Drops every entry of `db` (all databases when `db` is -1, as FLUSHALL reports), at
    /// once: the database's map is set aside for [`DueQueue::release_some`], and its queue
    /// entries, whose id names no database any more, are dropped later (all of the queue
    /// is set aside when no database is left).
    pub fn clear_db(&mut self, db: c_int) {
        self.last_insert = None;
        let flushed: Vec<c_int> = self
            .dbs
            .keys()
            .copied()
            .filter(|&d| db < 0 || d == db)
            .collect();
        for d in flushed {
            if let Some(keys) = self.dbs.remove(&d) {
                self.db_of_id.remove(&keys.id);
                self.retired.push(Retired::Keys(keys.due_of));
            }
        }
        if self.dbs.is_empty() {
            let queue = std::mem::take(&mut self.queue);
            self.compact_after = None;
            if !queue.is_empty() {
                self.retired.push(Retired::Queue(queue));
            }
        }
    }

    /// Frees about `max_entries` entries of what flushes set aside, or else drops as many
    /// queue entries of flushed databases; true when nothing is left to free.
    pub fn release_some(&mut self, max_entries: usize) -> bool {
        let Some(part) = self.retired.last_mut() else {
            if self.has_many_left_behind() {
                self.compact_some(max_entries.max(1));
            }
            return !self.has_many_left_behind();
        };
        let done = match part {
            Retired::Queue(queue) => {
                for _ in 0..max_entries.max(1) {
                    if queue.pop_first().is_none() {
                        break;
                    }
                }
                queue.is_empty()
            }
            Retired::Keys(keys) => keys.release_some(max_entries),
        };
        if done {
            self.retired.pop();
        }
        self.retired.is_empty() && !self.has_many_left_behind()
    }

    /// When the earliest queue entry is due, if any (an entry of a flushed database makes
    /// the timer come early once, and then goes).
    pub fn first_due(&self) -> Option<i64> {
        self.queue.first_key_value().map(|(&(due, _), _)| due)
    }

    /// Number of current keys due at `now` or before, counted up to
    /// [`BACKLOG_COUNT_MAX`] (and over at most twice as many queue entries).
    pub fn backlog(&self, now: i64) -> usize {
        let mut count = 0;
        let mut seen = 0;
        for entry in self.queue.range(..=(now, u64::MAX)).map(|e| e.1) {
            seen += 1;
            if count >= BACKLOG_COUNT_MAX || seen > 2 * BACKLOG_COUNT_MAX {
                return count;
            }
            count += usize::from(self.db_of_id.contains_key(&entry.id));
        }
        count
    }

    /// Queue entries, current or not (for tests of the entries left behind).
    #[cfg(test)]
    fn queued(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests;
