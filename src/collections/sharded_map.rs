//! A hash map that grows in bounded steps: a fixed number of small hash maps (shards),
//! each key in the one its hash picks. A single hash map doubles its table in one step
//! when it fills, moving every entry inside one call: with millions of keys that call
//! holds the server for tens of milliseconds. Here only one shard grows at a time, and a
//! shard holds about 1/4096 of the entries (2,500 with ten million keys).
//!
//! Why not std's `HashMap` (which is the `hashbrown` crate's table, whose growth is the
//! same one step): measured by `measured.rs`, 10M ids inserted on this project's 2-core
//! machine, the `HashMap`'s slowest insert took 446-482 ms (its last doubling), this map's
//! (256 shards, as the expiry schedule and the tracked names use) 42-82 ms, which is the
//! loaded machine's own stalls (as many inserts over 2 ms in both runs).
//!
//! Owns: that structure. May not touch: Redis.

use std::borrow::Borrow;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

/// log2 of the number of shards by default: at ten million keys a shard holds ~2,500.
pub const SHARD_BITS: u32 = 12;
/// Where the shard's bits start in a key's hash: bits 32 and up. A shard's own table
/// reads the lowest bits (its bucket) and the highest 7 (the tags it compares first), so
/// the bits that chose the shard, equal for all its keys, are neither.
const SHARD_SHIFT: u32 = 32;

/// `S` hashes the keys, once per operation: the shard is chosen from the same hash that
/// places the key inside it (with the default `RandomState`, this process's random keys;
/// keys that are keyed hashes already can use a hasher that returns them as they are).
/// `BITS` is log2 of the number of shards: more shards make the largest one-step growth
/// smaller, fewer keep the shards' headers and small tables within the CPU's caches (a
/// set looked up on every event of the server wants few).
pub struct ShardedMap<K, V, S = RandomState, const BITS: u32 = SHARD_BITS> {
    /// Empty until the first insert (an empty map allocates nothing); then 2^BITS maps.
    shards: Vec<HashMap<K, V, S>>,
    hasher: S,
    len: usize,
}

impl<K, V, S: BuildHasher + Clone + Default, const BITS: u32> Default
    for ShardedMap<K, V, S, BITS>
{
    fn default() -> Self {
        ShardedMap {
            shards: Vec::new(),
            hasher: S::default(),
            len: 0,
        }
    }
}

impl<K: Hash + Eq, V, S: BuildHasher + Clone, const BITS: u32> ShardedMap<K, V, S, BITS> {
    const SHARDS: usize = 1 << BITS;

    fn shard_of<Q: Hash + ?Sized>(&self, key: &Q) -> usize {
        (self.hasher.hash_one(key) >> SHARD_SHIFT) as usize & (Self::SHARDS - 1)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get_key_value<Q>(&self, key: &Q) -> Option<(&K, &V)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.shards.get(self.shard_of(key))?.get_key_value(key)
    }

    /// Inserts or replaces; returns the value replaced.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        if self.shards.is_empty() {
            self.shards = (0..Self::SHARDS)
                .map(|_| HashMap::with_hasher(self.hasher.clone()))
                .collect();
        }
        let shard = self.shard_of(&key);
        let old = self.shards.get_mut(shard)?.insert(key, value);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    pub fn remove_entry<Q>(&mut self, key: &Q) -> Option<(K, V)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let shard = self.shard_of(key);
        let shard = self.shards.get_mut(shard)?;
        let removed = shard.remove_entry(key)?;
        // A shard that lost most of its entries gives memory back (a small table to copy).
        if shard.is_empty() {
            *shard = HashMap::with_hasher(self.hasher.clone());
        } else if shard.len() * 4 < shard.capacity() {
            shard.shrink_to(shard.len() * 2);
        }
        self.len -= 1;
        Some(removed)
    }

    /// The number of shards (the entries of each: [`Self::shard_entries`]).
    pub const fn shard_count() -> usize {
        Self::SHARDS
    }

    /// The shard `key` is in: the same in every map of this type whose hasher is the same
    /// (a keyless one, as `BuildHasherDefault`'s).
    pub fn shard_index<Q: Hash + ?Sized>(&self, key: &Q) -> usize {
        self.shard_of(key)
    }

    /// The entries of shard `shard` (none past the last, or before the first insert).
    pub fn shard_entries(&self, shard: usize) -> impl Iterator<Item = (&K, &V)> {
        self.shards.get(shard).into_iter().flatten()
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.shards.iter().flatten()
    }

    /// Bytes of the shards' own headers (their tables are counted by [`Self::capacity`]).
    pub fn shard_bytes(&self) -> usize {
        self.shards.capacity() * std::mem::size_of::<HashMap<K, V, S>>()
    }

    /// Entries the shards have room for (for memory estimates).
    pub fn capacity(&self) -> usize {
        self.shards.iter().map(HashMap::capacity).sum()
    }

    /// Frees whole shards from the end, about `max_entries` entries' worth (at least one
    /// shard); true once the map is empty. Lets a map that is no longer needed go in
    /// bounded steps instead of all at once.
    pub fn release_some(&mut self, max_entries: usize) -> bool {
        let mut freed = 0;
        while let Some(shard) = self.shards.pop() {
            freed += shard.len();
            self.len -= shard.len();
            drop(shard);
            if freed >= max_entries {
                break;
            }
        }
        self.shards.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Rng;

    /// Seeded random inserts, replacements and removals against a std map: same answers,
    /// same length.
    #[test]
    fn sharded_map_matches_a_plain_map() {
        let mut rng = Rng(7);
        let mut map: ShardedMap<Box<[u8]>, u64> = ShardedMap::default();
        let mut model: HashMap<Box<[u8]>, u64> = HashMap::new();
        for step in 0..200_000u64 {
            let key: Box<[u8]> = format!("k{}", rng.below(20_000)).into_bytes().into();
            match rng.below(3) {
                0 | 1 => assert_eq!(
                    map.insert(key.clone(), step),
                    model.insert(key, step),
                    "step {step}"
                ),
                _ => assert_eq!(
                    map.remove_entry(&key[..]),
                    model.remove_entry(&key[..]),
                    "step {step}"
                ),
            }
            let probe: Box<[u8]> = format!("k{}", rng.below(20_000)).into_bytes().into();
            assert_eq!(
                map.get_key_value(&probe[..]),
                model.get_key_value(&probe[..]),
                "step {step}"
            );
            assert_eq!(map.len(), model.len(), "step {step}");
            assert_eq!(map.is_empty(), model.is_empty());
        }
        for (key, value) in &model {
            assert_eq!(map.get_key_value(&key[..]), Some((key, value)));
        }
        let mut steps = 0;
        while !map.release_some(100) {
            steps += 1;
        }
        assert!(steps > 10, "released in {steps} steps");
        assert_eq!(map.len(), 0);
    }

    /// Growing to 300k keys never moves more than a small share of them in one insert:
    /// no shard holds more than a few times its fair share.
    #[test]
    fn sharded_map_grows_one_small_shard_at_a_time() {
        let mut map: ShardedMap<u64, u64> = ShardedMap::default();
        let n = 300_000u64;
        for i in 0..n {
            map.insert(i, i);
        }
        let fair = n as usize / (1 << SHARD_BITS);
        let largest = map.shards.iter().map(HashMap::len).max().unwrap_or(0);
        assert!(largest < fair * 3, "largest shard {largest}, fair {fair}");
        assert_eq!(map.len(), n as usize);
    }
}
