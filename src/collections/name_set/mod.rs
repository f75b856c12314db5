//! The names of the keys tally may hold state for, per database: what the keyspace-event
//! callback checks first, so an event on any other key of the server costs one hash of
//! its name and one lookup, before any allocation, key open or string conversion.
//!
//! A superset is enough (an extra name only sends its events the long way); a missing
//! name would lose an event, so names go in when tally opens a key and leave only when the
//! key is gone. Each name is kept as a 64-bit hash with this process's random keys: two
//! names that share a hash both count as tracked, which again only costs time. A
//! database's ids live in a [`ShardedMap`](crate::collections::sharded_map::ShardedMap),
//! which grows one shard at a time: one table of ten million ids would be copied whole
//! inside the command that fills it. The ids are made in `ids.rs`, the filter in front of
//! the sets is `filter.rs`.
//!
//! Why hand-written: every keyspace event of the server, on any key, is screened here
//! before anything else, so the common answer ("not tally's") must cost a few
//! instructions and one cache line: a counting filter in front of per-database sharded
//! sets, which no std or crate set offers together. Measured by `make bench`'s host-tax
//! rows (`BENCH_HOST_IR=1` counts instructions): a native HSET on keys that are not
//! tally's costs within 5% of a server with an empty subscriber to the same classes.
//!
//! Owns: that data structure and [`NameIds`], the 64-bit ids of key names (also the expiry
//! schedule's). May not touch: Redis (pure).

mod filter;
mod ids;

pub use filter::{screen_with, IdFilter, Screened, NO_NAMES};
pub use ids::{IdHasher, NameIds};

use ids::IdSet;

/// Databases with an index above this share the last set (a superset stays correct).
const MAX_DB_SETS: usize = 1 << 12;
/// The set that databases past the others share.
const SHARED: usize = MAX_DB_SETS - 1;

pub struct NameSet {
    /// Per database index, the ids of its names.
    by_db: Vec<IdSet>,
    /// Chosen at the first insert (no name has an id before): so an empty set is built in
    /// a `const`, and the keyspace callback's thread-local needs no lazy start.
    ids: Option<NameIds>,
    /// The ids of every database, asked first.
    filter: IdFilter,
    /// How many ids the sets hold, all databases together.
    total: usize,
    /// The database and name of the last insert, while no name has left since: a hot
    /// key opened again and again is found kept by comparing its name, without hashing
    /// it or looking it up (a lookup in a set of a million ids misses the CPU's caches).
    last_insert: Option<i32>,
    last_name: Vec<u8>,
    /// Ids a step of the filter's recount counts at least (fewer in tests, to see many
    /// steps).
    recount_step: usize,
}

impl Default for NameSet {
    fn default() -> Self {
        NameSet::new()
    }
}

impl NameSet {
    pub const fn new() -> Self {
        NameSet {
            by_db: Vec::new(),
            ids: None,
            filter: IdFilter::new(),
            total: 0,
            last_insert: None,
            last_name: Vec::new(),
            recount_step: filter::RECOUNT_STEP_IDS,
        }
    }

    /// The set of database `db`: its own, or the shared last one.
    fn slot(db: i32) -> usize {
        usize::try_from(db).map_or(SHARED, |db| db.min(SHARED))
    }

    /// Keeps `name` for database `db`; true if the set changed (the name is new to it).
    pub fn insert(&mut self, db: i32, name: &[u8]) -> bool {
        if self.last_insert == Some(db) && self.last_name == name {
            return false;
        }
        let id = self.ids.get_or_insert_with(NameIds::default).id(name);
        let at = Self::slot(db);
        if self.by_db.len() <= at {
            self.by_db.resize_with(at + 1, IdSet::default);
        }
        let mut changed = false;
        if let Some(set) = self.by_db.get_mut(at) {
            if set.insert(id, ()).is_none() {
                self.total += 1;
                self.count(id);
                changed = true;
            }
        }
        self.last_insert = Some(db);
        self.last_name.clear();
        self.last_name.extend_from_slice(name);
        changed
    }

    /// Counts an id new to its set in the filter, and takes a step of the filter's growth.
    fn count(&mut self, id: u64) {
        self.filter.add(id, shard_of(id));
        self.grow_filter();
    }

    /// Starts counting every id anew when the filter is to grow (or count again after
    /// giving up), and counts a step of a recount under way: after every insert and
    /// removal, so a recount ends within a few dozen of them.
    fn grow_filter(&mut self) {
        if self.filter.wants_recount(self.total) {
            self.filter.start_recount(self.total);
        }
        self.filter.recount_some(&self.by_db, self.recount_step);
    }

    #[cfg(test)]
    /// True if `name` is kept for database `db`.
    pub fn contains(&self, db: i32, name: &[u8]) -> bool {
        self.may_contain(name)
            .is_some_and(|id| self.contains_id(db, id))
    }

