//! What the leaderboard family keeps in memory: the composition of each concern's own
//! state, kept in the pure layer with its unit tests:
//!
//! * [`KnownMetas`]: the last meta tally read or wrote of each board, and whether it is
//!   verified (so TSRANK.INCRBY may skip reading `base|meta`);
//! * [`Quarantine`]: boards edited by native commands, their rebuilds in steps and the
//!   totals the timer computes for their reads (`repair`);
//! * [`DrainScans`]: the saved scans of slots being expired (`visit`);
//! * [`NextTotals`]: the totals without a large oldest slot, ready before it leaves
//!   (`next`, `replica`);
//! * [`LifecycleMemory`]: the lifecycle jobs queued by keyspace events (`lifecycle`);
//! * [`Orders`]: the orders of the slots each board with `CAPACITY` wrote last, and the
//!   saved scans that fill them (`incrby`, `capacity`);
//! * [`Replica`]: on a replica, the boards to visit and what the command filter announced
//!   (`replica`).
//!
//! A caller borrows the part it needs ([`known`], [`quarantine`], [`drains`], [`nexts`],
//! [`lifecycle`], [`replica`]); what concerns a board or a database as a whole (it is
//! gone, flushed, swapped) goes through [`with`]. The other families reach their state
//! as a `&'static` value (`memory()`); this one lends it to a closure instead, because a
//! borrow of it must end before anything calls the server: a call can fire a keyspace
//! event, which comes back here.
//!
//! Owns: this memory. May not touch: keys, replication. Nothing here calls the server:
//! a call could fire a keyspace event, which comes back here while the state is borrowed.

use std::cell::RefCell;
use std::os::raw::c_int;

use crate::collections::due_queue::DueQueue;
use crate::host::store::scan::HashCursor;
use crate::rank::model::{
    Announcements, DrainScans, KnownMetas, LifecycleMemory, Meta, NextTotals, Orders, Quarantine,
};

pub(super) use crate::rank::model::{BoardId, MetaOrigin};

/// A quarantined board's totals computed by the timer, over native keys.
pub(super) type View = crate::rank::model::View<HashCursor>;
/// A slot's order, with the saved scan of its slot hash while the timer fills it.
pub(super) type HeldOrder = crate::rank::model::Held<HashCursor>;
/// Where a rebuild in steps stands, over native keys.
pub(super) type Rebuild = crate::rank::model::Rebuild<HashCursor>;
/// A board's totals without its oldest slot, over native keys.
pub(super) type Next = crate::rank::model::Next<HashCursor>;
/// How the timer fills a [`Next`], over native keys.
pub(super) type NextScan = crate::rank::model::NextScan<HashCursor>;

/// The leaderboard family's memory (see the module doc).
/// A replica's view of the primary's effects on boards.
#[derive(Default)]
pub(super) struct Replica {
    /// Boards to visit, by meta key name.
    pub watch: DueQueue,
    /// The armed replica timer: its generation and when it fires (a timer of an older
    /// generation does nothing when it fires).
    pub armed: Option<(u64, i64)>,
    pub generation: u64,
    /// What the command filter announced (see `replica`'s module doc).
    pub announced: Announcements,
}

#[derive(Default)]
pub(super) struct State {
    known: KnownMetas,
    quarantine: Quarantine<HashCursor>,
    drains: DrainScans<HashCursor>,
    nexts: NextTotals<HashCursor>,
    lifecycle: LifecycleMemory,
    orders: Orders<HashCursor>,
    replica: Replica,
}

thread_local! {
    // Commands, events and timers all run on Redis's main thread.
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// The family's whole state, for what concerns every part. `f` must not call the server
/// (see the module doc).
pub(super) fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|state| f(&mut state.borrow_mut()))
}

/// The known metas.
pub(super) fn known<R>(f: impl FnOnce(&mut KnownMetas) -> R) -> R {
    with(|s| f(&mut s.known))
}

