//! What the counter commands keep in memory between commands, as one value: [`Caches`],
//! reached through [`caches`] and measured by [`Caches::bytes`] (which the family's entry,
//! the read caches' byte budget and `INFO tally` read).
//!
//! Why one value: everything here is a cache of what the hashes hold, dropped or rebuilt
//! at will; seeing it in one place tells what tally keeps in memory for counters, and
//! what must be forgotten when keys go.
//!
//! Owns: the counters' in-memory state. May not touch: keys.

use std::cell::{Cell, RefCell};
use std::os::raw::c_int;

use super::mirror::{Build, Mirror, Mirrors};
use crate::counter::{Counter, RecentWrites, Resolution, STATE_FIELD};
use crate::layout::MARKER_FIELD;
use crate::store::RStr;

/// The counter family's in-memory state. Each part has its own cell: a command borrows
/// the mirrors while it asks for field names, and a keyspace event can arrive while the
/// mirrors are in use (opening a key may expire it).
pub struct Caches {
    /// The read mirrors (see `mirror`): the only part that grows with the keys, bounded
    /// by the byte budget and counted by [`Caches::bytes`].
    pub(super) mirrors: RefCell<Mirrors>,
    /// Set when an invalidation found the mirrors in use: every mirror goes at their next
    /// use rather than risk a stale one.
    pub(super) clear_pending: Cell<bool>,
    /// Writes to keys without a mirror, to tell a hot key (a bounded number of keys).
    pub(super) recent_writes: RefCell<RecentWrites>,
    /// The `_tally` and `_state` field names as module strings: every command reads both.
    pub(super) field_names: Option<(RStr, RStr)>,
    /// The last marker parsed and its resolutions: most deployments use one or two
    /// resolution sets, and parsing them on every write is measurable.
    pub(super) last_marker: RefCell<(Vec<u8>, Vec<Resolution>)>,
    /// The last `_state` parsed and the counter it made: a hot counter's state changes
    /// only when a slot comes or goes.
    pub(super) last_state: RefCell<(Vec<u8>, Option<Counter>)>,
    /// The text of a `_state` being written, reused from one write to the next.
    pub(super) state_text: RefCell<Vec<u8>>,
    /// Slot fields looked up in counters' hashes, one lookup each read, write or delete (a
    /// mirror spares the reads): the work the counter commands do in the hashes, in `INFO
    /// tally`.
    pub(super) hash_lookups: Cell<u64>,
}

thread_local! {
    // Commands, timers and keyspace events all run on the server's main thread.
    static CACHES: Caches = Caches::new();
}

/// The one access point to the counter family's in-memory state.
pub fn caches<T>(f: impl FnOnce(&Caches) -> T) -> T {
    CACHES.with(f)
}

impl Caches {
    fn new() -> Caches {
        Caches {
            mirrors: RefCell::default(),
            clear_pending: Cell::new(false),
            recent_writes: RefCell::default(),
            field_names: RStr::new(MARKER_FIELD.as_bytes()).zip(RStr::new(STATE_FIELD.as_bytes())),
            last_marker: RefCell::new((Vec::new(), Vec::new())),
            last_state: RefCell::new((Vec::new(), None)),
            state_text: RefCell::new(Vec::new()),
            hash_lookups: Cell::new(0),
        }
    }

    /// Estimated bytes held for keys: the mirrors. The other parts are a few fixed-size
    /// buffers and at most a few thousand write counts (tens of KB whatever the keys), not
    /// caches of any key, so nothing is left of a key once it goes.
    pub fn bytes(&self) -> usize {
        self.mirrors.try_borrow().map_or(0, |m| m.bytes)
    }

    /// Slots held by the mirrors (`INFO tally`).
    pub fn mirrored_slots(&self) -> usize {
        self.mirrors.try_borrow().map_or(0, |m| m.slots)
    }

    /// Drops what is kept of one key (a keyspace event, or tally deleted it).
    pub fn forget(&self, db: c_int, name: &[u8]) {
        match self.mirrors.try_borrow_mut() {
            Ok(mut mirrors) => mirrors.forget(db, name),
            Err(_) => self.clear_pending.set(true),
        }
    }

    /// Drops what is kept of every key (flush, SWAPDB, loading).
    pub fn forget_all(&self) {
        match self.mirrors.try_borrow_mut() {
            Ok(mut mirrors) => *mirrors = Mirrors::default(),
            Err(_) => self.clear_pending.set(true),
        }
    }

    /// Runs `f` with the mirror of `name` in `db` if there is a valid one. A missing or stale
    /// mirror is rebuilt from `load` (every stored slot; false: not to be mirrored) first when
    /// `build` says so. `fields` is the hash's current field count.
    pub fn with_mirror<T>(
        &self,
        (db, name, fields): (c_int, &[u8], usize),
        build: Build,
        load: &mut dyn FnMut(&mut Mirror) -> bool,
        f: impl FnOnce(Option<&mut Mirror>) -> T,
    ) -> T {
        let Ok(mut mirrors) = self.mirrors.try_borrow_mut() else {
            return f(None);
        };
        if self.clear_pending.replace(false) {
            *mirrors = Mirrors::default();
        }
        let wanted = || match build {
            Build::Always => true,
            Build::IfHot => self.is_hot(db, name),
            Build::Never => false,
        };
        mirrors.with_mirror((db, name, fields), wanted, load, f)
    }

    /// Runs `f` with the mirror of `name` in `db` if there is one valid for a hash of `fields`
    /// fields (`None` otherwise: nothing is built). For reads: `f` must not change the slots.
    pub fn with_valid_mirror<T>(
        &self,
        db: c_int,
        name: &[u8],
        fields: usize,
        f: impl FnOnce(&mut Mirror) -> T,
    ) -> Option<T> {
        let mut mirrors = self.mirrors.try_borrow_mut().ok()?;
        if self.clear_pending.get() {
            return None;
        }
        Some(f(mirrors.valid(db, name, fields)?))
    }

    /// Counts a write to `name` in `db` (a key without a mirror); true when the key is written
    /// often enough to be worth one.
    fn is_hot(&self, db: c_int, name: &[u8]) -> bool {
        self.recent_writes
            .try_borrow_mut()
            .is_ok_and(|mut recent| recent.count(db, name))
    }

    /// A copy of the parsed counter kept with the mirror of `name` in `db`, if the mirror is
    /// valid for a hash of `fields` fields.
    pub fn cached_counter(&self, db: c_int, name: &[u8], fields: usize) -> Option<Counter> {
        self.with_valid_mirror(db, name, fields, |mirror| mirror.counter.clone())
            .flatten()
    }
}