    #[cfg(test)]
    /// The id of `name` if some database may keep it; `None` (most names of a server, at
    /// the cost of a hash and one cache line) if none does. No database is needed yet:
    /// [`Self::contains_id`] answers for one.
    pub fn may_contain(&self, name: &[u8]) -> Option<u64> {
        self.screen(name, b'\0').maybe
    }

    #[cfg(test)]
    /// In one pass over `name`: its id if some database may keep it (as
    /// [`Self::may_contain`]), and whether it contains the byte `mark` (see
    /// [`hash_and_find`]).
    pub fn screen(&self, name: &[u8], mark: u8) -> Screened {
        let (seed, words) = self.screen_parts();
        let word = |block: usize| words.get(block).copied().unwrap_or(u64::MAX);
        screen_with(seed, words.len().wrapping_sub(1), word, name, mark)
    }

    /// What [`screen_with`] reads: the ids' seeds and the filter's words (a power of two
    /// of them). A set that keeps no name (or has not chosen its seeds) shows
    /// [`NO_NAMES`], a filter that gave up one word of all bits set.
    pub fn screen_parts(&self) -> ((u64, u64), &[u64]) {
        let Some(ids) = &self.ids else {
            return ((0, 0), NO_NAMES);
        };
        let words = if self.total == 0 {
            NO_NAMES
        } else {
            self.filter.words()
        };
        (ids.seed, words)
    }

    /// True if database `db` keeps the name of id `id` (from [`screen_with`]).
    pub fn contains_id(&self, db: i32, id: u64) -> bool {
        self.by_db
            .get(Self::slot(db))
            .is_some_and(|set| set.get_key_value(&id).is_some())
    }

    /// Forgets `name`. A database index past [`MAX_DB_SETS`] shares its set with others,
    /// whose names must stay: nothing leaves that set but by a flush.
    pub fn remove(&mut self, db: i32, name: &[u8]) {
        self.last_insert = None;
        let at = Self::slot(db);
        if at == SHARED {
            return;
        }
        let Some(ids) = &self.ids else {
            return;
        };
        let id = ids.id(name);
        if let Some(set) = self.by_db.get_mut(at) {
            if set.remove_entry(&id).is_some() {
                self.total -= 1;
                self.filter.remove(id, shard_of(id));
                self.grow_filter();
            }
        }
    }

    /// FLUSHDB of `db`, or every database (`db` = -1).
    pub fn clear_db(&mut self, db: i32) {
        self.last_insert = None;
        if db < 0 {
            self.by_db = Vec::new();
            self.filter = IdFilter::new();
            self.total = 0;
        } else if Self::slot(db) != SHARED {
            if let Some(set) = self.by_db.get_mut(Self::slot(db)) {
                let gone = std::mem::take(set);
                self.total -= gone.len();
                self.filter
                    .remove_all(gone.iter().map(|(&id, _)| (id, shard_of(id))), gone.len());
                self.grow_filter();
            }
        }
    }

    /// SWAPDB `a` `b`: the names of each now live in the other.
    pub fn swap_dbs(&mut self, a: i32, b: i32) {
        self.last_insert = None;
        let (a, b) = (Self::slot(a), Self::slot(b));
        if self.by_db.len() <= a.max(b) {
            self.by_db.resize_with(a.max(b) + 1, IdSet::default);
        }
        if a == SHARED || b == SHARED {
            // The shared set must keep every name it had: both sides get the union.
            let union: Vec<u64> = [a, b]
                .iter()
                .filter_map(|&i| self.by_db.get(i))
                .flat_map(|set| set.iter().map(|(&id, _)| id))
                .collect();
            let mut new = Vec::new();
            for i in [a, b] {
                if let Some(set) = self.by_db.get_mut(i) {
                    for &id in &union {
                        if set.insert(id, ()).is_none() {
                            new.push(id);
                        }
                    }
                }
            }
            for id in new {
                self.total += 1;
                self.count(id);
            }
            return;
        }
        // The filter counts ids of every database together: a swap changes nothing there.
        self.by_db.swap(a, b);
    }

    /// Number of names kept.
    pub fn len(&self) -> usize {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Bytes held (an estimate: each set's tables of 8-byte ids and 1-byte tags, the
    /// shards' headers, the filter's cells).
    pub fn bytes(&self) -> usize {
        let tables: usize = self
            .by_db
            .iter()
            .map(|s| s.capacity() * 9 + s.shard_bytes())
            .sum();
        tables + self.by_db.capacity() * std::mem::size_of::<IdSet>() + self.filter.bytes()
    }
}

/// The shard of `id` in every [`IdSet`] (their hasher has no keys).
fn shard_of(id: u64) -> usize {
    IdSet::default().shard_index(&id)
}

#[cfg(test)]
mod tests;
