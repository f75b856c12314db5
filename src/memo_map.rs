//! A map from byte-string names to values that remembers the entry it found last: the
//! read mirrors keep one per database, and a hot counter (read or written again and again)
//! is then found by comparing its name, without hashing it.
//!
//! Values live in a vector of entries, each holding its name (shared with the index);
//! the index maps a name to its entry. The remembered entry is checked by its name before
//! use, so a removal or replacement can never make it answer for another name.
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

    pub fn get_mut(&mut self, name: &[u8]) -> Option<&mut V> {
        let at = self.find(name)?;
        let (_, value) = self.entries.get_mut(at)?.as_mut()?;
        Some(value)
    }

    /// Puts `value` under `name` (replacing any value there) and returns it in place.
    pub fn insert(&mut self, name: &[u8], value: V) -> Option<&mut V> {
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
        let entry = self.entries.get_mut(at)?;
        *entry = Some((name, value));
        self.last = at;
        entry.as_mut().map(|(_, value)| value)
    }

    pub fn remove(&mut self, name: &[u8]) -> Option<V> {
        let at = self.index.remove(name)?;
        let (_, value) = self.entries.get_mut(at)?.take()?;
        self.vacant.push(at);
        Some(value)
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