/// The quarantine, its rebuilds and views.
pub(super) fn quarantine<R>(f: impl FnOnce(&mut Quarantine<HashCursor>) -> R) -> R {
    with(|s| f(&mut s.quarantine))
}

/// The saved scans of slots being expired.
pub(super) fn drains<R>(f: impl FnOnce(&mut DrainScans<HashCursor>) -> R) -> R {
    with(|s| f(&mut s.drains))
}

/// The totals without the oldest slot.
pub(super) fn nexts<R>(f: impl FnOnce(&mut NextTotals<HashCursor>) -> R) -> R {
    with(|s| f(&mut s.nexts))
}

/// The lifecycle's jobs and events in flight.
pub(super) fn lifecycle<R>(f: impl FnOnce(&mut LifecycleMemory) -> R) -> R {
    with(|s| f(&mut s.lifecycle))
}

/// The slot orders of boards with `CAPACITY`.
pub(super) fn orders<R>(f: impl FnOnce(&mut Orders<HashCursor>) -> R) -> R {
    with(|s| f(&mut s.orders))
}

/// The replica's watch list and announcements.
pub(super) fn replica<R>(f: impl FnOnce(&mut Replica) -> R) -> R {
    with(|s| f(&mut s.replica))
}

/// Bytes the family holds in memory (an estimate: allocations and their bookkeeping).
pub fn memory_bytes() -> usize {
    with(|s| {
        s.known.bytes()
            + s.quarantine.bytes()
            + s.drains.bytes()
            + s.nexts.bytes()
            + s.lifecycle.jobs.bytes()
            + s.orders.bytes()
    })
}

/// How many verified metas were found to differ from the stored one.
pub fn mismatches() -> u64 {
    known(|k| k.mismatches())
}

/// The board's meta if it is verified and the board is not quarantined (a command may
/// then use it without reading the meta hash).
pub(super) fn verified_meta(db: c_int, base: &[u8]) -> Option<Meta> {
    with(|s| {
        let meta = s.known.verified(db, base)?;
        (!s.quarantine.contains(db, base)).then_some(meta)
    })
}

impl State {
    /// The board at `base` is gone: forget everything held about it.
    pub(super) fn forget_board(&mut self, db: c_int, base: &[u8]) {
        self.known.forget(db, base);
        self.quarantine.forget(db, base);
        self.drains.forget(&(db, base.to_vec()));
        self.nexts.drop(db, base);
        self.orders.forget(db, base);
    }

    /// Forgets the boards and jobs of database `db` (every database if `db` is -1).
    pub(super) fn forget_db(&mut self, db: c_int) {
        let keep = |d: c_int| db >= 0 && d != db;
        self.known.retain_dbs(keep);
        self.quarantine.retain_dbs(keep);
        self.drains.retain_dbs(keep);
        self.lifecycle.jobs.retain_dbs(keep);
        self.nexts.drop_where(|d| !keep(d));
        self.orders.retain_dbs(keep);
    }

    /// SWAPDB: what was known of one database now belongs to the other (`swap` maps a
    /// database to its new number). Nothing stays verified and saved scans restart.
    pub(super) fn swap_dbs(&mut self, swap: impl Fn(c_int) -> c_int) {
        self.known.swap_dbs(&swap);
        self.quarantine.swap_dbs(&swap);
        self.drains.clear();
        self.lifecycle.jobs.swap_dbs(&swap);
        self.nexts.drop_where(|_| true);
        self.orders.retain_dbs(|_| false);
    }

    /// Frees discarded totals (views first, then next totals, then slot orders), about
    /// `work` members' worth; true while some are left.
    pub(super) fn free_discarded(&mut self, work: usize) -> bool {
        if self.quarantine.has_discarded() {
            self.quarantine.free_discarded(work);
        } else if self.nexts.has_discarded() {
            self.nexts.free_discarded(work);
        } else {
            self.orders.free_discarded(work);
        }
        self.quarantine.has_discarded() || self.nexts.has_discarded() || self.orders.has_discarded()
    }
}
