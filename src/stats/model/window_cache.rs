//! Read cache of STATS windows, as a plain value (the family owns the one instance: see
//! `commands::stats::stats_memory`). Per key and per window read lately (its period range
//! `lo..=hi`, the current period last): the summary STATS.GET answers, the merge of the
//! whole window STATS.MGET and STATS.MQUANTILE merge across keys, and the merge of the
//! window's closed periods `lo..hi`, which a write to the current period leaves as it is. A read of a 24-period window then decodes one period instead of 24, and a
//! repeated GET formats a summary it already has.
//!
//! Correctness rests on dropping what a change makes wrong, every time the hash changes:
//! * a native command on the key fires a keyspace event: the family hook calls
//!   [`WindowCache::forget`] (HSET/HDEL/DEL, RENAME, MOVE, RESTORE, expiry, eviction; on a
//!   replica the effects of tally's own writes arrive as native HSET/HDEL/DEL too);
//! * tally's own writes fire `stats.*` events, which the hooks do not see: STATS.ADD
//!   calls [`WindowCache::wrote`] and the expiry visit calls [`WindowCache::forget`] when
//!   it deletes anything;
//! * flushes, SWAPDB and loading drop everything.
//!
//! The entries are keyed by the object's settings too, so a read under other settings
//! (a changed marker) misses. Memory is bounded by an estimate of the bytes held: each
//! store comes with the bytes the cache may hold ([`Admit`]), and entries are evicted in
//! turn until the cache fits. A key not cached yet is admitted only if the caller says so
//! (a hash with field TTLs is never cached: its expired fields count in its length).
//!
//! Owns: the cache's entries and their accounting. May not touch: Redis (pure; the
//! commands read the keys), global state.

use std::os::raw::c_int;
use std::rc::Rc;

use super::{Record, Settings, ShownSummary};
use crate::collections::memo_map::DbMaps;
use crate::moments::Moments;
use crate::sketch::Sketch;

/// Windows kept per key (a client reads a few window sizes); the oldest goes first.
const WINDOWS_PER_KEY: usize = 4;

/// What a store may do: the bytes the whole cache may hold after it, and whether a key
/// not cached yet may be (see [`holds`]: callers ask what that costs only for such a key).
#[derive(Clone, Copy)]
pub struct Admit {
    pub limit: usize,
    pub new_key: bool,
}
/// Estimated fixed cost of a key's entry and of one window, besides the name and sketch.
const ENTRY_OVERHEAD: usize = 96;
const WINDOW_OVERHEAD: usize = 160;
/// Estimated bytes of a kept summary with its eight texts.
const SUMMARY_BYTES: usize = 8 * 48 + 240;

/// A merged window as the cache keeps it: its moments, and its sketch in the encoding a
/// period's field holds (2 to 3 bytes a bucket, against 16 in a decoded sketch). Why:
/// `STATS.MGET` of 1000 objects of 24 hourly periods holds two merges per key, which
/// decoded (~350 buckets each for latencies of 1 to 10,000) took some 11 MB, more than
/// the default budget of 4 MB: every call then merged every period again (17 to 28 ms).
/// Encoded they take about a sixth, and a read decodes (or merges) one sketch per key.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PackedRecord {
    pub moments: Moments,
    pub sketch: Vec<u8>,
}

impl PackedRecord {
    pub fn pack(record: &Record) -> PackedRecord {
        PackedRecord {
            moments: record.moments.clone(),
            sketch: record.sketch.encode(),
        }
    }

    /// The record packed (its sketch was encoded by [`PackedRecord::pack`], so it decodes;
    /// an empty sketch otherwise, never expected).
    pub fn unpack(&self) -> Record {
        Record {
            moments: self.moments.clone(),
            sketch: Sketch::decode(&self.sketch).unwrap_or_default(),
        }
    }

    /// Number of values merged.
    pub fn count(&self) -> u64 {
        self.moments.count
    }
}

/// One window of one key.
struct Window {
    lo: i64,
    hi: i64,
    /// Merge of the closed periods `lo..hi` (`None`: not known).
    closed: Option<Rc<PackedRecord>>,
    /// What GET answers for `lo..=hi` (`None`: not known; `Some(None)`: empty).
    summary: Option<Option<Rc<ShownSummary>>>,
    /// Merge of every period `lo..=hi` (`None`: not known), for the reads across keys.
    merged: Option<Rc<PackedRecord>>,
}

