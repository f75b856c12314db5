//! Everything the STATS family keeps in memory, as one value: [`StatsMemory`], reached only
//! through [`memory`], as every family reaches its state. Its size is [`StatsMemory::bytes`], which the family entry reports to
//! the cache budget and `INFO tally`.
//!
//! Owns: the read cache of windows (`crate::stats::model::window_cache::WindowCache`), the `_tally`
//! field name as a module string, and the last marker parsed. May not touch: keys.

use std::cell::{Cell, RefCell};
use std::os::raw::c_int;

use crate::host::store::RStr;
use crate::layout::MARKER_FIELD;
use crate::stats::model::window_cache::WindowCache;
use crate::stats::model::Settings;

/// The family's in-memory state. Commands, timers and keyspace events all run on the
/// server's main thread, so one instance serves them all.
pub struct StatsMemory {
    /// `_tally` as a module string, made once (every ADD reads it).
    marker_name: Option<RStr>,
    /// The last marker parsed and its settings: most objects share theirs, so a write
    /// parses a marker only when it differs from the previous one.
    last_marker: RefCell<Option<(Vec<u8>, Settings)>>,
    /// The read cache of windows.
    windows: RefCell<WindowCache>,
    /// Set when an invalidation could not take the window cache (it was in use):
    /// everything is dropped at its next use rather than risk a stale answer.
    clear_pending: Cell<bool>,
    /// Reads of a key's window that the cache answered, and that merged periods from the
    /// hash instead (`INFO tally`: `stats_cache_hits`, `stats_cache_misses`): what tells
    /// a user, and the tests, that a repeated read is served from memory.
    hits: Cell<u64>,
    misses: Cell<u64>,
}

thread_local! {
    // Commands, timers and keyspace events all run on the server's main thread. Made once
    // and kept for the life of the process, as every family's state is.
    static MEMORY: &'static StatsMemory = Box::leak(Box::new(StatsMemory {
        marker_name: RStr::new(MARKER_FIELD.as_bytes()),
        last_marker: RefCell::new(None),
        windows: RefCell::new(WindowCache::default()),
        clear_pending: Cell::new(false),
        hits: Cell::new(0),
        misses: Cell::new(0),
    }));
}

/// The one access point to the family's state.
pub fn memory() -> &'static StatsMemory {
    MEMORY.with(|memory| *memory)
}

impl StatsMemory {
    /// `_tally` as a module string (`None` only if the server could not allocate it).
    pub fn marker_name(&self) -> Option<&RStr> {
        self.marker_name.as_ref()
    }

    /// Settings of a `_tally` value (see [`Settings::from_marker`]), remembering the last.
    pub fn settings_of_marker(&self, marker: &[u8]) -> Option<Settings> {
        let Ok(mut last) = self.last_marker.try_borrow_mut() else {
            return Settings::from_marker(marker);
        };
        if let Some((bytes, settings)) = last.as_ref() {
            if bytes.as_slice() == marker {
                return Some(*settings);
            }
        }
        let settings = Settings::from_marker(marker)?;
        *last = Some((marker.to_vec(), settings));
        Some(settings)
    }

    /// The settings of the last object whose marker was parsed, if any.
    pub fn last_settings(&self) -> Option<Settings> {
        self.last_marker
            .try_borrow()
            .ok()?
            .as_ref()
            .map(|(_, s)| *s)
    }

    /// Runs `f` on the window cache; `None` if it is in use (never expected: no function
    /// calls out to the server while holding it).
    pub fn windows<T>(&self, f: impl FnOnce(&mut WindowCache) -> T) -> Option<T> {
        let mut windows = self.windows.try_borrow_mut().ok()?;
        if self.clear_pending.replace(false) {
            *windows = WindowCache::default();
        }
        Some(f(&mut windows))
    }

    /// Counts a read of a key's window: answered by the cache (`hit`) or merged from the
    /// hash.
    pub fn count_read(&self, hit: bool) {
        let counter = if hit { &self.hits } else { &self.misses };
        counter.set(counter.get().saturating_add(1));
    }

    /// Reads answered by the cache and reads that merged from the hash, since start.
    pub fn reads(&self) -> (u64, u64) {
        (self.hits.get(), self.misses.get())
    }

    /// Runs an invalidation of the window cache; if the cache cannot be taken, it is
    /// cleared at its next use.
    fn invalidate(&self, f: impl FnOnce(&mut WindowCache)) {
        if self.windows(f).is_none() {
            self.clear_pending.set(true);
        }
    }

    /// tally wrote period `index` of `name` in `db`.
    pub fn wrote(&self, db: c_int, name: &[u8], index: i64) {
        self.invalidate(|w| w.wrote(db, name, index));
    }

    /// `name` in `db` changed (or went) in a way the cache does not follow.
    pub fn forget(&self, db: c_int, name: &[u8]) {
        self.invalidate(|w| w.forget(db, name));
    }

    /// The data changed behind the cache (flush, SWAPDB, loading): drop every window.
    pub fn forget_all(&self) {
        self.invalidate(|w| *w = WindowCache::default());
    }

    /// Estimated bytes held, counted against `tally.cache-max-memory`: the windows (the
    /// marker name and the last marker are a few dozen bytes, made once).
    pub fn bytes(&self) -> usize {
        self.windows.try_borrow().map_or(0, |w| w.bytes())
    }
}

/// [`StatsMemory::bytes`] of the family's state (the family entry's `cache_bytes`).
pub fn bytes() -> usize {
    memory().bytes()
}
