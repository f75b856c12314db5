//! Read cache of STATS windows. Per key and per window read lately (its period range
//! `lo..=hi`, the current period last): the summary STATS.GET answers, and the merge of
//! the window's closed periods `lo..hi`, which a write to the current period leaves as
//! it is. A read of a 24-period window then decodes one period instead of 24, and a
//! repeated GET formats a summary it already has.
//!
//! Correctness rests on dropping what a change makes wrong, every time the hash changes:
//! * a native command on the key fires a keyspace event: the family hook calls [`forget`]
//!   (HSET/HDEL/DEL, RENAME, MOVE, RESTORE, expiry, eviction; on a replica the effects of
//!   tally's own writes arrive as native HSET/HDEL/DEL too);
//! * tally's own writes fire `stats.*` events, which the hooks do not see: STATS.ADD
//!   calls [`wrote`] and the expiry visit calls [`forget`] when it deletes anything;
//! * flushes, SWAPDB and loading call [`forget_all`].
//!
//! The entries are keyed by the object's settings too, so a read under other settings
//! (a changed marker) misses. Memory is bounded by an estimate of the bytes held: each
//! store comes with the bytes the cache may hold ([`Admit`]), and entries are evicted in
//! turn until the cache fits. A key not cached yet is admitted only if the caller says so
//! (a hash with field TTLs is never cached: its expired fields count in its length).
//!
//! Owns: the cache. May not touch: Redis (pure; the commands read the keys).

use std::cell::{Cell, RefCell};
use std::os::raw::c_int;
use std::rc::Rc;

use super::{Record, Settings, ShownSummary};
use crate::memo_map::DbMaps;

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

/// One window of one key.
struct Window {
    lo: i64,
    hi: i64,
    /// Merge of the closed periods `lo..hi` (`None`: not known).
    closed: Option<Rc<Record>>,
    /// What GET answers for `lo..=hi` (`None`: not known; `Some(None)`: empty).
    summary: Option<Option<Rc<ShownSummary>>>,
}

