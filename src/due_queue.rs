//! The expiry schedule's data: which key of which database next has work, and when.
//! Pure (no Redis): `expiry` owns the one instance and the timer around it.
//!
//! Owns: that data structure. May not touch: Redis.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::raw::c_int;
use std::rc::Rc;

/// Keys by due time, and each key's due time.
#[derive(Default)]
pub struct DueQueue {
    /// (due ms, db, key) ordered by due time.
    queue: BTreeSet<(i64, c_int, Rc<[u8]>)>,
    /// db -> key -> due, to update a key's entry without scanning the queue. The key's
    /// bytes are shared with its queue entry (one allocation per scheduled key). The few
    /// databases in a tree: every write looks its own up, without hashing the number.
    due_of: BTreeMap<c_int, HashMap<Rc<[u8]>, i64>>,
    /// The key of the last insert and its due time in `due_of`, while nothing else
    /// changed the queue: a hot key's next write, scheduling it again at the same time or
    /// later, then needs neither a hash of its name nor a lookup.
    last_insert: Option<(c_int, Rc<[u8]>, i64)>,
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
        let keys = self.due_of.entry(db).or_default();
        let (shared, kept_due) = match keys.get_key_value(key) {
            Some((shared, &existing)) if existing <= due => (Rc::clone(shared), existing),
            Some((shared, &existing)) => {
                let shared = Rc::clone(shared);
                self.queue.remove(&(existing, db, Rc::clone(&shared)));
                self.queue.insert((due, db, Rc::clone(&shared)));
                keys.insert(Rc::clone(&shared), due);
                (shared, due)
            }
            None => {
                let shared: Rc<[u8]> = Rc::from(key);
                keys.insert(Rc::clone(&shared), due);
                self.queue.insert((due, db, Rc::clone(&shared)));
                (shared, due)
            }
        };
        self.last_insert = Some((db, shared, kept_due));
    }

    pub fn pop_due(&mut self, now: i64) -> Option<(c_int, Vec<u8>)> {
        let first = self.queue.first()?;
        if first.0 > now {
            return None;
        }
        self.last_insert = None;
        let (_, db, key) = self.queue.pop_first()?;
        if let Some(keys) = self.due_of.get_mut(&db) {
            keys.remove(&key);
        }
        Some((db, key.to_vec()))
    }

    pub fn tracked(&self) -> usize {
        self.queue.len()
    }

    /// Drops `key`'s entry, if any (the key is gone: nothing left to expire).
    pub fn remove(&mut self, db: c_int, key: &[u8]) {
        self.last_insert = None;
        let Some(keys) = self.due_of.get_mut(&db) else {
            return;
        };
        if let Some((shared, due)) = keys.remove_entry(key) {
            self.queue.remove(&(due, db, shared));
        }
        if keys.is_empty() {
            self.due_of.remove(&db);
        }
    }

    pub fn swap_dbs(&mut self, a: c_int, b: c_int) {
        self.last_insert = None;
        let swap = |d: c_int| match d {
            d if d == a => b,
            d if d == b => a,
            d => d,
        };
        let queue = std::mem::take(&mut self.queue);
        self.queue = queue
            .into_iter()
            .map(|(due, d, k)| (due, swap(d), k))
            .collect();
        let due_of = std::mem::take(&mut self.due_of);
        self.due_of = due_of.into_iter().map(|(d, m)| (swap(d), m)).collect();
    }

    /// Drops every entry of `db` (all databases when `db` is -1, as FLUSHALL reports).
    pub fn clear_db(&mut self, db: c_int) {
        self.last_insert = None;
        if db < 0 {
            self.queue.clear();
            self.due_of.clear();
            return;
        }
        if self.due_of.remove(&db).is_some() {
            self.queue.retain(|(_, d, _)| *d != db);
        }
    }

    /// When the earliest key is due, if any.
    pub fn first_due(&self) -> Option<i64> {
        self.queue.first().map(|(due, _, _)| *due)
    }

    /// Number of keys due at `now` or before.
    pub fn backlog(&self, now: i64) -> usize {
        self.queue
            .iter()
            .take_while(|(due, _, _)| *due <= now)
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
                    let popped = schedule.pop_due(now);
                    let first = model
                        .iter()
                        .map(|((d, k), &due)| (due, *d, k.clone()))
                        .min()
                        .filter(|&(due, _, _)| due <= now);
                    if let Some((_, d, k)) = &first {
                        model.remove(&(*d, k.clone()));
                    }
                    assert_eq!(popped, first.map(|(_, d, k)| (d, k)), "step {step}");
                }
                17 => {
                    schedule.remove(db, &key);
                    model.remove(&(db, key));
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
}
