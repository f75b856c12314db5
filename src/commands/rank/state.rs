//! Everything the leaderboard family keeps in memory, as one value ([`State`]) reached
//! through one access point ([`with`]), with its size in bytes ([`memory_bytes`]):
//!
//! * the last meta tally read or wrote of each board (so keyspace events are understood
//!   without opening keys inside the notification callback), and whether it is
//!   *verified*;
//! * the quarantine set (boards edited by native commands) and where the rebuilds in
//!   steps of large ones stand (`rebuild`);
//! * the saved scans of slots being expired (`visit`);
//! * the totals of large quarantined boards that the timer computes in steps (`view`), and
//!   those no longer true, freed by the timer in steps;
//! * the totals of boards without their oldest slot, when that slot is large, ready before
//!   it leaves the window (`next`);
//! * the lifecycle jobs queued by keyspace events (`lifecycle`) and their bookkeeping.
//!
//! A known meta is *verified* when it is known to equal the stored one: TSRANK.INCRBY then
//! uses it without reading `base|meta` (the hot path's meta read and parse). The
//! invariant: verified means the meta hash exists with exactly these fields and no TTL on
//! the key or its fields. It holds because every change to a meta hash either is tally's
//! own write (which records the new meta here) or fires a keyspace event on it (which
//! drops the verification, whoever caused it: a user, a replicated effect, tally's own
//! `RENAME`), and flushes, SWAPDB and loads drop what they replace.
//!
//! Owns: this memory. May not touch: keys, replication. Nothing here calls the server:
//! a call could fire a keyspace event, which comes back here while the state is borrowed.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::mem::size_of;
use std::os::raw::c_int;
use std::rc::Rc;

use crate::host::store::scan::HashCursor;
use crate::rank::{slot_key, JobQueue, Meta, RankedSet, Totals, TotalsBuilder};

/// A leaderboard in a database: (db, name its derived keys live under).
pub(super) type BoardId = (c_int, Vec<u8>);

/// Bookkeeping bytes of a hash-map entry besides its key and value (control byte, the
/// key's vector header, slack of the table).
const ENTRY_OVERHEAD: usize = 40;

/// A board's last meta and whether it is verified (see the module doc).
#[derive(Clone, Copy)]
struct Known {
    meta: Meta,
    verified: bool,
}

/// How tally came to know a board's meta (see [`State::note_meta`]).
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Seen {
    /// Read from the meta hash: a verified meta that differs was stale (a mismatch).
    Read,
    /// Written by tally (or put in place): a verified meta stays verified if unchanged.
    Written,
    /// Read or written, and known to be the stored one (see the module doc).
    Verified,
}

/// A quarantined board's totals over its live slots `range` (first and last slot index),
/// from its slot hashes as they were when computed: being computed, or done.
pub(super) enum View {
    /// Slots before `index` are summed in `sums`; `cursor` is the scan of slot `index`;
    /// past the last slot, the sums are being ordered.
    Building {
        range: (i64, i64),
        index: i64,
        cursor: HashCursor,
        sums: Box<TotalsBuilder>,
    },
    Ready {
        range: (i64, i64),
        totals: Rc<Totals>,
    },
}

impl View {
    fn bytes(&self) -> usize {
        match self {
            View::Building { sums, .. } => sums.bytes(),
            View::Ready { totals, .. } => totals.bytes(),
        }
    }
}

/// Where the rebuild in steps of a quarantined board stands (see `rebuild`): a write
/// whose caller may write every part of the board started it.
pub(super) enum Rebuild {
    /// Phase 1: the walk of the sorted set, each member set to its sum over the slots.
    Members(HashCursor),
    /// Phase 2: the walk of slot hash `index`'s fields, adding members the sorted set
    /// lacks.
    Slots { index: i64, cursor: HashCursor },
}

/// A board's totals without slot `excluded` (its oldest slot hash), in leaderboard order:
/// for every member, its sorted-set total less its count in that slot. Complete once
/// `scan` is done (`None`); until then, only what was scanned or written is in `totals`.
/// On a replica, `dirty` holds the members the primary's effects changed since: their
/// values are set from the keys before the totals answer (see `replica`).
pub(super) struct Next {
    pub(super) excluded: i64,
    pub(super) totals: RankedSet,
    pub(super) scan: Option<NextScan>,
    pub(super) dirty: HashSet<Vec<u8>>,
}

