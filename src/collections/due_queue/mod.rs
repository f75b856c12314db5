//! The expiry schedule's data: which key of which database next has work, and when.
//! Pure (no Redis): `expiry` owns the one instance and the timer around it.
//!
//! Two parts, sized for tens of millions of keys:
//! * per database, each key's due time, under a 64-bit keyed hash of its name (the name
//!   itself is kept once, in the queue);
//! * the queue: due time -> the keys due then, as (database id, name), in chunks of at
//!   most [`CHUNK`] entries.
//!
//! A queue entry is current only while its key's due time in the map is the entry's own:
//! scheduling a key earlier, removing it or flushing its database leaves the old entry in
//! place, and [`DueQueue::pop_due`] drops it when its time comes. No change ever searches
//! the queue, and nothing grows in one large step: the maps grow a small shard at a time,
//! the queue a chunk at a time.
//!
//! Two names with the same 64-bit hash in one database (keyed by this process's random
//! keys, so nobody can choose them; about one chance in 10^12 among ten million keys)
//! share one due time: the later one is visited when it is next scheduled on its own.
//!
//! Against the textbook form, a `BTreeMap` keyed by (due, id) beside each key's due time
//! (measured by `measured.rs`, 1M keys each due at its own time): inserts 1.66 s here and
//! 0.65 s there, scheduling every key again 0.81 s and 0.75 s, popping all 0.99 s and
//! 0.72 s; the slowest step about 10 ms in both, the textbook form's its `HashMap`'s
//! growth (450 ms at 10M keys, see `sharded_map`). What this structure has that the
//! textbook form would need too: SWAPDB as a swap of two database ids, a flush freed in
//! bounded steps (`FLUSHALL ASYNC` of 250k scheduled counters held the server 40-52 ms
//! before, under 1 ms since: `scale_schedule`), the per-key due times in a sharded map.
//! With those three, the textbook form was built and measured at the server, and lost:
//! * memory: a `BTreeMap` keyed by (due, insert number) holding (database id, hash,
//!   name), with (due, insert number) as each key's value in the sharded map, made the
//!   module's memory at 100k counters 21.3-22.1 MB against 12.0-14.1 MB with this
//!   structure (`scale_caches` on the three servers: over half the data, and the
//!   server evicted keys under `maxmemory`); a B-tree's entries (key and value, in nodes
//!   filled two thirds) cost more than a chunk's 24 bytes;
//! * keyed by (due, db id, name's hash), keys due at one time land all over that time's
//!   part of the tree: `TSCOUNTER.INCR` of 250k new counters took 7-11 us a call at the
//!   server against 5-8 us here (`scale_schedule`, the machine loaded); keyed by the
//!   insert's number the calls cost the same (4.5-7.8 us against 4.3-8.8) and the
//!   slowest tick was alike (4.8-8.1 ms against 4.7-13.5 ms).
//!
//! Owns: that data structure. May not touch: Redis.

use std::collections::BTreeMap;
use std::hash::BuildHasherDefault;
use std::os::raw::c_int;

use crate::collections::name_set::{IdHasher, NameIds};
use crate::collections::sharded_map::ShardedMap;

/// A database's keys (their ids, keyed hashes already) and their due times, in 256 shards:
/// every write looks its key up here, and the shards' headers (8 KB) stay in the CPU's
/// caches; ten million keys make shards of ~40k, whose growth moves ~1 MB in one step.
type DueOf = ShardedMap<u64, i64, BuildHasherDefault<IdHasher>, 8>;

/// How far [`DueQueue::backlog`] counts: INFO reads it, and must not walk millions of due
/// keys.
pub const BACKLOG_COUNT_MAX: usize = 1_000;

/// Entries per queue chunk: a chunk grows by doubling up to this size, then a new one
/// starts, so appending never copies more than this many entries.
const CHUNK: usize = 1024;

/// A key in the queue: its database's id and its name.
type Entry = (u64, Box<[u8]>);

/// Queue entries [`DueQueue::compact_some`] looks at per insert while entries that are no
/// longer current make up a third of the queue: more than an insert adds, so the queue
/// stays within half again the keys scheduled, whatever the pattern of writes and deletes.
const COMPACT_PER_INSERT: usize = 64;

