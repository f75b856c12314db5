//! A map from byte-string names to values that remembers the entry it found last: the
//! read mirrors keep one per database, and a hot counter (read or written again and again)
//! is then found by comparing its name, without hashing it.
//!
//! Values live in a vector of entries, each holding its name (shared with the index);
//! the index maps a name to its entry. The remembered entry is checked by its name before
//! use, so a removal or replacement can never make it answer for another name.
//!
//! Why not a plain `HashMap` of the names: measured by `measured.rs`, a hot key looked up
//! again and again among 100k names costs 11 ns here and 55 ns in a `HashMap` with std's
//! hasher, on every command of a hot counter.
//!
//! Owns: that data structure. May not touch: Redis (pure).

use std::collections::HashMap;
use std::rc::Rc;

pub struct MemoMap<V> {
    /// Name -> position in `entries`.
    index: HashMap<Rc<[u8]>, usize>,
    /// Every value with its name; `None` where one was removed (reused by the next insert).
    entries: Vec<Option<(Rc<[u8]>, V)>>,
    vacant: Vec<usize>,
    /// The entry found or inserted last (checked by name: it may have gone since).
    last: usize,
}

impl<V> Default for MemoMap<V> {
    fn default() -> Self {
        MemoMap {
            index: HashMap::new(),
            entries: Vec::new(),
            vacant: Vec::new(),
            last: 0,
        }
    }
}

impl<V> MemoMap<V> {
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Where `name`'s entry is: the last one found, if it is that name's, else looked up.
    fn find(&mut self, name: &[u8]) -> Option<usize> {
        let last_matches = matches!(
            self.entries.get(self.last),
            Some(Some((last, _))) if **last == *name
        );
        if !last_matches {
            self.last = *self.index.get(name)?;
        }
        Some(self.last)
    }

    /// Where `name`'s entry is, to reach it again with [`MemoMap::at_mut`] while the map
    /// does not change (an insertion or removal may move entries).
    pub fn position(&mut self, name: &[u8]) -> Option<usize> {
        self.find(name)
    }

    /// The entry at `at` (from [`MemoMap::position`] or [`MemoMap::insert_at`]): its name
    /// and value.
    #[inline]
    pub fn at_mut(&mut self, at: usize) -> Option<(&[u8], &mut V)> {
        let (name, value) = self.entries.get_mut(at)?.as_mut()?;
        Some((name, value))
    }

    /// Removes the entry at `at`.
    pub fn remove_at(&mut self, at: usize) -> Option<V> {
        let name = match self.entries.get(at) {
            Some(Some((name, _))) => Rc::clone(name),
            _ => return None,
        };
        self.remove(&name)
    }

    pub fn get_mut(&mut self, name: &[u8]) -> Option<&mut V> {
        let at = self.find(name)?;
        let (_, value) = self.entries.get_mut(at)?.as_mut()?;
        Some(value)
    }

    /// Puts `value` under `name` (replacing any value there) and returns it in place.
    pub fn insert(&mut self, name: &[u8], value: V) -> Option<&mut V> {
        let at = self.insert_at(name, value);
        self.entries.get_mut(at)?.as_mut().map(|(_, value)| value)
    }

    /// [`MemoMap::insert`], returning where the entry is.
    pub fn insert_at(&mut self, name: &[u8], value: V) -> usize {
        let at = match self.find(name) {
            Some(at) => at,
            None => {
                let at = self.vacant.pop().unwrap_or(self.entries.len());
                if at == self.entries.len() {
                    self.entries.push(None);
                }
                at
            }
        };
        let name: Rc<[u8]> = Rc::from(name);
        self.index.insert(Rc::clone(&name), at);
        if let Some(entry) = self.entries.get_mut(at) {
            *entry = Some((name, value));
        }
        self.last = at;
        at
    }

    pub fn remove(&mut self, name: &[u8]) -> Option<V> {
        let at = self.index.remove(name)?;
        let (_, value) = self.entries.get_mut(at)?.take()?;
        self.vacant.push(at);
        self.compact_if_sparse();
        Some(value)
    }

    /// Removes the first entry at or after `hand` (wrapping around) and moves `hand` past
    /// it: called again and again, a clock hand that takes the entries in turn, each in
    /// O(1) on average (the vector is never mostly vacant, see `compact_if_sparse`).
    pub fn evict_next(&mut self, hand: &mut usize) -> Option<(Rc<[u8]>, V)> {
        let n = self.entries.len();
        if self.index.is_empty() || n == 0 {
            return None;
        }
        let start = *hand % n;
        let at = (start..n)
            .chain(0..start)
            .find(|&at| matches!(self.entries.get(at), Some(Some(_))))?;
        *hand = at + 1;
        let name = match self.entries.get(at) {
            Some(Some((name, _))) => Rc::clone(name),
            _ => return None,
        };
        let value = self.remove(&name)?;
        Some((name, value))
    }

    /// Once three quarters of the vector are vacant, moves the entries together and gives
    /// the spare capacity back: memory follows the entries down after mass removals (keys
    /// deleted, an eviction), in steps whose cost is paid for by the removals before them.
    fn compact_if_sparse(&mut self) {
        let len = self.entries.len();
        if len < 64 || self.index.len() * 4 > len {
            return;
        }
        let entries: Vec<Option<(Rc<[u8]>, V)>> = std::mem::take(&mut self.entries)
            .into_iter()
            .filter(Option::is_some)
            .collect();
        self.entries = entries;
        // The collect above reuses the old buffer: give its spare capacity back.
        self.entries.shrink_to_fit();
        self.index = HashMap::with_capacity(self.entries.len());
        for (at, entry) in self.entries.iter().enumerate() {
            if let Some((name, _)) = entry {
                self.index.insert(Rc::clone(name), at);
            }
        }
        self.vacant = Vec::new();
        self.last = 0;
    }
}

