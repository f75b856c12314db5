//! The 64-bit ids of key names, with this process's random keys (the tracked names' and
//! the expiry schedule's), and the one pass over a name that hashes it and finds a byte
//! in it.
//!
//! Owns: name ids. May not touch: Redis (pure).

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
pub(super) type IdSet = ShardedMap<u64, (), BuildHasherDefault<IdHasher>, 8>;

/// The ids of key names: a keyed 64-bit hash, with random keys of its own per instance, so
/// nobody can choose names whose ids collide.
pub struct NameIds {
    pub(super) seed: (u64, u64),
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
pub(super) fn hash_and_find(seed: (u64, u64), name: &[u8], mark: u8) -> (u64, bool) {
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