/// True if the queue entry `(id, key)` due at `due` is its key's current one.
fn is_current(
    dbs: &BTreeMap<c_int, DbKeys>,
    db_of_id: &BTreeMap<u64, c_int>,
    hasher: &NameIds,
    id: u64,
    key: &[u8],
    due: i64,
) -> bool {
    db_of_id.get(&id).is_some_and(|db| {
        dbs.get(db).is_some_and(|keys| {
            keys.due_of
                .get_key_value(&hasher.id(key))
                .is_some_and(|(_, &kept)| kept == due)
        })
    })
}

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
    /// Due time -> the entries due then (chunks of at most [`CHUNK`]).
    queue: BTreeMap<i64, Vec<Vec<Entry>>>,
    /// Entries in `queue`, current or not.
    queued: usize,
    /// Each database's id and its keys' due times, to tell a current queue entry and to
    /// keep a key's earliest due time. The few databases in a tree: every write looks its
    /// own up, without hashing the number.
    dbs: BTreeMap<c_int, DbKeys>,
    /// Database id -> number: which database a queue entry belongs to. The queue holds
    /// ids, not numbers, so that SWAPDB swaps two ids instead of rewriting every entry,
    /// and a flushed database's entries (an id no longer here) are simply dropped.
    db_of_id: BTreeMap<u64, c_int>,
    next_id: u64,
    /// The names' ids: a keyed hash with this process's random keys (a few ns for a usual
    /// key name, where SipHash takes several times as long on every write).
    hasher: NameIds,
    /// The database, name and due time of the last insert, while nothing else changed the
    /// schedule: a hot key's next write, scheduling it again at the same time or later,
    /// then needs neither a hash of its name nor a lookup.
    last_insert: Option<(c_int, i64)>,
    last_name: Vec<u8>,
    /// Where [`DueQueue::compact_some`] goes on: (due time, chunk, position).
    compact_at: (i64, usize, usize),
    /// Parts of the schedule that a flush emptied, freed a bounded amount at a time by
    /// [`DueQueue::release_some`]: freeing millions of entries at once would hold the
    /// server inside `FLUSHALL ASYNC`, which the server itself answers at once.
    retired: Vec<Retired>,
}

enum Retired {
    Queue(BTreeMap<i64, Vec<Vec<Entry>>>),
    Keys(DueOf),
}

struct DbKeys {
    id: u64,
    due_of: DueOf,
}

