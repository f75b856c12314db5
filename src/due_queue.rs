//! The expiry schedule's data: which key of which database next has work, and when.
//! Pure (no Redis): `expiry` owns the one instance and the timer around it.
//!
//! Owns: that data structure. May not touch: Redis.

use std::collections::{BTreeMap, BTreeSet};
use std::os::raw::c_int;
use std::rc::Rc;

use crate::sharded_map::ShardedMap;

/// How far [`DueQueue::backlog`] counts: INFO reads it, and must not walk millions of due
/// keys.
pub const BACKLOG_COUNT_MAX: usize = 10_000;

/// Keys by due time, and each key's due time. Every part grows in bounded steps (B-tree
/// nodes, small hash shards), so no insert copies the whole schedule, whatever its size.
#[derive(Default)]
pub struct DueQueue {
    /// (due ms, database id, key) ordered by due time.
    queue: BTreeSet<(i64, u64, Rc<[u8]>)>,
    /// Each database's id and its keys' due times, to update a key's entry without
    /// scanning the queue. The key's bytes are shared with its queue entry (one allocation
    /// per scheduled key). The few databases in a tree: every write looks its own up,
    /// without hashing the number.
    dbs: BTreeMap<c_int, DbKeys>,
    /// Database id -> number: which database a queue entry belongs to. The queue holds
    /// ids, not numbers, so that SWAPDB swaps two ids instead of rewriting every entry.
    db_of_id: BTreeMap<u64, c_int>,
    next_id: u64,
    /// The key of the last insert and its due time in `dbs`, while nothing else
    /// changed the queue: a hot key's next write, scheduling it again at the same time or
    /// later, then needs neither a hash of its name nor a lookup.
    last_insert: Option<(c_int, Rc<[u8]>, i64)>,
    /// Parts of the schedule that a flush emptied, freed a bounded amount at a time by
    /// [`DueQueue::release_some`]: freeing millions of entries at once would hold the
    /// server inside `FLUSHALL ASYNC`, which the server itself answers at once.
    retired: Vec<Retired>,
}

enum Retired {
    Queue(BTreeSet<(i64, u64, Rc<[u8]>)>),
    Keys(ShardedMap<Rc<[u8]>, i64>),
}

struct DbKeys {
    id: u64,
    due_of: ShardedMap<Rc<[u8]>, i64>,
}

impl DueQueue {
    /// Puts `key` in the queue at `due`, unless it is already there at an earlier time
    /// (an early visit is harmless: it recomputes the real due time).
    pub fn insert(&mut self, db: c_int, key: &[u8], due: i64) {
        if let Some((last_db, last_key, last_due)) = &self.last_insert {
            if *last_db == db && **last_key == *key && *last_due <= due {
                return;
            }
        }
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
        let id = keys.id;
        let (shared, kept_due) = match keys.due_of.get_key_value(key) {
            Some((shared, &existing)) if existing <= due => (Rc::clone(shared), existing),
            Some((shared, &existing)) => {
                let shared = Rc::clone(shared);
                self.queue.remove(&(existing, id, Rc::clone(&shared)));
                self.queue.insert((due, id, Rc::clone(&shared)));
                keys.due_of.insert(Rc::clone(&shared), due);
                (shared, due)
            }
            None => {
                let shared: Rc<[u8]> = Rc::from(key);
                keys.due_of.insert(Rc::clone(&shared), due);
                self.queue.insert((due, id, Rc::clone(&shared)));
                (shared, due)
            }
        };
        self.last_insert = Some((db, shared, kept_due));
    }

    pub fn pop_due(&mut self, now: i64) -> Option<(c_int, Vec<u8>)> {
        loop {
            let first = self.queue.first()?;
            if first.0 > now {
                return None;
            }
            self.last_insert = None;
            let (_, id, key) = self.queue.pop_first()?;
            // Every queue entry's id names a database in `dbs` (entries leave with their
            // database); an unknown one is dropped rather than trusted.
            if let Some(&db) = self.db_of_id.get(&id) {
                self.forget_key(db, &key);
                return Some((db, key.to_vec()));
            }
        }
    }

    pub fn tracked(&self) -> usize {
        self.queue.len()
    }

    /// Drops `key`'s entry, if any (the key is gone: nothing left to expire).
    pub fn remove(&mut self, db: c_int, key: &[u8]) {
        self.last_insert = None;
        if let Some((shared, due, id)) = self.forget_key(db, key) {
            self.queue.remove(&(due, id, shared));
        }
    }