/// How the timer fills a board's [`Next`] (see `next`).
pub(super) enum NextScan {
    /// A pass over the sorted set (a new [`Next`] of a board whose other slots hold more).
    Totals(HashCursor),
    /// A pass over the slot hashes after the excluded one, from slot `index` (a new
    /// [`Next`]: a member in none of them has no total without the excluded slot).
    Slots { index: i64, cursor: HashCursor },
    /// A pass over the excluded slot's hash (the totals equal the sorted set's before).
    Excluded(HashCursor),
}

/// The leaderboard family's memory (see the module doc).
#[derive(Default)]
pub(super) struct State {
    /// By database, then base: a lookup by `&[u8]` needs no allocation (every INCRBY and
    /// read looks up its board).
    known: HashMap<c_int, HashMap<Vec<u8>, Known>>,
    /// Bytes held by `known`, kept as entries come and go (INFO reads it in O(1)).
    known_bytes: usize,
    quarantine: HashSet<BoardId>,
    /// Resumable scans of slots being expired, by board: (slot index, cursor).
    drains: HashMap<BoardId, (i64, HashCursor)>,
    /// Totals of large quarantined boards, computed by the timer.
    views: HashMap<BoardId, View>,
    /// Quarantined boards being rebuilt in steps by the timer (see `rebuild`).
    rebuilds: HashMap<BoardId, Rebuild>,
    /// Views no longer true, freed by the timer in steps (freeing a million members at
    /// once would hold the server for tens of milliseconds).
    discarded: Vec<Totals>,
    /// Totals without the oldest slot, by database, then base (see [`Next`]); looked up
    /// by every INCRBY of a board that has one.
    nexts: HashMap<c_int, HashMap<Vec<u8>, Next>>,
    /// Next totals no longer used, freed by the timer in steps.
    discarded_nexts: Vec<RankedSet>,
    /// Verified metas found to differ from the stored one (a broken invariant: tests
    /// assert it stays 0).
    mismatches: u64,
    /// Lifecycle jobs queued by keyspace events, in order (see `lifecycle`).
    pub(super) jobs: JobQueue,
    /// The key of the last `rename_from` event, waiting for its `rename_to`.
    pub(super) rename_from: Option<(c_int, Vec<u8>)>,
    /// The Redis 7.0 job timer is armed.
    pub(super) job_timer_armed: bool,
    /// > 0 while tally itself runs a command (UNLINK, RENAME of parts): its events are ours.
    pub(super) own_calls: u32,
}

thread_local! {
    // Commands, events and timers all run on Redis's main thread.
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// The one access point to the family's state. `f` must not call the server (see the
/// module doc).
pub(super) fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|state| f(&mut state.borrow_mut()))
}

/// Bytes the family holds in memory (an estimate: allocations and their bookkeeping).
pub fn memory_bytes() -> usize {
    with(|state| state.bytes())
}

/// How many verified metas were found to differ from the stored one.
pub fn mismatches() -> u64 {
    with(|state| state.mismatches)
}

fn known_entry_bytes(base: &[u8]) -> usize {
    base.len() + size_of::<Known>() + ENTRY_OVERHEAD
}

impl State {
    fn bytes(&self) -> usize {
        let board_ids = |n: usize| n * (size_of::<BoardId>() + ENTRY_OVERHEAD);
        let quarantine: usize = self.quarantine.iter().map(|(_, b)| b.len()).sum();
        let views: usize = self.views.values().map(View::bytes).sum();
        let discarded: usize = self.discarded.iter().map(Totals::bytes).sum();
        let jobs = self.jobs.bytes();
        let nexts: usize = (self.nexts.values())
            .flat_map(HashMap::iter)
            .map(|(base, next)| {
                let dirty: usize = next.dirty.iter().map(|m| m.len() + ENTRY_OVERHEAD).sum();
                base.len() + ENTRY_OVERHEAD + next.totals.bytes() + dirty
            })
            .sum();
        let discarded_nexts: usize = self.discarded_nexts.iter().map(RankedSet::bytes).sum();
        self.known_bytes
            + board_ids(self.quarantine.len())
            + quarantine
            + board_ids(self.drains.len())
            + board_ids(self.views.len())
            + board_ids(self.rebuilds.len())
            + views
            + discarded
            + jobs
            + nexts
            + discarded_nexts
    }

