//! The names of the keys tally may hold state for, per database: what the keyspace-event
//! callback checks first, so an event on any other key of the server costs one hash of
//! its name and one lookup, before any allocation, key open or string conversion.
//!
//! A superset is enough (an extra name only sends its events the long way); a missing
//! name would lose an event, so names go in when tally opens a key and leave only when the
//! key is gone. Each name is kept as a 64-bit hash with this process's random keys: two
//! names that share a hash both count as tracked, which again only costs time. A
//! database's ids live in a [`ShardedMap`], which grows one shard at a time: one table of
//! ten million ids would be copied whole inside the command that fills it.
//!
//! Owns: that data structure and [`NameIds`], the 64-bit ids of key names (also the expiry
//! schedule's). May not touch: Redis (pure).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

use crate::sharded_map::ShardedMap;

/// Hashes ids that are hashes already (keyed with this process's random keys, so nobody
/// can choose names whose ids collide): used as they are.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` ids are hashed (`write_u64`); any other input still hashes.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, id: u64) {
        self.0 = id;
    }
}

/// 64 shards: every event of the server looks a name up here, and the shards' headers
/// (2 KB) and, with a few thousand names, their tables stay in the CPU's caches (4,096
/// shards cost two cache misses a lookup). Ten million names make shards of ~160k ids,
/// whose growth copies ~2 MB in one step.
type IdSet = ShardedMap<u64, (), BuildHasherDefault<IdHasher>, 6>;

/// The ids of key names: a keyed 64-bit hash, with random keys of its own per instance, so
/// nobody can choose names whose ids collide.
pub struct NameIds {
    seed: (u64, u64),
}

impl Default for NameIds {
    fn default() -> Self {
        let random = RandomState::new();
        NameIds {
            seed: (random.hash_one(1u8), random.hash_one(2u8)),
        }
    }
}

impl NameIds {
    /// The id of `name`: a multiply-rotate hash over 8-byte words (a few ns for a usual
    /// key name, where SipHash takes several times as long), finished by a full mix so
    /// every bit of the id depends on every byte. Every keyspace event of the server hashes
    /// its key name here, so the bytes are read as whole words: the last, partial word is
    /// the name's last 8 bytes (overlapping the words before), and a shorter name is read
    /// whole by [`short_word`]; with the length mixed in, two names of one length that
    /// differ in any byte differ in some word.
    pub fn id(&self, name: &[u8]) -> u64 {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let len = name.len();
        let mut h = self.seed.0 ^ (len as u64).wrapping_mul(K);
        let mut words = name.chunks_exact(8);
        for word in &mut words {
            h = (h.rotate_left(23) ^ word_at(word, 0)).wrapping_mul(K);
        }
        let last = if words.remainder().is_empty() {
            0
        } else if len >= 8 {
            word_at(name, len - 8)
        } else {
            short_word(name)
        };
        h = (h.rotate_left(23) ^ last ^ self.seed.1).wrapping_mul(K);
        // fmix64 of MurmurHash3: tables read the low bits, their tags the high ones.
        h ^= h >> 33;
        h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        h ^= h >> 33;
        h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
        h ^ (h >> 33)
    }
}

/// The 8 bytes of `bytes` at `at`, little-endian (0 past the end: never, as called).
#[inline(always)]
fn word_at(bytes: &[u8], at: usize) -> u64 {
    bytes
        .get(at..at + 8)
        .and_then(|w| <[u8; 8]>::try_from(w).ok())
        .map_or(0, u64::from_le_bytes)
}