impl DueQueue {
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.id(key)
    }

    /// Puts `key` in the queue at `due`, unless it is already there at an earlier time
    /// (an early visit is harmless: it recomputes the real due time).
    pub fn insert(&mut self, db: c_int, key: &[u8], due: i64) {
        if let Some((last_db, last_due)) = self.last_insert {
            if last_db == db && last_due <= due && self.last_name == key {
                return;
            }
        }
        let hash = self.hash(key);
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
        let kept_due = match keys.due_of.get_key_value(&hash) {
            Some((_, &existing)) if existing <= due => existing,
            _ => {
                keys.due_of.insert(hash, due);
                let entry = (keys.id, Box::from(key));
                let chunks = self.queue.entry(due).or_default();
                match chunks.last_mut() {
                    Some(chunk) if chunk.len() < CHUNK => chunk.push(entry),
                    _ => chunks.push(vec![entry]),
                }
                self.queued += 1;
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

    /// True while entries that are no longer current make up over a third of a queue of
    /// more than a chunk.
    fn has_many_left_behind(&self) -> bool {
        self.queued > CHUNK && self.tracked() * 3 < self.queued * 2
    }

    /// Looks at up to `max_entries` queue entries from where the last call stopped,
    /// dropping those that are no longer current (their key was scheduled earlier since,
    /// removed, or its database flushed).
    pub fn compact_some(&mut self, max_entries: usize) {
        let mut budget = max_entries;
        while budget > 0 {
            let (due, chunk_at, mut pos) = self.compact_at;
            let Some((&found, chunks)) = self.queue.range_mut(due..).next() else {
                self.compact_at = (i64::MIN, 0, 0);
                return;
            };
            let (chunk_at, start) = if found == due {
                (chunk_at, pos)
            } else {
                (0, 0)
            };
            pos = start;
            let Some(chunk) = chunks.get_mut(chunk_at) else {
                self.compact_at = match found.checked_add(1) {
                    Some(next) => (next, 0, 0),
                    None => (i64::MIN, 0, 0),
                };
                continue;
            };
            while pos < chunk.len() && budget > 0 {
                budget -= 1;
                let current = chunk.get(pos).is_some_and(|(id, key)| {
                    is_current(&self.dbs, &self.db_of_id, &self.hasher, *id, key, found)
                });
                if current {
                    pos += 1;
                } else {
                    chunk.swap_remove(pos);
                    self.queued = self.queued.saturating_sub(1);
                }
            }
            if pos < chunk.len() {
                self.compact_at = (found, chunk_at, pos);
                return;
            }
            // This chunk is done: the next one, or the next due time.
            if chunk.is_empty() {
                chunks.remove(chunk_at);
                if chunks.is_empty() {
                    self.queue.remove(&found);
                }
                self.compact_at = (found, chunk_at, 0);
            } else {
                self.compact_at = (found, chunk_at + 1, 0);
            }
        }
    }

    /// The next current key due at `now` or before, with its database, removed from the
    /// schedule; entries no longer current are dropped on the way (used by tests: the timer
    /// pops with [`DueQueue::pop_due_bounded`]).
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

    /// As [`DueQueue::pop_due`], dropping at most `max_dropped` entries that are no longer
    /// current: millions of them can lie ahead (keys scheduled earlier, deleted, flushed),
    /// and the timer looks at its clock between two calls.
    pub fn pop_due_bounded(&mut self, now: i64, max_dropped: usize) -> Popped {
        let mut dropped = 0usize;
        loop {
            if dropped >= max_dropped {
                return Popped::Skipped;
            }
            let Some(mut first) = self.queue.first_entry() else {
                return Popped::Nothing;
            };
            let due = *first.key();
            if due > now {
                return Popped::Nothing;
            }
            let chunks = first.get_mut();
            let entry = chunks.last_mut().and_then(Vec::pop);
            if chunks.last().is_some_and(Vec::is_empty) {
                chunks.pop();
            }
            if chunks.is_empty() {
                first.remove();
            }
            let Some((id, key)) = entry else {
                continue;
            };
            self.queued = self.queued.saturating_sub(1);
            if let Some(db) = self.take_if_current(id, &key, due) {
                self.last_insert = None;
                return Popped::Due(db, key.into_vec());
            }
            dropped += 1;
        }
    }

    /// If the entry `(id, key)` due at `due` is current, removes its key's due time and
    /// returns its database.
    fn take_if_current(&mut self, id: u64, key: &[u8], due: i64) -> Option<c_int> {
        let db = *self.db_of_id.get(&id)?;
        let hash = self.hash(key);
        let keys = self.dbs.get_mut(&db)?;
        match keys.due_of.get_key_value(&hash) {
            Some((_, &kept)) if kept == due => {
                keys.due_of.remove_entry(&hash);
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
        let hash = self.hash(key);
        if let Some(keys) = self.dbs.get_mut(&db) {
            keys.due_of.remove_entry(&hash);
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
    /// entries, whose id names no database any more, are dropped as their time comes (all
    /// of the queue is set aside when no database is left).
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
            self.queued = 0;
            if !queue.is_empty() {
                self.retired.push(Retired::Queue(queue));
            }
        }
    }

    /// Frees about `max_entries` entries of what flushes set aside, or else of the queue
    /// entries left behind by removals (mass deletes leave no insert to drop them); true
    /// when nothing is left to free.
    pub fn release_some(&mut self, max_entries: usize) -> bool {
        let Some(part) = self.retired.last_mut() else {
            if self.has_many_left_behind() {
                self.compact_some(max_entries.max(1));
            }
            return !self.has_many_left_behind();
        };
        let done = match part {
            Retired::Queue(queue) => {
                let mut freed = 0;
                while freed < max_entries.max(1) {
                    let Some(mut first) = queue.first_entry() else {
                        break;
                    };
                    match first.get_mut().pop() {
                        Some(chunk) => freed += chunk.len().max(1),
                        None => {
                            first.remove();
                        }
                    }
                }
                queue.is_empty()
            }
            Retired::Keys(keys) => keys.release_some(max_entries),
        };
        if done {
            self.retired.pop();
        }
        self.retired.is_empty()
    }

    /// When the earliest queue entry is due, if any (an entry no longer current makes the
    /// timer come early once, and then goes).
    pub fn first_due(&self) -> Option<i64> {
        self.queue.first_key_value().map(|(due, _)| *due)
    }

    /// Number of current keys due at `now` or before, counted up to
    /// [`BACKLOG_COUNT_MAX`] (and over at most twice as many queue entries).
    pub fn backlog(&self, now: i64) -> usize {
        let mut count = 0;
        let mut seen = 0;
        for (&due, chunks) in self.queue.range(..=now) {
            for (id, key) in chunks.iter().flatten() {
                seen += 1;
                if count >= BACKLOG_COUNT_MAX || seen > 2 * BACKLOG_COUNT_MAX {
                    return count;
                }
                let current = is_current(&self.dbs, &self.db_of_id, &self.hasher, *id, key, due);
                count += usize::from(current);
            }
        }
        count
    }

    /// Queue entries, current or not (for tests of the entries left behind).
    #[cfg(test)]
    fn queued(&self) -> usize {
        self.queued
    }
}

#[cfg(test)]
mod tests;
