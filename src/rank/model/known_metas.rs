//! The last meta tally read or wrote of each board, so keyspace events are understood
//! without opening keys inside the notification callback, and whether it is *verified*.
//!
//! A known meta is *verified* when it is known to equal the stored one: TSRANK.INCRBY then
//! uses it without reading `base|meta` (the hot path's meta read and parse). The
//! invariant: verified means the meta hash exists with exactly these fields and no TTL on
//! the key or its fields. It holds because every change to a meta hash either is tally's
//! own write (which records the new meta here) or fires a keyspace event on it (which
//! drops the verification, whoever caused it: a user, a replicated effect, tally's own
//! `RENAME`), and flushes, SWAPDB and loads drop what they replace.
//!
//! Owns: that memory. May not touch: Redis (pure).

use std::collections::HashMap;
use std::mem::size_of;
use std::os::raw::c_int;

use super::board_id::ENTRY_OVERHEAD;
use super::meta::Meta;

/// A board's last meta and whether it is verified (see the module doc).
#[derive(Clone, Copy)]
struct Known {
    meta: Meta,
    verified: bool,
}

/// How tally came to know a board's meta (see [`KnownMetas::note`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MetaOrigin {
    /// Read from the meta hash: a verified meta that differs was stale (a mismatch).
    Read,
    /// Written by tally (or put in place): a verified meta stays verified if unchanged.
    Written,
    /// Read or written, and known to be the stored one (see the module doc).
    Verified,
}

/// See the module doc.
#[derive(Default)]
pub struct KnownMetas {
    /// By database, then base: a lookup by `&[u8]` needs no allocation (every INCRBY and
    /// read looks up its board).
    by_db: HashMap<c_int, HashMap<Vec<u8>, Known>>,
    /// Bytes held, kept as entries come and go (INFO reads it in O(1)).
    bytes: usize,
    /// Verified metas found to differ from the stored one (a broken invariant: tests
    /// assert it stays 0).
    mismatches: u64,
}

fn entry_bytes(base: &[u8]) -> usize {
    base.len() + size_of::<Known>() + ENTRY_OVERHEAD
}

impl KnownMetas {
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// How many verified metas were found to differ from the stored one.
    pub fn mismatches(&self) -> u64 {
        self.mismatches
    }

    /// Records the meta of the board at `base`, as tally came to know it (`origin`).
    pub fn note(&mut self, db: c_int, base: &[u8], meta: Meta, origin: MetaOrigin) {
        let verified = origin == MetaOrigin::Verified;
        let in_db = self.by_db.entry(db).or_default();
        match in_db.get_mut(base) {
            Some(known) => {
                let unchanged = known.meta == meta;
                if known.verified && !unchanged && origin == MetaOrigin::Read {
                    self.mismatches += 1;
                }
                known.verified = verified || (known.verified && unchanged);
                known.meta = meta;
            }
            None => {
                in_db.insert(base.to_vec(), Known { meta, verified });
                self.bytes += entry_bytes(base);
            }
        }
    }

    /// The last meta tally saw for the board at `base`.
    pub fn get(&self, db: c_int, base: &[u8]) -> Option<Meta> {
        Some(self.by_db.get(&db)?.get(base)?.meta)
    }

    /// The board's meta if it is verified (whether the board is quarantined is the
    /// caller's to ask).
    pub fn verified(&self, db: c_int, base: &[u8]) -> Option<Meta> {
        let known = self.by_db.get(&db)?.get(base)?;
        known.verified.then_some(known.meta)
    }

    /// Something happened to the board's meta hash: its meta must be read again.
    pub fn unverify(&mut self, db: c_int, base: &[u8]) {
        if let Some(known) = self.by_db.get_mut(&db).and_then(|d| d.get_mut(base)) {
            known.verified = false;
        }
    }

    /// A verified meta was found to differ from the stored one.
    pub fn note_mismatch(&mut self, db: c_int, base: &[u8]) {
        self.mismatches += 1;
        self.unverify(db, base);
    }

    /// The board at `base` is gone.
    pub fn forget(&mut self, db: c_int, base: &[u8]) {
        if let Some(in_db) = self.by_db.get_mut(&db) {
            if in_db.remove(base).is_some() {
                self.bytes = self.bytes.saturating_sub(entry_bytes(base));
            }
        }
    }

    /// Keeps only the databases `keep` says to.
    pub fn retain_dbs(&mut self, keep: impl Fn(c_int) -> bool) {
        self.by_db.retain(|d, _| keep(*d));
        self.bytes = (self.by_db.values())
            .flat_map(HashMap::keys)
            .map(|base| entry_bytes(base))
            .sum();
    }

