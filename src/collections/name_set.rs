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

use crate::collections::sharded_map::ShardedMap;

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

/// 256 shards: the filter turns most names away first, so a lookup here is rare for the
/// server's other keys, and the shards' headers (8 KB) stay small (4,096 shards cost two
/// cache misses a lookup). Ten million names make shards of ~40k ids, whose growth moves
/// ~0.5 MB in one step inside the command that adds a name (with 64 shards of ~160k ids,
/// a growth took up to 4.3 ms at 10M names).
type IdSet = ShardedMap<u64, (), BuildHasherDefault<IdHasher>, 8>;

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
    /// its key name here, so the bytes are read as whole words: the last word is the
    /// name's last 8 bytes (overlapping the word before when the length is not a multiple
    /// of 8), and a shorter name is read whole by [`short_word`]; with the length mixed
    /// in, two names of one length that differ in any byte differ in some word.
    pub fn id(&self, name: &[u8]) -> u64 {
        hash_and_find(self.seed, name, 0).0
    }
}

/// The id of `name` under `seed` (see [`NameIds::id`]), and whether `name` contains the
/// byte `mark` (never false if it does; true for some short names without it when `mark`
/// is 0): found in the words the hash reads anyway, a few instructions a word, so the
/// keyspace callback reads a name once.
#[inline(always)]
fn hash_and_find(seed: (u64, u64), name: &[u8], mark: u8) -> (u64, bool) {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    const ONES: u64 = 0x0101_0101_0101_0101;
    // A byte of `word ^ marks` is zero where `word` holds `mark`; `x - ONES & !x` sets a
    // byte's high bit where `x` has a zero byte at or below it (and only if it has one).
    let marks = ONES * u64::from(mark);
    let zeros = |word: u64| {
        let x = word ^ marks;
        x.wrapping_sub(ONES) & !x
    };
    let len = name.len();
    let mut h = seed.0 ^ (len as u64).wrapping_mul(K);
    let mut found = 0;
    let mut mix = |word: &[u8; 8]| {
        let word = u64::from_le_bytes(*word);
        h = (h.rotate_left(23) ^ word).wrapping_mul(K);
        found |= zeros(word);
    };
    // Every word but the last from the start; then the name's last 8 bytes, which may
    // overlap the word before. The first two words are read without a loop: most key
    // names have at most 24 bytes, and a loop this short costs more to set up than to run.
    let mut rest = name;
    for _ in 0..2 {
        match rest.split_first_chunk::<8>() {
            Some((word, tail)) if !tail.is_empty() => {
                mix(word);
                rest = tail;
            }
            _ => break,
        }
    }
    while let Some((word, tail)) = rest.split_first_chunk::<8>().filter(|(_, t)| !t.is_empty()) {
        mix(word);
        rest = tail;
    }
    let last = match name.last_chunk::<8>() {
        Some(word) => u64::from_le_bytes(*word),
        None => short_word(name),
    };
    // A short word's padding is zero bytes: they find a `mark` of 0 (a superset, which
    // only costs a look).
    found |= zeros(last);
    h = (h.rotate_left(23) ^ last ^ seed.1).wrapping_mul(K);
    // fmix64 of MurmurHash3: tables read the low bits, their tags the high ones.
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    (h ^ (h >> 33), found & (ONES * 0x80) != 0)
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

/// Cells of [`IdFilter`] at least, and at most: a filter grows by counting every id again
/// (in one step: at most 262,144 ids, a few ms), so past the largest size it stops growing
/// and answers "maybe" more often (the exact sets behind it stay exact).
const FILTER_MIN_CELLS: usize = 1 << 12;
const FILTER_MAX_CELLS: usize = 1 << 21;
/// Cells per id the filter keeps at least, below its largest size: with two cells an id,
/// about 5% of other ids find both of theirs taken.
const FILTER_CELLS_PER_ID: usize = 8;
/// The most ids the filter counts anew, or uncounts, in one step.
const FILTER_MAX_STEP: usize = FILTER_MAX_CELLS / FILTER_CELLS_PER_ID;

/// A counting filter of ids in front of the exact sets. Every id of every database counts
/// once in two cells of one 64-cell block; each cell has a bit, set while its count is not
/// zero, and the bits are all a lookup reads: one 64-bit word, so "no such id" costs a
/// few instructions and one cache line of an array of one byte per id (the sets would cost
/// a shard's header, its control bytes and the database's set). An id whose two bits are
/// set may be kept (the sets decide); any other is in no database.
///
/// Counts only drop when an id leaves its set, so the filter always covers the sets: a
/// count at 255 stays there (it no longer knows how many ids it holds), and when the ids
/// to uncount are too many for one step (a large database flushed), the filter gives up
/// and answers "maybe" for every id until the sets are small enough to count again.
#[derive(Default)]
pub struct IdFilter {
    /// One bit per cell: its count is not zero. Empty while no id is counted (or the
    /// filter gave up); else a power of two of words.
    bits: Vec<u64>,
    /// The count of each cell (64 per word of `bits`), read only when ids come and go.
    counts: Vec<u8>,
    /// The filter answers "maybe" for every id: it was given up.
    given_up: bool,
}

impl IdFilter {
    pub const fn new() -> Self {
        IdFilter {
            bits: Vec::new(),
            counts: Vec::new(),
            given_up: false,
        }
    }

    /// The block of `id` (its low bits) and its two cells there (two sets of six high
    /// bits); the cells may be one.
    #[inline(always)]
    fn cells_of(&self, id: u64) -> (usize, u32, u32) {
        Self::cells(id, self.bits.len().wrapping_sub(1))
    }

    /// [`Self::cells_of`] in a filter of `mask + 1` blocks.
    #[inline(always)]
    fn cells(id: u64, mask: usize) -> (usize, u32, u32) {
        (
            id as usize & mask,
            (id >> 52) as u32 & 63,
            (id >> 58) as u32,
        )
    }

    /// The filter's words, a power of two of them; one word of all bits set (any id may
    /// be kept) when the filter gave up, or has no words (never, while it counts ids).
    fn words(&self) -> &[u64] {
        if self.given_up || self.bits.is_empty() {
            ANY_NAMES
        } else {
            &self.bits
        }
    }

    /// The cells for `total` ids.
    fn cells_for(total: usize) -> usize {
        total
            .saturating_mul(FILTER_CELLS_PER_ID)
            .next_power_of_two()
            .clamp(FILTER_MIN_CELLS, FILTER_MAX_CELLS)
    }

    /// True if the sets, now with `total` ids, want a larger filter (or a given-up filter
    /// can count them again): then [`Self::recount`] them, else [`Self::add`] the new one.
    pub fn wants_recount(&self, total: usize) -> bool {
        if self.given_up {
            total <= FILTER_MAX_STEP
        } else {
            self.counts.len() < Self::cells_for(total)
        }
    }

    /// Counts every id of the sets (`total` of them) anew.
    pub fn recount(&mut self, total: usize, ids: impl Iterator<Item = u64>) {
        let cells = Self::cells_for(total);
        self.given_up = false;
        self.bits = vec![0; cells / 64];
        self.counts = vec![0; cells];
        ids.for_each(|id| self.bump(id, true));
    }

    /// Counts an id that joined its set.
    pub fn add(&mut self, id: u64) {
        if !self.given_up {
            self.bump(id, true);
        }
    }

    /// Uncounts an id that left its set.
    pub fn remove(&mut self, id: u64) {
        if !self.given_up {
            self.bump(id, false);
        }
    }

    /// Uncounts the `leaving` ids of a set that is being emptied, or gives up if they are
    /// too many to go through in one step.
    pub fn remove_all(&mut self, ids: impl Iterator<Item = u64>, leaving: usize) {
        if leaving > FILTER_MAX_STEP {
            *self = IdFilter::new();
            self.given_up = true;
        } else {
            ids.for_each(|id| self.remove(id));
        }
    }

    fn bump(&mut self, id: u64, up: bool) {
        let (block, first, second) = self.cells_of(id);
        for cell in [first, second] {
            let at = block * 64 + cell as usize;
            let Some(count) = self.counts.get_mut(at) else {
                continue;
            };
            *count = match (*count, up) {
                (u8::MAX, _) => u8::MAX,
                (n, true) => n + 1,
                (n, false) => n.saturating_sub(1),
            };
            if let Some(bits) = self.bits.get_mut(block) {
                if *count == 0 {
                    *bits &= !(1u64 << cell);
                } else {
                    *bits |= 1u64 << cell;
                }
            }
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bits.capacity() * 8 + self.counts.capacity()
    }
}

/// The filter words of a set that keeps no name: every name is turned away.
pub const NO_NAMES: &[u64] = &[0];
/// The filter words of a filter that gave up: any name may be kept.
const ANY_NAMES: &[u64] = &[u64::MAX];

/// A name's screening (its id if some database may keep it, and whether it contains
/// `mark`) from the parts it reads ([`NameSet::screen_parts`]): the ids'
/// seeds, and the filter's `mask + 1` words, read by `word` (block `0..=mask`). So a
/// caller may keep the parts where reading them costs no borrow of the set.
#[inline(always)]
pub fn screen_with(
    seed: (u64, u64),
    mask: usize,
    word: impl FnOnce(usize) -> u64,
    name: &[u8],
    mark: u8,
) -> Screened {
    let (id, marked) = hash_and_find(seed, name, mark);
    let (block, first, second) = IdFilter::cells(id, mask);
    let wanted = 1u64 << first | 1u64 << second;
    Screened {
        maybe: (word(block) & wanted == wanted).then_some(id),
        marked,
    }
}

/// What [`screen_with`] learns of a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Screened {
    /// The name's id, if some database may keep it ([`NameSet::contains_id`] decides).
    pub maybe: Option<u64>,
    /// The name contains the byte asked for.
    pub marked: bool,
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
    /// The ids of every database, asked first.
    filter: IdFilter,
    /// How many ids the sets hold, all databases together.
    total: usize,
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
            if set.insert(id, ()).is_none() {
                self.total += 1;
                self.count(id);
            }
        }
    }

    /// Counts an id new to its set in the filter, or every id anew when the filter is to
    /// grow (or count again after giving up).
    fn count(&mut self, id: u64) {
        if self.filter.wants_recount(self.total) {
            self.recount();
        } else {
            self.filter.add(id);
        }
    }

    fn recount(&mut self) {
        let NameSet {
            by_db,
            filter,
            total,
            ..
        } = self;
        filter.recount(
            *total,
            by_db.iter().flat_map(|set| set.iter().map(|(&id, _)| id)),
        );
    }

    /// After ids left: a filter that gave up counts again once the ids are few enough.
    fn after_removal(&mut self) {
        if self.filter.wants_recount(self.total) {
            self.recount();
        }
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
                self.filter.remove(id);
                self.after_removal();
            }
        }
    }

    /// FLUSHDB of `db`, or every database (`db` = -1).
    pub fn clear_db(&mut self, db: i32) {
        if db < 0 {
            self.by_db = Vec::new();
            self.filter = IdFilter::new();
            self.total = 0;
        } else if Self::slot(db) != SHARED {
            if let Some(set) = self.by_db.get_mut(Self::slot(db)) {
                let gone = std::mem::take(set);
                self.total -= gone.len();
                self.filter
                    .remove_all(gone.iter().map(|(&id, _)| id), gone.len());
                self.after_removal();
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
                let mut name: Vec<u8> = (0..len)
                    .map(|i| alphabet[(n >> (2 * (i % 8))) & 3])
                    .collect();
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

    /// Seeded random inserts, removals, flushes and swaps over a few databases against a
    /// plain model: the filter never turns a kept name away (no false negative), the sets
    /// stay exact, and the filter turns away most names never kept.
    #[test]
    fn the_filter_never_loses_a_kept_name() {
        use crate::testutil::Rng;
        use std::collections::HashSet;
        let mut rng = Rng(23);
        let mut s = NameSet::default();
        let mut model: HashSet<(i32, u64)> = HashSet::new();
        let name = |n: u64| format!("key:{n}").into_bytes();
        for step in 0..300_000u64 {
            let db = rng.below(4) as i32;
            let n = rng.below(40_000) as u64;
            match rng.below(1000) {
                0 => {
                    s.clear_db(db);
                    model.retain(|&(d, _)| d != db);
                }
                1 => {
                    let other = rng.below(4) as i32;
                    s.swap_dbs(db, other);
                    model = model
                        .into_iter()
                        .map(|(d, n)| match d {
                            d if d == db => (other, n),
                            d if d == other => (db, n),
                            d => (d, n),
                        })
                        .collect();
                }
                2..=600 => {
                    s.insert(db, &name(n));
                    model.insert((db, n));
                }
                _ => {
                    s.remove(db, &name(n));
                    model.remove(&(db, n));
                }
            }
            let probe = (rng.below(4) as i32, rng.below(40_000) as u64);
            assert_eq!(
                s.contains(probe.0, &name(probe.1)),
                model.contains(&probe),
                "step {step}"
            );
            assert_eq!(s.len(), model.len(), "step {step}");
        }
        for &(db, n) in &model {
            assert!(s.contains(db, &name(n)));
        }
        let strangers = (0..100_000u64)
            .filter(|n| s.may_contain(format!("other:{n}").as_bytes()).is_some())
            .count();
        assert!(
            strangers < 10_000,
            "{strangers} of 100000 strangers pass the filter"
        );
    }

    /// Flushing a database too large to uncount now makes the filter give up ("maybe" for
    /// every name), and it counts again once the names are few.
    #[test]
    fn the_filter_gives_up_and_comes_back() {
        let mut s = NameSet::default();
        let limit = FILTER_MAX_STEP;
        for n in 0..limit + 10 {
            s.insert(1, format!("big:{n}").as_bytes());
            s.insert(3, format!("big:{n}").as_bytes());
        }
        s.insert(0, b"small");
        s.clear_db(1);
        assert!(s.filter.given_up, "too many ids to uncount in one step");
        assert!(
            s.may_contain(b"other").is_some(),
            "given up: maybe for every name"
        );
        assert!(s.contains(0, b"small"));
        assert!(s.contains(3, b"big:1"));
        assert!(!s.contains(0, b"other"));
        assert!(!s.contains(1, b"big:1"));
        s.clear_db(3);
        // A few names: counted again at once.
        assert!(!s.filter.given_up);
        assert!(s.may_contain(b"small").is_some());
        let strangers = (0..10_000)
            .filter(|n| s.may_contain(format!("o:{n}").as_bytes()).is_some())
            .count();
        assert!(strangers < 100, "{strangers}");
        // Past the largest size the filter stops growing and keeps every name.
        for n in 0..limit * 2 {
            s.insert(2, format!("huge:{n}").as_bytes());
        }
        assert_eq!(s.filter.counts.len(), FILTER_MAX_CELLS);
        assert!((0..limit * 2).all(|n| s.contains(2, format!("huge:{n}").as_bytes())));
    }

    /// Seeded random names of 0 to 40 bytes, over an alphabet with `|` in it: the screen
    /// finds the mark exactly when the name holds it, gives the name's id, and turns no
    /// kept name away (before the first insert, after it, and once the filter gave up).
    #[test]
    fn the_screen_finds_the_mark_and_never_loses_a_kept_name() {
        use crate::testutil::Rng;
        let mut rng = Rng(41);
        let alphabet = [b'|', b'a', b'1', b':', 0, 0xff, b'|' ^ 0x80, b'|' - 1];
        let random_name = |rng: &mut Rng| -> Vec<u8> {
            let len = rng.below(41) as usize;
            (0..len).map(|_| alphabet[rng.below(8) as usize]).collect()
        };
        let empty = NameSet::new();
        for _ in 0..20_000 {
            let name = random_name(&mut rng);
            let screened = empty.screen(&name, b'|');
            assert_eq!(screened.marked, name.contains(&b'|'), "{name:?}");
            assert_eq!(screened.maybe, None);
        }
        let mut s = NameSet::new();
        let mut kept = Vec::new();
        for _ in 0..20_000 {
            let name = random_name(&mut rng);
            s.insert(rng.below(3) as i32, &name);
            kept.push(name);
        }
        let ids = s.ids.as_ref().map(|ids| ids.seed);
        for name in &kept {
            let screened = s.screen(name, b'|');
            assert_eq!(screened.marked, name.contains(&b'|'), "{name:?}");
            let id = NameIds {
                seed: ids.unwrap_or_default(),
            }
            .id(name);
            assert_eq!(screened.maybe, Some(id), "a kept name passes, with its id");
        }
        let strangers = (0..20_000)
            .map(|_| random_name(&mut rng))
            .filter(|name| s.screen(name, b'|').maybe.is_some() && !kept.contains(name))
            .count();
        assert!(strangers < 2_000, "{strangers} of 20000 strangers pass");
        // Given up: every name may be kept.
        s.filter = IdFilter::new();
        s.filter.given_up = true;
        assert!(kept.iter().all(|name| s.screen(name, b'|').maybe.is_some()));
        assert!(s.screen(b"never kept", b'|').maybe.is_some());
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
