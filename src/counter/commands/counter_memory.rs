//! What the counter commands keep in memory between commands, as one value:
//! [`CounterMemory`], reached through [`memory`] and measured by [`CounterMemory::bytes`]
//! (which the family's entry, the read caches' byte budget and `INFO tally` read).
//!
//! Why one value: everything here is a cache of what the hashes hold, dropped or rebuilt
//! at will; seeing it in one place tells what tally keeps in memory for counters, and
//! what must be forgotten when keys go. Scratch buffers are not here: each lives beside
//! the code that uses it (`load_save`'s state text, `hash_slots`' slot field names).
//!
//! Owns: the counters' in-memory state. May not touch: keys.

use std::cell::{Cell, RefCell, RefMut};
use std::os::raw::c_int;

use crate::counter::model::mirrors::Mirrors;
use crate::counter::model::{Counter, RecentWrites, Resolution, Track, STATE_FIELD};
use crate::host::store::RStr;
use crate::layout::MARKER_FIELD;

/// The counter family's in-memory state. Each part has its own cell: a command holds the
/// mirrors while it runs, and a keyspace event can arrive while they are held (opening
/// a key may expire it).
pub struct CounterMemory {
    /// The read mirrors (see `crate::counter::model::mirrors`): the only part that grows with
    /// the keys, bounded by the byte budget and counted by [`CounterMemory::bytes`].
    mirrors: RefCell<Mirrors>,
    /// Set when an invalidation found the mirrors in use: every mirror goes at their next
    /// use rather than risk a stale one.
    clear_pending: Cell<bool>,
    /// Writes to keys without a mirror, to tell a hot key (a bounded number of keys).
    recent_writes: RefCell<RecentWrites>,
    /// The `_tally` and `_state` field names as module strings: every command reads both.
    field_names: Option<(RStr, RStr)>,
    /// The last marker parsed and its resolutions: most deployments use one or two
    /// resolution sets, and parsing them on every write is measurable.
    last_marker: RefCell<(Vec<u8>, Vec<Resolution>)>,
    /// The last `_state` parsed and the counter it made: a hot counter's state changes
    /// only when a slot comes or goes.
    last_state: RefCell<(Vec<u8>, Option<Counter>)>,
    /// Slot fields looked up in counters' hashes, one lookup each read, write or delete (a
    /// mirror spares the reads): the work the counter commands do in the hashes, in `INFO
    /// tally`.
    hash_lookups: Cell<u64>,
}

thread_local! {
    // Commands, timers and keyspace events all run on the server's main thread. Made once
    // and kept for the life of the process, so a command can hold a part of it (the
    // mirrors) from its start to its reply without a closure around its body.
    static MEMORY: &'static CounterMemory = Box::leak(Box::new(CounterMemory::new()));
}

/// The one access point to the counter family's in-memory state.
pub fn memory() -> &'static CounterMemory {
    MEMORY.with(|memory| *memory)
}

impl CounterMemory {
    fn new() -> CounterMemory {
        CounterMemory {
            mirrors: RefCell::default(),
            clear_pending: Cell::new(false),
            recent_writes: RefCell::default(),
            field_names: RStr::new(MARKER_FIELD.as_bytes()).zip(RStr::new(STATE_FIELD.as_bytes())),
            last_marker: RefCell::new((Vec::new(), Vec::new())),
            last_state: RefCell::new((Vec::new(), None)),
            hash_lookups: Cell::new(0),
        }
    }

    /// Estimated bytes held for keys: the mirrors. The other parts are a few fixed-size
    /// buffers and at most a few thousand write counts (tens of KB whatever the keys), not
    /// caches of any key, so nothing is left of a key once it goes.
    pub fn bytes(&self) -> usize {
        self.mirrors.try_borrow().map_or(0, |m| m.bytes())
    }

    /// Slots held by the mirrors (`INFO tally`).
    pub fn mirrored_slots(&self) -> usize {
        self.mirrors.try_borrow().map_or(0, |m| m.slots())
    }

    /// Slot fields looked up in hashes so far (`INFO tally`).
    pub fn hash_lookups(&self) -> u64 {
        self.hash_lookups.get()
    }

    /// Counts `n` more slot field lookups.
    pub fn count_lookups(&self, n: u64) {
        self.hash_lookups
            .set(self.hash_lookups.get().wrapping_add(n));
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

    /// The mirrors, held by one command until it drops them; `None` while another holds
    /// them. Invalidations that came while they were held take effect here.
    pub fn mirrors(&'static self) -> Option<RefMut<'static, Mirrors>> {
        let mut mirrors = self.mirrors.try_borrow_mut().ok()?;
        if self.clear_pending.replace(false) {
            *mirrors = Mirrors::default();
        }
        Some(mirrors)
    }

    /// Counts a write to `name` in `db` (a key without a mirror); true when the key is written
    /// often enough to be worth one.
    pub fn is_hot(&self, db: c_int, name: &[u8]) -> bool {
        self.recent_writes
            .try_borrow_mut()
            .is_ok_and(|mut recent| recent.count(db, name))
    }

    /// The `_tally` and `_state` field names as module strings.
    pub fn field_names(&self) -> Option<&(RStr, RStr)> {
        self.field_names.as_ref()
    }

    /// The resolutions of a marker, remembering the last marker parsed.
    pub fn parse_marker(&self, marker: &[u8]) -> Option<Vec<Resolution>> {
        let mut last = self.last_marker.try_borrow_mut().ok()?;
        if last.0 != marker || last.1.is_empty() {
            *last = (marker.to_vec(), Counter::parse_marker(marker)?);
        }
        Some(last.1.clone())
    }

    /// The reference time and tracks of a `_state` ([`Counter::parse_state`]), remembering
    /// the last state text parsed (in buffers reused from one call to the next: most writes
    /// go to counters not seen just before).
    pub fn parse_state(
        &self,
        resolutions: &[Resolution],
        state: &[u8],
    ) -> Option<(i64, Vec<Track>)> {
        let Ok(mut last) = self.last_state.try_borrow_mut() else {
            return Counter::parse_state(resolutions, state);
        };
        let (text, kept) = &mut *last;
        if let (true, Some(counter)) = (text.as_slice() == state, kept.as_ref()) {
            if counter.resolutions == resolutions {
                return Some((counter.reference, counter.tracks.clone()));
            }
        }
        let (reference, tracks) = Counter::parse_state(resolutions, state)?;
        text.clear();
        text.extend_from_slice(state);
        let counter = kept.get_or_insert_with(|| Counter::new(Vec::new()));
        counter.resolutions.clear();
        counter.resolutions.extend_from_slice(resolutions);
        counter.tracks.clone_from(&tracks);
        counter.reference = reference;
        Some((reference, tracks))
    }
}