    /// Removes `key` from its database's map; returns what its queue entry is made of.
    /// A database that empties keeps its (empty) map until a flush: a server with one
    /// scheduled key would otherwise drop and rebuild the map's shard array on every visit.
    fn forget_key(&mut self, db: c_int, key: &[u8]) -> Option<(Rc<[u8]>, i64, u64)> {
        let keys = self.dbs.get_mut(&db)?;
        let (shared, due) = keys.due_of.remove_entry(key)?;
        Some((shared, due, keys.id))
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

    /// Drops every entry of `db` (all databases when `db` is -1, as FLUSHALL reports).
    /// When that leaves no database, the entries are only set aside, for
    /// [`DueQueue::release_some`]; a flush of one database among several walks the queue.
    pub fn clear_db(&mut self, db: c_int) {
        self.last_insert = None;
        let others = self
            .dbs
            .iter()
            .any(|(&d, keys)| d != db && !keys.due_of.is_empty());
        if db >= 0 && others {
            if let Some(keys) = self.dbs.remove(&db) {
                self.db_of_id.remove(&keys.id);
                self.queue.retain(|(_, id, _)| *id != keys.id);
                self.retired.push(Retired::Keys(keys.due_of));
            }
            return;
        }
        let queue = std::mem::take(&mut self.queue);
        if !queue.is_empty() {
            self.retired.push(Retired::Queue(queue));
        }
        let dbs = std::mem::take(&mut self.dbs);
        self.retired
            .extend(dbs.into_values().map(|keys| Retired::Keys(keys.due_of)));
        self.db_of_id.clear();
    }

    /// Frees about `max_entries` entries of what flushes set aside; true when nothing is
    /// left to free.
    pub fn release_some(&mut self, max_entries: usize) -> bool {
        let Some(part) = self.retired.last_mut() else {
            return true;
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
        self.retired.is_empty()
    }

    /// When the earliest key is due, if any.
    pub fn first_due(&self) -> Option<i64> {
        self.queue.first().map(|(due, _, _)| *due)
    }

    /// Number of keys due at `now` or before, counted up to [`BACKLOG_COUNT_MAX`].
    pub fn backlog(&self, now: i64) -> usize {
        self.queue
            .iter()
            .take_while(|(due, _, _)| *due <= now)
            .take(BACKLOG_COUNT_MAX)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Rng;

    /// Random inserts (mostly the same few keys again, as hot keys are), pops, removals,
    /// flushes and swaps, against a plain map of each key's earliest due time: the
    /// remembered last insert never hides a change.
    #[test]
    fn due_queue_matches_a_plain_map() {
        let mut rng = Rng(31);
        let mut schedule = DueQueue::default();
        let mut model: BTreeMap<(c_int, Vec<u8>), i64> = BTreeMap::new();
        let mut now = 0;
        for step in 0..50_000 {
            let db = rng.below(3) as c_int;
            let key = format!("k{}", rng.below(6)).into_bytes();
            match rng.below(20) {
                0..=13 => {
                    let due = now + rng.below(50);
                    schedule.insert(db, &key, due);
                    let kept = model.entry((db, key)).or_insert(due);
                    *kept = (*kept).min(due);
                }
                14..=16 => {
                    now += rng.below(20);
                    // Keys due at the same time may come in any order.
                    let popped = schedule.pop_due(now);
                    let earliest = model.values().min().copied().filter(|&due| due <= now);
                    match (&popped, earliest) {
                        (None, None) => {}
                        (Some((d, k)), Some(due)) => {
                            let kept = model.remove(&(*d, k.clone()));
                            assert_eq!(kept, Some(due), "step {step}: popped {popped:?}");
                        }
                        _ => panic!("step {step}: popped {popped:?}, earliest {earliest:?}"),
                    }
                }
                17 => {
                    schedule.remove(db, &key);
                    model.remove(&(db, key));
                }
                18 if rng.below(2) == 0 => {
                    schedule.release_some(rng.below(4) as usize);
                }
                18 => {
                    let flushed = if rng.below(4) == 0 { -1 } else { db };
                    schedule.clear_db(flushed);
                    model.retain(|(d, _), _| flushed >= 0 && *d != flushed);
                }
                _ => {
                    let other = rng.below(3) as c_int;
                    schedule.swap_dbs(db, other);
                    let swap = |d: c_int| match d {
                        d if d == db => other,
                        d if d == other => db,
                        d => d,
                    };
                    model = model
                        .into_iter()
                        .map(|((d, k), due)| ((swap(d), k), due))
                        .collect();
                }
            }
            assert_eq!(schedule.tracked(), model.len(), "step {step}");
        }
    }

    /// A flush empties the schedule at once and its entries are then freed in steps of
    /// about the size asked; new entries meanwhile are unaffected.
    #[test]
    fn flushed_entries_are_freed_in_steps() {
        let mut schedule = DueQueue::default();
        for i in 0..100_000 {
            schedule.insert(0, format!("k{i}").as_bytes(), i);
        }
        schedule.clear_db(-1);
        assert_eq!(schedule.tracked(), 0);
        assert_eq!(schedule.first_due(), None);
        schedule.insert(0, b"new", 5);
        let mut steps = 0;
        while !schedule.release_some(1000) {
            steps += 1;
            assert!(steps < 1_000, "not freed after {steps} steps");
        }
        // 100k map entries in 4096 shards and 100k queue entries, ~1000 per step.
        assert!(steps >= 150, "freed in {steps} steps");
        assert_eq!(schedule.pop_due(10), Some((0, b"new".to_vec())));
        assert_eq!(schedule.tracked(), 0);
    }
}