    // ------------------------------------------------------------------ known metas

    /// Records the meta of the board at `base`, as tally came to know it (`seen`).
    pub(super) fn note_meta(&mut self, db: c_int, base: &[u8], meta: Meta, seen: Seen) {
        let verified = seen == Seen::Verified;
        let in_db = self.known.entry(db).or_default();
        match in_db.get_mut(base) {
            Some(known) => {
                let unchanged = known.meta == meta;
                if known.verified && !unchanged && seen == Seen::Read {
                    self.mismatches += 1;
                }
                known.verified = verified || (known.verified && unchanged);
                known.meta = meta;
            }
            None => {
                in_db.insert(base.to_vec(), Known { meta, verified });
                self.known_bytes += known_entry_bytes(base);
            }
        }
    }

    /// The last meta tally saw for the board at `base`.
    pub(super) fn known_meta(&self, db: c_int, base: &[u8]) -> Option<Meta> {
        Some(self.known.get(&db)?.get(base)?.meta)
    }

    /// The board's meta if it is verified and the board is not quarantined (a command may
    /// then use it without reading the meta hash).
    pub(super) fn verified_meta(&self, db: c_int, base: &[u8]) -> Option<Meta> {
        let known = self.known.get(&db)?.get(base)?;
        (known.verified && !self.is_quarantined(db, base)).then_some(known.meta)
    }

    /// Something happened to the board's meta hash: its meta must be read again.
    pub(super) fn unverify(&mut self, db: c_int, base: &[u8]) {
        if let Some(known) = self.known.get_mut(&db).and_then(|d| d.get_mut(base)) {
            known.verified = false;
        }
    }

    /// A verified meta was found to differ from the stored one.
    pub(super) fn note_mismatch(&mut self, db: c_int, base: &[u8]) {
        self.mismatches += 1;
        self.unverify(db, base);
    }

    // ------------------------------------------------------------------- quarantine

    pub(super) fn is_quarantined(&self, db: c_int, base: &[u8]) -> bool {
        !self.quarantine.is_empty() && self.quarantine.contains(&(db, base.to_vec()))
    }

    /// Puts the board in quarantine; true if it was not in it yet.
    pub(super) fn quarantine(&mut self, db: c_int, base: &[u8]) -> bool {
        self.quarantine.insert((db, base.to_vec()))
    }

    pub(super) fn lift_quarantine(&mut self, db: c_int, base: &[u8]) {
        self.quarantine.remove(&(db, base.to_vec()));
        self.cancel_rebuild(db, base);
        self.drop_view(db, base);
    }

    // ---------------------------------------------------------------------- rebuilds

    /// True while the quarantined board is being rebuilt in steps (see `rebuild`).
    pub(super) fn is_rebuilding(&self, db: c_int, base: &[u8]) -> bool {
        !self.rebuilds.is_empty() && self.rebuilds.contains_key(&(db, base.to_vec()))
    }

    /// Takes where the board's rebuild stands (the timer puts it back unless it is done).
    pub(super) fn take_rebuild(&mut self, board: &BoardId) -> Option<Rebuild> {
        self.rebuilds.remove(board)
    }

    pub(super) fn put_rebuild(&mut self, board: BoardId, rebuild: Rebuild) {
        self.rebuilds.insert(board, rebuild);
    }

    /// A native edit (or the board's end) stops its rebuild: the next write starts over.
    pub(super) fn cancel_rebuild(&mut self, db: c_int, base: &[u8]) {
        if !self.rebuilds.is_empty() {
            self.rebuilds.remove(&(db, base.to_vec()));
        }
    }

    // ------------------------------------------------------------------------ drains

    /// Takes the saved scan of `board`'s expiring slot, if any.
    pub(super) fn take_drain(&mut self, board: &BoardId) -> Option<(i64, HashCursor)> {
        self.drains.remove(board)
    }