/// Which merge of a window's periods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Span {
    /// The closed periods `lo..hi`, which a write to the current period leaves as they are.
    Closed,
    /// Every period `lo..=hi`, which the reads across keys merge.
    Whole,
}

impl Window {
    fn merge(&self, span: Span) -> &Option<Rc<PackedRecord>> {
        match span {
            Span::Closed => &self.closed,
            Span::Whole => &self.merged,
        }
    }

    fn merge_mut(&mut self, span: Span) -> &mut Option<Rc<PackedRecord>> {
        match span {
            Span::Closed => &mut self.closed,
            Span::Whole => &mut self.merged,
        }
    }

    fn weight(&self) -> usize {
        WINDOW_OVERHEAD
            + self.summary.as_ref().map_or(0, |_| SUMMARY_BYTES)
            + [&self.closed, &self.merged]
                .into_iter()
                .flatten()
                .map(|r| r.sketch.len().saturating_add(48))
                .sum::<usize>()
    }
}

struct Entry {
    settings: Settings,
    windows: Vec<Window>,
}

impl Entry {
    fn weight(&self, name: &[u8]) -> usize {
        ENTRY_OVERHEAD + name.len() + self.windows.iter().map(Window::weight).sum::<usize>()
    }
}

/// The read cache of every key's windows (see the module comment).
#[derive(Default)]
pub struct WindowCache {
    /// Per database, each remembering the key found last (a key read again and again is
    /// found without hashing its name).
    by_db: DbMaps<Entry>,
    /// Sum of the entries' weights.
    bytes: usize,
    /// Where eviction takes its next entry (see `DbMaps::evict_next`).
    hand: usize,
}

impl WindowCache {
    fn find(
        &mut self,
        db: c_int,
        name: &[u8],
        settings: &Settings,
        lo: i64,
        hi: i64,
    ) -> Option<&Window> {
        let entry = self.by_db.db(db)?.get_mut(name)?;
        if entry.settings != *settings {
            return None;
        }
        entry.windows.iter().find(|w| w.lo == lo && w.hi == hi)
    }

    /// The cached summary of window `lo..=hi` of `name` (`Some(None)`: the window is empty).
    pub fn summary(
        &mut self,
        db: c_int,
        name: &[u8],
        settings: &Settings,
        lo: i64,
        hi: i64,
    ) -> Option<Option<Rc<ShownSummary>>> {
        self.find(db, name, settings, lo, hi)?.summary.clone()
    }

    /// The cached merge `span` of window `lo..=hi` of `name`.
    pub fn merge(
        &mut self,
        db: c_int,
        name: &[u8],
        settings: &Settings,
        (lo, hi): (i64, i64),
        span: Span,
    ) -> Option<Rc<PackedRecord>> {
        self.find(db, name, settings, lo, hi)?.merge(span).clone()
    }

    /// Stores the merge `span` of window `lo..=hi` of `name`.
    #[allow(clippy::too_many_arguments)]
    pub fn store_merge(
        &mut self,
        db: c_int,
        name: &[u8],
        settings: Settings,
        (lo, hi): (i64, i64),
        span: Span,
        merge: Rc<PackedRecord>,
        admit: Admit,
    ) {
        self.store(db, name, settings, lo, hi, admit, |w| {
            *w.merge_mut(span) = Some(merge)
        });
    }