impl Window {
    fn weight(&self) -> usize {
        WINDOW_OVERHEAD
            + self.summary.as_ref().map_or(0, |_| SUMMARY_BYTES)
            + self
                .closed
                .as_ref()
                .map_or(0, |r| r.sketch.bucket_count().saturating_mul(16))
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

#[derive(Default)]
struct Cache {
    /// Per database, each remembering the key found last (a key read again and again is
    /// found without hashing its name).
    by_db: DbMaps<Entry>,
    /// Sum of the entries' weights.
    bytes: usize,
    /// Where eviction takes its next entry (see `DbMaps::evict_next`).
    hand: usize,
}

thread_local! {
    // Commands, timers and keyspace events all run on Redis's main thread.
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
    // Set when an invalidation could not take the cache (it was in use): everything is
    // dropped at the next use rather than risk a stale answer.
    static CLEAR_PENDING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` on the cache; `None` if it is in use (never expected: no function here
/// calls out while holding it).
fn with_cache<T>(f: impl FnOnce(&mut Cache) -> T) -> Option<T> {
    CACHE.with(|cell| {
        let mut cache = cell.try_borrow_mut().ok()?;
        if CLEAR_PENDING.with(|c| c.replace(false)) {
            *cache = Cache::default();
        }
        Some(f(&mut cache))
    })
}

/// Runs an invalidation; if the cache cannot be taken, it is cleared at its next use.
fn invalidate(f: impl FnOnce(&mut Cache)) {
    if with_cache(f).is_none() {
        CLEAR_PENDING.with(|c| c.set(true));
    }
}

fn find<'a>(
    cache: &'a mut Cache,
    db: c_int,
    name: &[u8],
    settings: &Settings,
    lo: i64,
    hi: i64,
) -> Option<&'a Window> {
    let entry = cache.by_db.db(db)?.get_mut(name)?;
    if entry.settings != *settings {
        return None;
    }
    entry.windows.iter().find(|w| w.lo == lo && w.hi == hi)
}

/// The cached summary of window `lo..=hi` of `name` (`Some(None)`: the window is empty).
pub fn summary(
    db: c_int,
    name: &[u8],
    settings: &Settings,
    lo: i64,
    hi: i64,
) -> Option<Option<Rc<ShownSummary>>> {
    with_cache(|cache| find(cache, db, name, settings, lo, hi)?.summary.clone()).flatten()
}

/// The cached merge of the closed periods `lo..hi` of window `lo..=hi` of `name`.
pub fn closed(db: c_int, name: &[u8], settings: &Settings, lo: i64, hi: i64) -> Option<Rc<Record>> {
    with_cache(|cache| find(cache, db, name, settings, lo, hi)?.closed.clone()).flatten()
}

/// Stores the summary of window `lo..=hi` of `name`.
pub fn store_summary(
    db: c_int,
    name: &[u8],
    settings: Settings,
    lo: i64,
    hi: i64,
    summary: Option<Rc<ShownSummary>>,
    admit: Admit,
) {
    store(db, name, settings, lo, hi, admit, |w| {
        w.summary = Some(summary)
    });
}

/// Stores the merge of the closed periods of window `lo..=hi` of `name`.
pub fn store_closed(
    db: c_int,
    name: &[u8],
    settings: Settings,
    lo: i64,
    hi: i64,
    closed: Rc<Record>,
    admit: Admit,
) {
    store(db, name, settings, lo, hi, admit, |w| {
        w.closed = Some(closed)
    });
}

fn store(
    db: c_int,
    name: &[u8],
    settings: Settings,
    lo: i64,
    hi: i64,
    admit: Admit,
    set: impl FnOnce(&mut Window),
) {
    with_cache(|cache| {
        let keys = cache.by_db.db_or_new(db);
        let before = keys.get_mut(name).map_or(0, |e| e.weight(name));
        let cached = keys.remove(name);
        cache.bytes = cache.bytes.saturating_sub(before);
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
        cache.evict_to(room);
        cache.bytes += after;
        cache.by_db.db_or_new(db).insert(name, entry);
    });
}

impl Cache {
    /// Evicts entries in turn until at most `limit` bytes are held.
    fn evict_to(&mut self, limit: usize) {
        while self.bytes > limit {
            let Some((name, old)) = self.by_db.evict_next(&mut self.hand) else {
                self.bytes = 0;
                return;
            };
            self.bytes = self.bytes.saturating_sub(old.weight(&name));
        }
    }
}

/// True if `name` in `db` has an entry.
pub fn holds(db: c_int, name: &[u8]) -> bool {
    with_cache(|cache| {
        cache
            .by_db
            .db(db)
            .is_some_and(|keys| keys.get_mut(name).is_some())
    })
    .unwrap_or(false)
}

/// Estimated bytes the cache holds.
pub fn bytes() -> usize {
    CACHE.with(|cell| cell.try_borrow().map_or(0, |cache| cache.bytes))
}

/// Evicts entries until the cache holds at most `limit` bytes.
pub fn shrink_to(limit: usize) {
    with_cache(|cache| cache.evict_to(limit));
}

/// tally wrote period `index` of `name`: every summary of the key may be wrong now, and
/// the closed merges that include `index`.
pub fn wrote(db: c_int, name: &[u8], index: i64) {
    invalidate(|cache| {
        let Some(entry) = cache.by_db.db(db).and_then(|keys| keys.get_mut(name)) else {
            return;
        };
        let before = entry.weight(name);
        for w in &mut entry.windows {
            w.summary = None;
            if (w.lo..w.hi).contains(&index) {
                w.closed = None;
            }
        }
        let after = entry.weight(name);
        cache.bytes = cache.bytes.saturating_sub(before).saturating_add(after);
    });
}

/// `name` in `db` changed (or went) in a way the cache does not follow: drop its entry.
pub fn forget(db: c_int, name: &[u8]) {
    invalidate(|cache| {
        if let Some(entry) = cache.by_db.db(db).and_then(|keys| keys.remove(name)) {
            cache.bytes = cache.bytes.saturating_sub(entry.weight(name));
        }
    });
}

/// The data changed behind the cache (flush, SWAPDB, loading): drop everything.
pub fn forget_all() {
    invalidate(|cache| *cache = Cache::default());
}

/// Number of keys cached and the estimated bytes held.
#[cfg(test)]
fn size() -> (usize, usize) {
    with_cache(|cache| (cache.by_db.entries(), cache.bytes)).unwrap_or((0, 0))
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
        forget_all();
        assert_eq!(summary(0, b"k", &S, 1, 3), None);
        store_summary(0, b"k", S, 1, 3, Some(summary_of(3)), A);
        store_closed(0, b"k", S, 1, 3, Rc::new(Record::default()), A);
        assert_eq!(summary(0, b"k", &S, 1, 3), Some(Some(summary_of(3))));
        // Other db, other window, other settings: misses.
        assert_eq!(summary(1, b"k", &S, 1, 3), None);
        assert_eq!(summary(0, b"k", &S, 2, 3), None);
        let other = Settings {
            period: 1000,
            keep: 25,
        };
        assert_eq!(summary(0, b"k", &other, 1, 3), None);
        // A write to the current period keeps the closed merge only.
        wrote(0, b"k", 3);
        assert_eq!(summary(0, b"k", &S, 1, 3), None);
        assert!(closed(0, b"k", &S, 1, 3).is_some());
        // A write to a closed period drops it too.
        wrote(0, b"k", 1);
        assert!(closed(0, b"k", &S, 1, 3).is_none());
        store_summary(0, b"k", S, 1, 3, None, A);
        assert_eq!(summary(0, b"k", &S, 1, 3), Some(None));
        forget(0, b"k");
        assert_eq!(summary(0, b"k", &S, 1, 3), None);
        assert_eq!(size(), (0, 0));
        store_summary(2, b"k", S, 1, 3, None, A);
        forget_all();
        assert_eq!(summary(2, b"k", &S, 1, 3), None);
    }

    #[test]
    fn keeps_few_windows_per_key_and_drops_earlier_ones() {
        forget_all();
        for lo in 0..6 {
            store_summary(0, b"k", S, lo, 10, None, A);
        }
        assert_eq!(summary(0, b"k", &S, 0, 10), None);
        assert_eq!(summary(0, b"k", &S, 5, 10), Some(None));
        assert_eq!(summary(0, b"k", &S, 2, 10), Some(None));
        // Time moved on: the windows ending at 10 go.
        store_summary(0, b"k", S, 11, 11, None, A);
        assert_eq!(summary(0, b"k", &S, 5, 10), None);
        assert_eq!(summary(0, b"k", &S, 11, 11), Some(None));
        forget_all();
    }

    #[test]
    fn stays_within_its_budget() {
        forget_all();
        let name = vec![b'x'; 1 << 20];
        for db in 0..64 {
            store_summary(db, &name, S, 0, 0, None, A);
            assert!(size().1 <= BUDGET_BYTES);
        }
        assert!(size().0 < 64);
        // An entry larger than the whole budget is not kept.
        let huge = vec![b'y'; BUDGET_BYTES + 1];
        store_summary(0, &huge, S, 0, 0, None, A);
        assert_eq!(summary(0, &huge, &S, 0, 0), None);
        assert!(size().1 <= BUDGET_BYTES);
        forget_all();
    }

    /// A small budget keeps the newest keys and evicts older ones in turn; a key the
    /// caller does not admit is not stored, but an entry already there still is updated.
    #[test]
    fn evicts_in_turn_and_admits_new_keys_only_when_told() {
        forget_all();
        let small = Admit {
            limit: 20 * (ENTRY_OVERHEAD + WINDOW_OVERHEAD + SUMMARY_BYTES + 8),
            new_key: true,
        };
        for i in 0..1000 {
            store_summary(0, format!("k{i:04}").as_bytes(), S, 0, 0, None, small);
            assert!(size().1 <= small.limit, "{i}");
        }
        let (keys, bytes) = size();
        assert!((10..=20).contains(&keys), "{keys} keys in {bytes} bytes");
        assert_eq!(summary(0, b"k0999", &S, 0, 0), Some(None));
        assert_eq!(summary(0, b"k0000", &S, 0, 0), None);
        let refused = Admit {
            new_key: false,
            ..small
        };
        store_summary(0, b"new", S, 0, 0, None, refused);
        assert_eq!(summary(0, b"new", &S, 0, 0), None);
        assert!(holds(0, b"k0999"));
        store_summary(0, b"k0999", S, 0, 0, Some(summary_of(2)), refused);
        assert_eq!(summary(0, b"k0999", &S, 0, 0), Some(Some(summary_of(2))));
        shrink_to(0);
        assert_eq!(size(), (0, 0));
        forget_all();
    }
}