    /// Saves where the scan of `board`'s expiring slot `index` stopped.
    pub(super) fn save_drain(&mut self, board: BoardId, index: i64, cursor: HashCursor) {
        self.drains.insert(board, (index, cursor));
    }

    // ------------------------------------------------------------------------- views

    /// The computed totals of the quarantined board `base` over the live slots `range`,
    /// if they are done. Any event on the board's keys drops them ([`State::drop_view`]).
    pub(super) fn ready_view(
        &self,
        db: c_int,
        base: &[u8],
        range: (i64, i64),
    ) -> Option<Rc<Totals>> {
        match self.views.get(&(db, base.to_vec()))? {
            View::Ready { range: r, totals } if *r == range => Some(Rc::clone(totals)),
            _ => None,
        }
    }

    /// Takes the board's view (the timer puts it back when it is still valid).
    pub(super) fn take_view(&mut self, board: &BoardId) -> Option<View> {
        self.views.remove(board)
    }

    pub(super) fn put_view(&mut self, board: BoardId, view: View) {
        self.views.insert(board, view);
    }

    /// Something changed the board's keys: its computed totals are no longer true.
    pub(super) fn drop_view(&mut self, db: c_int, base: &[u8]) {
        if self.views.is_empty() {
            return;
        }
        let view = self.views.remove(&(db, base.to_vec()));
        self.discard(view);
    }

    /// Keeps a view to be freed by the timer (this may run inside a user's command or a
    /// keyspace event, where freeing a large one at once would stall the server).
    fn discard(&mut self, view: Option<View>) {
        let totals = match view {
            Some(View::Building { sums, .. }) => (*sums).abandon(),
            // A read still holding it (never across commands) frees it when done.
            Some(View::Ready { totals, .. }) => match Rc::try_unwrap(totals) {
                Ok(totals) => totals,
                Err(_) => return,
            },
            None => return,
        };
        if !totals.is_empty() {
            self.discarded.push(totals);
        }
    }

    /// Frees discarded totals, about `work` members' worth; true while some are left.
    pub(super) fn free_discarded(&mut self, work: usize) -> bool {
        if let Some(last) = self.discarded.last_mut() {
            if last.free_step(work) {
                self.discarded.pop();
            }
        } else if let Some(last) = self.discarded_nexts.last_mut() {
            if last.free_step(work) {
                self.discarded_nexts.pop();
            }
        }
        !self.discarded.is_empty() || !self.discarded_nexts.is_empty()
    }

    // ------------------------------------------------------------------------- nexts

    pub(super) fn has_nexts(&self) -> bool {
        !self.nexts.is_empty()
    }

    /// True if a board named `base` has next totals in some database (a command filter
    /// does not know the database its command runs in).
    pub(super) fn has_next_named(&self, base: &[u8]) -> bool {
        self.nexts.values().any(|in_db| in_db.contains_key(base))
    }

    /// True if `slot` is the slot hash that a board named `base` leaves out of its next
    /// totals, in some database.
    pub(super) fn excludes_slot(&self, base: &[u8], slot: &[u8]) -> bool {
        self.nexts
            .values()
            .filter_map(|in_db| in_db.get(base))
            .any(|next| slot_key(base, next.excluded).as_ref() == slot)
    }

    /// The members in `members` of the board named `base` (in any database: see
    /// `replica`) may have changed in a way its next totals did not follow: their values
    /// are set from the keys before the next read (see `next::settle`).
    pub(super) fn mark_dirty(&mut self, base: &[u8], members: Vec<Vec<u8>>) {
        let mut nexts = self
            .nexts
            .values_mut()
            .filter_map(|in_db| in_db.get_mut(base));
        let Some(first) = nexts.next() else {
            return;
        };
        for next in nexts {
            next.dirty.extend(members.iter().cloned());
        }
        first.dirty.extend(members);
    }

    /// Drops the next totals of every board.
    pub(super) fn drop_all_nexts(&mut self) {
        self.drop_nexts_where(|_| true);
    }

    pub(super) fn next(&self, db: c_int, base: &[u8]) -> Option<&Next> {
        self.nexts.get(&db)?.get(base)
    }

    pub(super) fn next_mut(&mut self, db: c_int, base: &[u8]) -> Option<&mut Next> {
        self.nexts.get_mut(&db)?.get_mut(base)
    }