/// One [`MemoMap`] per database: database 0's (the usual one, and the only one in a
/// cluster) inline, so a lookup there loads one cache line less than through a list; the
/// others in a short list.
pub struct DbMaps<V> {
    db0: MemoMap<V>,
    others: Vec<(i32, MemoMap<V>)>,
}

impl<V> Default for DbMaps<V> {
    fn default() -> Self {
        DbMaps {
            db0: MemoMap::default(),
            others: Vec::new(),
        }
    }
}

impl<V> DbMaps<V> {
    /// The map of `db`, if it has one.
    pub fn db(&mut self, db: i32) -> Option<&mut MemoMap<V>> {
        if db == 0 {
            return Some(&mut self.db0);
        }
        self.others
            .iter_mut()
            .find(|(d, _)| *d == db)
            .map(|(_, map)| map)
    }

    /// Entries in all databases.
    #[cfg(test)]
    pub fn entries(&self) -> usize {
        self.db0.len() + self.others.iter().map(|(_, map)| map.len()).sum::<usize>()
    }

    /// Removes one entry by the clock `hand` of [`MemoMap::evict_next`], from database 0
    /// first (where nearly every entry lives) and then from the others.
    pub fn evict_next(&mut self, hand: &mut usize) -> Option<(Rc<[u8]>, V)> {
        self.db0.evict_next(hand).or_else(|| {
            self.others
                .iter_mut()
                .find_map(|(_, map)| map.evict_next(hand))
        })
    }

    /// The map of `db`, made if missing.
    pub fn db_or_new(&mut self, db: i32) -> &mut MemoMap<V> {
        if db == 0 {
            return &mut self.db0;
        }
        if !self.others.iter().any(|(d, _)| *d == db) {
            self.others.push((db, MemoMap::default()));
        }
        match self.others.iter_mut().find(|(d, _)| *d == db) {
            Some((_, map)) => map,
            // Not reached: pushed just above.
            None => &mut self.db0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Rng;

    /// Random inserts, lookups and removals over a few names (so the remembered entry is
    /// often hit, often stale, often reused for another name) answer like a plain map.
    #[test]
    fn memo_map_matches_a_plain_map() {
        let mut rng = Rng(11);
        let mut memo: MemoMap<i64> = MemoMap::default();
        let mut plain: HashMap<Vec<u8>, i64> = HashMap::new();
        let names: Vec<Vec<u8>> = (0..12).map(|i| format!("k{i}").into_bytes()).collect();
        for step in 0..100_000 {
            let name = &names[rng.below(names.len() as i64) as usize];
            match rng.below(10) {
                0..=1 => {
                    let value = rng.below(1_000);
                    assert_eq!(memo.insert(name, value).copied(), Some(value));
                    plain.insert(name.clone(), value);
                }
                2 => assert_eq!(memo.remove(name), plain.remove(name), "step {step}"),
                3 => {
                    if let (Some(m), Some(p)) = (memo.get_mut(name), plain.get_mut(name)) {
                        *m += 1;
                        *p += 1;
                    }
                }
                _ => assert_eq!(
                    memo.get_mut(name).copied(),
                    plain.get(name).copied(),
                    "step {step}"
                ),
            }
            assert_eq!(memo.len(), plain.len());
        }
        // Removed entries are reused: the vector never outgrows the names.
        assert!(memo.entries.len() <= names.len());
    }

    /// Evicting by the clock hand takes every entry once before any twice, the map keeps
    /// answering like a plain map meanwhile, and mass removals give the vector back.
    #[test]
    fn eviction_takes_entries_in_turn_and_memory_follows() {
        let mut memo: MemoMap<usize> = MemoMap::default();
        let n = 1_000;
        for i in 0..n {
            memo.insert(format!("k{i}").as_bytes(), i);
        }
        let mut hand = 0;
        let mut seen = std::collections::HashSet::new();
        for _ in 0..n / 2 {
            let (name, value) = memo.evict_next(&mut hand).expect("an entry");
            assert_eq!(*name, *format!("k{value}").as_bytes());
            assert!(seen.insert(value), "{value} evicted twice");
        }
        assert_eq!(memo.len(), n / 2);
        for i in 0..n {
            let name = format!("k{i}");
            let expected = (!seen.contains(&i)).then_some(i);
            assert_eq!(memo.get_mut(name.as_bytes()).copied(), expected);
        }
        while memo.evict_next(&mut hand).is_some() {}
        assert!(memo.is_empty());
        assert!(memo.entries.len() < 64, "{} slots kept", memo.entries.len());
        assert!(memo.entries.capacity() < 64 && memo.index.capacity() < 256);
        assert_eq!(memo.evict_next(&mut hand), None);
        memo.insert(b"again", 7);
        assert_eq!(memo.get_mut(b"again").copied(), Some(7));
    }

    /// Each database has its own map, database 0's as much as any other's.
    #[test]
    fn databases_keep_their_own_maps() {
        let mut maps: DbMaps<i64> = DbMaps::default();
        assert!(maps.db(3).is_none());
        for db in [0, 3, 0, 15, 3] {
            maps.db_or_new(db).insert(b"k", i64::from(db));
        }
        for db in [0, 3, 15] {
            assert_eq!(
                maps.db(db).and_then(|m| m.get_mut(b"k")).copied(),
                Some(i64::from(db))
            );
        }
        assert!(maps.db(1).is_none());
        assert_eq!(maps.db_or_new(1).get_mut(b"k"), None);
        assert_eq!(maps.db(0).and_then(|m| m.remove(b"k")), Some(0));
        assert_eq!(maps.db(3).and_then(|m| m.get_mut(b"k")).copied(), Some(3));
    }
}