    /// SWAPDB: what was known of one database now belongs to the other (`swap` maps a
    /// database to its new number). Nothing stays verified.
    pub fn swap_dbs(&mut self, swap: impl Fn(c_int) -> c_int) {
        self.by_db = std::mem::take(&mut self.by_db)
            .into_iter()
            .map(|(d, mut boards)| {
                boards.values_mut().for_each(|known| known.verified = false);
                (swap(d), boards)
            })
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(lo: i64, hi: i64) -> Meta {
        Meta {
            window: 40,
            slot: 10,
            lo,
            hi,
            capacity: 0,
        }
    }

    #[test]
    fn a_written_meta_is_known_but_not_verified_until_it_is() {
        let mut known = KnownMetas::default();
        known.note(0, b"b", meta(1, 2), MetaOrigin::Written);
        assert_eq!(known.get(0, b"b"), Some(meta(1, 2)));
        assert_eq!(known.verified(0, b"b"), None);
        known.note(0, b"b", meta(1, 2), MetaOrigin::Verified);
        assert_eq!(known.verified(0, b"b"), Some(meta(1, 2)));
        // Tally's own unchanged write keeps it verified; a changed one does not.
        known.note(0, b"b", meta(1, 2), MetaOrigin::Written);
        assert_eq!(known.verified(0, b"b"), Some(meta(1, 2)));
        known.note(0, b"b", meta(1, 3), MetaOrigin::Written);
        assert_eq!(known.verified(0, b"b"), None);
        assert_eq!(known.get(0, b"b"), Some(meta(1, 3)));
        assert_eq!(known.mismatches(), 0);
    }

    #[test]
    fn a_verified_meta_read_otherwise_is_a_mismatch() {
        let mut known = KnownMetas::default();
        known.note(0, b"b", meta(1, 2), MetaOrigin::Verified);
        known.note(0, b"b", meta(1, 2), MetaOrigin::Read);
        assert_eq!(known.mismatches(), 0);
        known.note(0, b"b", meta(5, 6), MetaOrigin::Read);
        assert_eq!(known.mismatches(), 1);
        assert_eq!(known.verified(0, b"b"), None);
        // Once unverified, a differing read is no mismatch: the meta was to be read again.
        known.note(0, b"b", meta(7, 8), MetaOrigin::Read);
        assert_eq!(known.mismatches(), 1);
        known.note(0, b"b", meta(7, 8), MetaOrigin::Verified);
        known.note_mismatch(0, b"b");
        assert_eq!(known.mismatches(), 2);
        assert_eq!(known.verified(0, b"b"), None);
    }

    #[test]
    fn an_event_on_the_meta_hash_drops_the_verification_only() {
        let mut known = KnownMetas::default();
        known.note(3, b"b", meta(1, 2), MetaOrigin::Verified);
        known.unverify(3, b"b");
        known.unverify(4, b"b");
        assert_eq!(known.verified(3, b"b"), None);
        assert_eq!(known.get(3, b"b"), Some(meta(1, 2)));
    }

    #[test]
    fn bytes_follow_entries_and_databases() {
        let mut known = KnownMetas::default();
        assert_eq!(known.bytes(), 0);
        known.note(0, b"a", meta(1, 2), MetaOrigin::Written);
        let one = known.bytes();
        assert!(one > 0);
        known.note(0, b"a", meta(1, 3), MetaOrigin::Written);
        assert_eq!(known.bytes(), one);
        known.note(1, b"b", meta(1, 2), MetaOrigin::Written);
        assert_eq!(known.bytes(), 2 * one);
        known.forget(0, b"a");
        known.forget(0, b"a");
        assert_eq!(known.bytes(), one);
        known.retain_dbs(|d| d != 1);
        assert_eq!(known.bytes(), 0);
        assert_eq!(known.get(1, b"b"), None);
    }

    #[test]
    fn swapdb_moves_boards_and_verifies_nothing() {
        let mut known = KnownMetas::default();
        known.note(0, b"a", meta(1, 2), MetaOrigin::Verified);
        known.note(1, b"b", meta(3, 4), MetaOrigin::Verified);
        known.swap_dbs(|d| 1 - d);
        assert_eq!(known.get(1, b"a"), Some(meta(1, 2)));
        assert_eq!(known.get(0, b"b"), Some(meta(3, 4)));
        assert_eq!(known.get(0, b"a"), None);
        assert_eq!(known.verified(1, b"a"), None);
        assert_eq!(known.verified(0, b"b"), None);
    }
}