    pub(super) fn put_next(&mut self, db: c_int, base: &[u8], next: Next) {
        self.nexts
            .entry(db)
            .or_default()
            .insert(base.to_vec(), next);
    }

    /// The board's next totals, if they are complete and leave out slot `excluded`.
    pub(super) fn ready_next(&self, db: c_int, base: &[u8], excluded: i64) -> Option<&RankedSet> {
        let next = self.next(db, base)?;
        (next.excluded == excluded && next.scan.is_none()).then_some(&next.totals)
    }

    /// Something changed the board's keys behind tally's back, or the board is gone: its
    /// next totals are no longer true.
    pub(super) fn drop_next(&mut self, db: c_int, base: &[u8]) {
        let Some(in_db) = self.nexts.get_mut(&db) else {
            return;
        };
        let next = in_db.remove(base);
        if in_db.is_empty() {
            self.nexts.remove(&db);
        }
        if let Some(next) = next {
            self.discard_next(next);
        }
    }

    fn discard_next(&mut self, next: Next) {
        if !next.totals.is_empty() {
            self.discarded_nexts.push(next.totals);
        }
    }

    fn drop_nexts_where(&mut self, gone: impl Fn(c_int) -> bool) {
        let dbs: Vec<c_int> = self.nexts.keys().copied().filter(|d| gone(*d)).collect();
        for db in dbs {
            for next in self
                .nexts
                .remove(&db)
                .into_iter()
                .flat_map(HashMap::into_values)
            {
                self.discard_next(next);
            }
        }
    }

    // ---------------------------------------------------------- boards and databases

    /// The board at `base` is gone: forget everything held about it.
    pub(super) fn forget_board(&mut self, db: c_int, base: &[u8]) {
        let id = (db, base.to_vec());
        if let Some(in_db) = self.known.get_mut(&db) {
            if in_db.remove(base).is_some() {
                self.known_bytes = self.known_bytes.saturating_sub(known_entry_bytes(base));
            }
        }
        self.quarantine.remove(&id);
        self.rebuilds.remove(&id);
        self.drains.remove(&id);
        let view = self.views.remove(&id);
        self.discard(view);
        self.drop_next(db, base);
    }

    /// Forgets the boards and jobs of database `db` (every database if `db` is -1).
    pub(super) fn forget_db(&mut self, db: c_int) {
        let keep = |d: c_int| db >= 0 && d != db;
        self.known.retain(|d, _| keep(*d));
        self.quarantine.retain(|(d, _)| keep(*d));
        self.rebuilds.retain(|(d, _), _| keep(*d));
        self.drains.retain(|(d, _), _| keep(*d));
        let gone: Vec<BoardId> = self
            .views
            .keys()
            .filter(|(d, _)| !keep(*d))
            .cloned()
            .collect();
        for id in gone {
            let view = self.views.remove(&id);
            self.discard(view);
        }
        self.jobs.retain_dbs(keep);
        self.drop_nexts_where(|d| !keep(d));
        self.recount_known();
    }

    /// SWAPDB: what was known of one database now belongs to the other (`swap` maps a
    /// database to its new number). Nothing stays verified and saved scans restart.
    pub(super) fn swap_dbs(&mut self, swap: impl Fn(c_int) -> c_int) {
        self.known = std::mem::take(&mut self.known)
            .into_iter()
            .map(|(d, mut boards)| {
                boards.values_mut().for_each(|known| known.verified = false);
                (swap(d), boards)
            })
            .collect();
        self.quarantine = std::mem::take(&mut self.quarantine)
            .into_iter()
            .map(|(d, base)| (swap(d), base))
            .collect();
        // A rebuild restarts with the next write (the boards stay quarantined).
        self.rebuilds.clear();
        self.drains.clear();
        for view in std::mem::take(&mut self.views).into_values() {
            self.discard(Some(view));
        }
        self.jobs.swap_dbs(&swap);
        self.drop_nexts_where(|_| true);
    }

    fn recount_known(&mut self) {
        self.known_bytes = self
            .known
            .values()
            .flat_map(HashMap::keys)
            .map(|base| known_entry_bytes(base))
            .sum();
    }
}
