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

use super::hash_slots::SlotName;
use super::mirror::Mirrors;
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
    /// Slot field names made by the last command (an increment touches one per
    /// resolution, and the next increment at the same time uses the same names).
    pub(super) slot_names: Cell<Vec<SlotName>>,
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
            slot_names: Cell::new(Vec::new()),
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
}