/// A name of 1 to 7 bytes as one word: its first and last 4 bytes (overlapping) if it has
/// 4 or more, else its first, middle and last byte; with the length, that is all of it.
#[inline(always)]
fn short_word(name: &[u8]) -> u64 {
    let len = name.len();
    let half = |at: usize| {
        name.get(at..at + 4)
            .and_then(|w| <[u8; 4]>::try_from(w).ok())
            .map_or(0, u32::from_le_bytes)
    };
    if len >= 4 {
        u64::from(half(0)) | u64::from(half(len - 4)) << 32
    } else {
        let byte = |at: usize| u64::from(name.get(at).copied().unwrap_or(0));
        byte(0) | byte(len / 2) << 8 | byte(len.saturating_sub(1)) << 16
    }
}

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
        }
    }

    /// The set of database `db`: its own, or the shared last one.
    fn slot(db: i32) -> usize {
        usize::try_from(db).map_or(SHARED, |db| db.min(SHARED))
    }

    pub fn insert(&mut self, db: i32, name: &[u8]) {
        let id = self.ids.get_or_insert_with(NameIds::default).id(name);
        let at = Self::slot(db);
        if self.by_db.len() <= at {
            self.by_db.resize_with(at + 1, IdSet::default);
        }
        if let Some(set) = self.by_db.get_mut(at) {
            set.insert(id, ());
        }
    }

    pub fn contains(&self, db: i32, name: &[u8]) -> bool {
        match (self.by_db.get(Self::slot(db)), &self.ids) {
            (Some(set), Some(ids)) if !set.is_empty() => set.get_key_value(&ids.id(name)).is_some(),
            _ => false,
        }
    }

    /// Forgets `name`. A database index past [`MAX_DB_SETS`] shares its set with others,
    /// whose names must stay: nothing leaves that set but by a flush.
    pub fn remove(&mut self, db: i32, name: &[u8]) {
        let at = Self::slot(db);
        if at == SHARED {
            return;
        }
        let Some(ids) = &self.ids else {
            return;
        };
        let id = ids.id(name);
        if let Some(set) = self.by_db.get_mut(at) {
            set.remove_entry(&id);
        }
    }

    /// FLUSHDB of `db`, or every database (`db` = -1).
    pub fn clear_db(&mut self, db: i32) {
        if db < 0 {
            self.by_db = Vec::new();
        } else if Self::slot(db) != SHARED {
            if let Some(set) = self.by_db.get_mut(Self::slot(db)) {
                *set = IdSet::default();
            }
        }
    }

    /// SWAPDB `a` `b`: the names of each now live in the other.
    pub fn swap_dbs(&mut self, a: i32, b: i32) {
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
            for i in [a, b] {
                if let Some(set) = self.by_db.get_mut(i) {
                    for &id in &union {
                        set.insert(id, ());
                    }
                }
            }
            return;
        }
        self.by_db.swap(a, b);
    }

    /// Number of names kept.
    pub fn len(&self) -> usize {
        self.by_db.iter().map(IdSet::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held (an estimate: each set's tables of 8-byte ids and 1-byte tags, and the
    /// shards' headers).
    pub fn bytes(&self) -> usize {
        let tables: usize = self
            .by_db
            .iter()
            .map(|s| s.capacity() * 9 + s.shard_bytes())
            .sum();
        tables + self.by_db.capacity() * std::mem::size_of::<IdSet>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kept_per_database() {
        let mut s = NameSet::default();
        assert!(!s.contains(0, b"a"));
        s.insert(0, b"a");
        s.insert(3, b"counter:with:a:longer:name");
        assert!(s.contains(0, b"a"));
        assert!(!s.contains(1, b"a"));
        assert!(!s.contains(0, b"b"));
        assert!(s.contains(3, b"counter:with:a:longer:name"));
        assert!(!s.contains(3, b"counter:with:a:longer:namf"));
        assert!(!s.contains(-1, b"a"));
        assert_eq!(s.len(), 2);
        s.remove(0, b"a");
        assert!(!s.contains(0, b"a"));
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn names_differing_in_length_or_padding_differ() {
        let mut s = NameSet::default();
        s.insert(0, b"");
        s.insert(0, b"abcdefgh");
        assert!(!s.contains(0, b"\0"));
        assert!(!s.contains(0, b"abcdefgh\0"));
        assert!(!s.contains(0, b"abcdefg"));
        assert!(s.contains(0, b""));
        assert!(s.contains(0, b"abcdefgh"));
    }

    #[test]
    fn flushes_and_swaps_follow_the_databases() {
        let mut s = NameSet::default();
        s.insert(0, b"a");
        s.insert(1, b"b");
        s.swap_dbs(0, 5);
        assert!(!s.contains(0, b"a"));
        assert!(s.contains(5, b"a"));
        s.clear_db(5);
        assert!(!s.contains(5, b"a"));
        assert!(s.contains(1, b"b"));
        s.clear_db(-1);
        assert!(s.is_empty());
    }

    #[test]
    fn databases_past_the_last_set_share_it_and_keep_their_names() {
        let mut s = NameSet::default();
        let far = MAX_DB_SETS as i32 + 10;
        s.insert(far, b"a");
        assert!(s.contains(far, b"a"));
        assert!(s.contains(far + 1, b"a"), "shared set: a superset");
        s.remove(far, b"a");
        assert!(s.contains(far, b"a"), "the shared set keeps its names");
        s.insert(2, b"b");
        s.swap_dbs(2, far);
        assert!(s.contains(far, b"b"));
        assert!(
            s.contains(2, b"b"),
            "the merge keeps the names on both sides"
        );
        assert!(s.contains(2, b"a"));
        s.clear_db(far);
        assert!(
            s.contains(far, b"b"),
            "only a full flush empties the shared set"
        );
    }

    /// Every name of up to 10 bytes over a small alphabet, and seeded random names up to
    /// 40 bytes, get distinct ids: the words read overlap, but no byte is left out.
    #[test]
    fn short_and_overlapping_names_get_distinct_ids() {
        use crate::testutil::Rng;
        use std::collections::HashMap;
        let ids = NameIds::default();
        let mut seen: HashMap<u64, Vec<u8>> = HashMap::new();
        let mut check = |name: Vec<u8>| {
            if let Some(other) = seen.insert(ids.id(&name), name.clone()) {
                assert_eq!(other, name, "two names share an id");
            }
        };
        let alphabet = [0u8, 1, b'a', 0xff];
        for len in 0..=10u32 {
            for n in 0..4usize.pow(len.min(8)) {
                let mut name: Vec<u8> = (0..len).map(|i| alphabet[(n >> (2 * (i % 8))) & 3]).collect();
                if len > 8 {
                    name.reverse();
                }
                check(name);
            }
        }
        let mut rng = Rng(5);
        for _ in 0..100_000 {
            let len = rng.below(41) as usize;
            check((0..len).map(|_| rng.below(256) as u8).collect());
        }
    }

    #[test]
    fn many_names_stay_distinct() {
        let mut s = NameSet::default();
        for i in 0..10_000 {
            s.insert(0, format!("key:{i}").as_bytes());
        }
        assert_eq!(s.len(), 10_000);
        let strangers = (0..10_000)
            .filter(|i| s.contains(0, format!("other:{i}").as_bytes()))
            .count();
        assert_eq!(strangers, 0);
    }
}