    /// Stores the summary of window `lo..=hi` of `name`.
    #[allow(clippy::too_many_arguments)]
    pub fn store_summary(
        &mut self,
        db: c_int,
        name: &[u8],
        settings: Settings,
        lo: i64,
        hi: i64,
        summary: Option<Rc<ShownSummary>>,
        admit: Admit,
    ) {
        self.store(db, name, settings, lo, hi, admit, |w| {
            w.summary = Some(summary)
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn store(
        &mut self,
        db: c_int,
        name: &[u8],
        settings: Settings,
        lo: i64,
        hi: i64,
        admit: Admit,
        set: impl FnOnce(&mut Window),
    ) {
        let keys = self.by_db.db_or_new(db);
        let before = keys.get_mut(name).map_or(0, |e| e.weight(name));
        let cached = keys.remove(name);
        self.bytes = self.bytes.saturating_sub(before);
        if cached.is_none() && !admit.new_key {
            return;
        }
        let mut entry = cached.unwrap_or(Entry {
            settings,
            windows: Vec::new(),
        });
        if entry.settings != settings {
            entry = Entry {
                settings,
                windows: Vec::new(),
            };
        }
        let window = match entry.windows.iter().position(|w| w.lo == lo && w.hi == hi) {
            Some(p) => p,
            None => {
                // Windows ending before this one are from an earlier time: their
                // current period has closed since, and they will not be read again.
                entry.windows.retain(|w| w.hi >= hi);
                if entry.windows.len() >= WINDOWS_PER_KEY {
                    entry.windows.remove(0);
                }
                entry.windows.push(Window {
                    lo,
                    hi,
                    closed: None,
                    summary: None,
                    merged: None,
                });
                entry.windows.len() - 1
            }
        };
        if let Some(w) = entry.windows.get_mut(window) {
            set(w);
        }
        let after = entry.weight(name);
        let Some(room) = admit.limit.checked_sub(after) else {
            return;
        };
        self.shrink_to(room);
        self.bytes += after;
        self.by_db.db_or_new(db).insert(name, entry);
    }

    /// Evicts entries in turn until at most `limit` bytes are held.
    pub fn shrink_to(&mut self, limit: usize) {
        while self.bytes > limit {
            let Some((name, old)) = self.by_db.evict_next(&mut self.hand) else {
                self.bytes = 0;
                return;
            };
            self.bytes = self.bytes.saturating_sub(old.weight(&name));
        }
    }

    /// True if `name` in `db` has an entry.
    pub fn holds(&mut self, db: c_int, name: &[u8]) -> bool {
        self.by_db
            .db(db)
            .is_some_and(|keys| keys.get_mut(name).is_some())
    }

    /// Estimated bytes the cache holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// tally wrote period `index` of `name`: every summary and whole merge of the key may
    /// be wrong now, and the closed merges that include `index`.
    pub fn wrote(&mut self, db: c_int, name: &[u8], index: i64) {
        let Some(entry) = self.by_db.db(db).and_then(|keys| keys.get_mut(name)) else {
            return;
        };
        let before = entry.weight(name);
        for w in &mut entry.windows {
            w.summary = None;
            w.merged = None;
            if (w.lo..w.hi).contains(&index) {
                w.closed = None;
            }
        }
        let after = entry.weight(name);
        self.bytes = self.bytes.saturating_sub(before).saturating_add(after);
    }

    /// `name` in `db` changed (or went) in a way the cache does not follow: drop its entry.
    pub fn forget(&mut self, db: c_int, name: &[u8]) {
        if let Some(entry) = self.by_db.db(db).and_then(|keys| keys.remove(name)) {
            self.bytes = self.bytes.saturating_sub(entry.weight(name));
        }
    }

    /// Number of keys cached and the estimated bytes held.
    #[cfg(test)]
    fn size(&self) -> (usize, usize) {
        (self.by_db.entries(), self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary_of(n: u64) -> Rc<ShownSummary> {
        let mut r = Record::default();
        for i in 0..n {
            r.add(i as f64 + 1.0);
        }
        Rc::new(ShownSummary::new(
            &r.summary().unwrap_or_else(|| unreachable!()),
        ))
    }

    const S: Settings = Settings {
        period: 1000,
        keep: 24,
    };

    const BUDGET_BYTES: usize = 32 << 20;
    const A: Admit = Admit {
        limit: BUDGET_BYTES,
        new_key: true,
    };

    #[test]
    fn stores_and_invalidates() {
        let mut c = WindowCache::default();
        assert_eq!(c.summary(0, b"k", &S, 1, 3), None);
        c.store_summary(0, b"k", S, 1, 3, Some(summary_of(3)), A);
        let empty = || Rc::new(PackedRecord::pack(&Record::default()));
        c.store_merge(0, b"k", S, (1, 3), Span::Closed, empty(), A);
        assert_eq!(c.summary(0, b"k", &S, 1, 3), Some(Some(summary_of(3))));
        // Other db, other window, other settings: misses.
        assert_eq!(c.summary(1, b"k", &S, 1, 3), None);
        assert_eq!(c.summary(0, b"k", &S, 2, 3), None);
        let other = Settings {
            period: 1000,
            keep: 25,
        };
        assert_eq!(c.summary(0, b"k", &other, 1, 3), None);
        c.store_merge(0, b"k", S, (1, 3), Span::Whole, empty(), A);
        assert!(c.merge(0, b"k", &S, (1, 3), Span::Whole).is_some());
        assert!(c.merge(0, b"k", &S, (2, 3), Span::Whole).is_none());
        // A write to the current period keeps the closed merge only.
        c.wrote(0, b"k", 3);
        assert_eq!(c.summary(0, b"k", &S, 1, 3), None);
        assert!(c.merge(0, b"k", &S, (1, 3), Span::Whole).is_none());
        assert!(c.merge(0, b"k", &S, (1, 3), Span::Closed).is_some());
        // A write to a closed period drops it too.
        c.wrote(0, b"k", 1);
        assert!(c.merge(0, b"k", &S, (1, 3), Span::Closed).is_none());
        c.store_summary(0, b"k", S, 1, 3, None, A);
        assert_eq!(c.summary(0, b"k", &S, 1, 3), Some(None));
        c.forget(0, b"k");
        assert_eq!(c.summary(0, b"k", &S, 1, 3), None);
        assert_eq!(c.size(), (0, 0));
        c.store_summary(2, b"k", S, 1, 3, None, A);
        c = WindowCache::default();
        assert_eq!(c.summary(2, b"k", &S, 1, 3), None);
    }

    #[test]
    fn keeps_few_windows_per_key_and_drops_earlier_ones() {
        let mut c = WindowCache::default();
        for lo in 0..6 {
            c.store_summary(0, b"k", S, lo, 10, None, A);
        }
        assert_eq!(c.summary(0, b"k", &S, 0, 10), None);
        assert_eq!(c.summary(0, b"k", &S, 5, 10), Some(None));
        assert_eq!(c.summary(0, b"k", &S, 2, 10), Some(None));
        // Time moved on: the windows ending at 10 go.
        c.store_summary(0, b"k", S, 11, 11, None, A);
        assert_eq!(c.summary(0, b"k", &S, 5, 10), None);
        assert_eq!(c.summary(0, b"k", &S, 11, 11), Some(None));
    }

    #[test]
    fn stays_within_its_budget() {
        let mut c = WindowCache::default();
        let name = vec![b'x'; 1 << 20];
        for db in 0..64 {
            c.store_summary(db, &name, S, 0, 0, None, A);
            assert!(c.size().1 <= BUDGET_BYTES);
        }
        assert!(c.size().0 < 64);
        // An entry larger than the whole budget is not kept.
        let huge = vec![b'y'; BUDGET_BYTES + 1];
        c.store_summary(0, &huge, S, 0, 0, None, A);
        assert_eq!(c.summary(0, &huge, &S, 0, 0), None);
        assert!(c.size().1 <= BUDGET_BYTES);
    }

    /// A small budget keeps the newest keys and evicts older ones in turn; a key the
    /// caller does not admit is not stored, but an entry already there still is updated.
    #[test]
    fn evicts_in_turn_and_admits_new_keys_only_when_told() {
        let mut c = WindowCache::default();
        let small = Admit {
            limit: 20 * (ENTRY_OVERHEAD + WINDOW_OVERHEAD + SUMMARY_BYTES + 8),
            new_key: true,
        };
        for i in 0..1000 {
            c.store_summary(0, format!("k{i:04}").as_bytes(), S, 0, 0, None, small);
            assert!(c.size().1 <= small.limit, "{i}");
        }
        let (keys, bytes) = c.size();
        assert!((10..=20).contains(&keys), "{keys} keys in {bytes} bytes");
        assert_eq!(c.summary(0, b"k0999", &S, 0, 0), Some(None));
        assert_eq!(c.summary(0, b"k0000", &S, 0, 0), None);
        let refused = Admit {
            new_key: false,
            ..small
        };
        c.store_summary(0, b"new", S, 0, 0, None, refused);
        assert_eq!(c.summary(0, b"new", &S, 0, 0), None);
        assert!(c.holds(0, b"k0999"));
        c.store_summary(0, b"k0999", S, 0, 0, Some(summary_of(2)), refused);
        assert_eq!(c.summary(0, b"k0999", &S, 0, 0), Some(Some(summary_of(2))));
        c.shrink_to(0);
        assert_eq!(c.size(), (0, 0));
    }
}
