//! What tally knows in memory about leaderboards, by `(db, base)`: the last meta it read or
//! wrote (so keyspace events are understood without opening keys inside the notification
//! callback), the quarantine set, the cursors of slots being expired, and the totals of
//! large quarantined boards that the timer computes in steps (`view`).
//!
//! A known meta is *verified* when it is known to equal the stored one: TSRANK.INCRBY then
//! uses it without reading `base|meta` (the hot path's meta read and parse). The
//! invariant: verified means the meta hash exists with exactly these fields and no TTL on
//! the key or its fields. It holds because every change to a meta hash either is tally's
//! own write (which records the new meta here) or fires a keyspace event on it (which
//! drops the verification, whoever caused it: a user, a replicated effect, tally's own
//! `RENAME`), and flushes, SWAPDB and loads drop what they replace.
//!
//! Owns: these maps. May not touch: keys, replication, the job queue (`lifecycle`).

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::os::raw::c_int;
use std::rc::Rc;

use crate::rank::{Meta, Totals, TotalsBuilder};
use crate::store::scan::HashCursor;

/// A leaderboard in a database: (db, name its derived keys live under).
pub(super) type BoardId = (c_int, Vec<u8>);

/// A board's last meta and whether it is verified (see the module doc).
#[derive(Clone, Copy)]
struct Known {
    meta: Meta,
    verified: bool,
}

thread_local! {
    // Commands, events and timers all run on Redis's main thread.
    /// By database, then base: a lookup by `&[u8]` needs no allocation (every INCRBY
    /// and read remembers its board's meta).
    static BOARDS: RefCell<HashMap<c_int, HashMap<Vec<u8>, Known>>> = RefCell::new(HashMap::new());
    static QUARANTINE: RefCell<HashSet<BoardId>> = RefCell::new(HashSet::new());
    /// Resumable scans of slots being expired, by board: (slot index, cursor).
    static CURSORS: RefCell<HashMap<BoardId, (i64, HashCursor)>> =
        RefCell::new(HashMap::new());
    /// Totals of large quarantined boards, computed by the timer (see `view`).
    static VIEWS: RefCell<HashMap<BoardId, View>> = RefCell::new(HashMap::new());
    /// Views no longer true, freed by the timer in steps (see [`free_discarded`]).
    static DISCARDED: RefCell<Vec<Totals>> = const { RefCell::new(Vec::new()) };
    /// Verified metas found to differ from the stored one (a broken invariant: tests
    /// assert it stays 0).
    static MISMATCHES: Cell<u64> = const { Cell::new(0) };
}

/// Records the meta of a board tally just wrote (or put in place). A verified meta stays
/// verified only if it is unchanged.
pub(super) fn remember(db: c_int, base: &[u8], meta: Meta) {
    record(db, base, meta, Seen::Written);
}

/// Records the meta tally just read from the board's meta hash: a verified meta that
/// differs from it was stale, which counts as a mismatch.
pub(super) fn remember_read(db: c_int, base: &[u8], meta: Meta) {
    record(db, base, meta, Seen::Read);
}

/// Records the meta tally just read or wrote and knows to be the stored one (see the
/// module doc for what that takes).
pub(super) fn remember_verified(db: c_int, base: &[u8], meta: Meta) {
    record(db, base, meta, Seen::Verified);
}

#[derive(PartialEq)]
enum Seen {
    Read,
    Written,
    Verified,
}

fn record(db: c_int, base: &[u8], meta: Meta, seen: Seen) {
    let verified = seen == Seen::Verified;
    BOARDS.with(|b| {
        let mut boards = b.borrow_mut();
        let in_db = boards.entry(db).or_default();
        match in_db.get_mut(base) {
            Some(known) => {
                let unchanged = known.meta == meta;
                if known.verified && !unchanged && seen == Seen::Read {
                    note_mismatch();
                }
                known.verified = verified || (known.verified && unchanged);
                known.meta = meta;
            }
            None => {
                in_db.insert(base.to_vec(), Known { meta, verified });
            }
        }
    });
}

/// The last meta tally saw for the board at `base`.
pub(super) fn known_meta(db: c_int, base: &[u8]) -> Option<Meta> {
    BOARDS.with(|b| Some(b.borrow().get(&db)?.get(base)?.meta))
}

/// The board's meta if it is verified (equal to the stored one).
pub(super) fn verified_meta(db: c_int, base: &[u8]) -> Option<Meta> {
    BOARDS.with(|b| {
        let known = *b.borrow().get(&db)?.get(base)?;
        known.verified.then_some(known.meta)
    })
}

/// Something happened to the board's meta hash: its meta must be read again.
pub(super) fn unverify(db: c_int, base: &[u8]) {
    BOARDS.with(|b| {
        if let Some(known) = b.borrow_mut().get_mut(&db).and_then(|d| d.get_mut(base)) {
            known.verified = false;
        }
    });
}

/// Counts a verified meta found to differ from the stored one.
pub(super) fn note_mismatch() {
    MISMATCHES.with(|m| m.set(m.get() + 1));
}

/// How many verified metas were found to differ from the stored one.
pub fn mismatches() -> u64 {
    MISMATCHES.with(Cell::get)
}

pub(super) fn is_quarantined(db: c_int, base: &[u8]) -> bool {
    QUARANTINE.with(|q| {
        let q = q.borrow();
        !q.is_empty() && q.contains(&(db, base.to_vec()))
    })
}

pub(super) fn lift_quarantine(db: c_int, base: &[u8]) {
    QUARANTINE.with(|q| q.borrow_mut().remove(&(db, base.to_vec())));
    drop_view(db, base);
}

/// Puts the board in quarantine; true if it was not in it yet.
pub(super) fn quarantine(db: c_int, base: &[u8]) -> bool {
    QUARANTINE.with(|q| q.borrow_mut().insert((db, base.to_vec())))
}

/// Takes the saved scan of `board`'s expiring slot, if any.
pub(super) fn take_cursor(board: &BoardId) -> Option<(i64, HashCursor)> {
    CURSORS.with(|c| c.borrow_mut().remove(board))
}

/// Saves where the scan of `board`'s expiring slot `index` stopped.
pub(super) fn save_cursor(board: BoardId, index: i64, cursor: HashCursor) {
    CURSORS.with(|c| c.borrow_mut().insert(board, (index, cursor)));
}

/// A quarantined board's totals over the live slots `range` (first and last slot index),
/// from its slot hashes as they were when computed: being computed, or done.
pub(super) enum View {
    /// Slots before `index` are summed in `sums`; `cursor` is the scan of slot `index`;
    /// past the last slot, the sums are being ordered.
    Building {
        range: (i64, i64),
        index: i64,
        cursor: HashCursor,
        sums: TotalsBuilder,
    },
    Ready {
        range: (i64, i64),
        totals: Rc<Totals>,
    },
}

/// The computed totals of the quarantined board `base` over the live slots `range`, if
/// they are done. Any event on the board's keys drops them ([`drop_view`]).
pub(super) fn ready_view(db: c_int, base: &[u8], range: (i64, i64)) -> Option<Rc<Totals>> {
    VIEWS.with(|v| match v.borrow().get(&(db, base.to_vec()))? {
        View::Ready { range: r, totals } if *r == range => Some(Rc::clone(totals)),
        _ => None,
    })
}

/// Takes the board's view (the timer puts it back when it is still valid).
pub(super) fn take_view(board: &BoardId) -> Option<View> {
    VIEWS.with(|v| v.borrow_mut().remove(board))
}

pub(super) fn put_view(board: BoardId, view: View) {
    VIEWS.with(|v| v.borrow_mut().insert(board, view));
}

/// Something changed the board's keys: its computed totals are no longer true.
pub(super) fn drop_view(db: c_int, base: &[u8]) {
    let view = VIEWS.with(|v| {
        let mut views = v.borrow_mut();
        if views.is_empty() {
            return None;
        }
        views.remove(&(db, base.to_vec()))
    });
    discard(view);
}

/// Keeps a view to be freed by the timer: a large one takes tens of milliseconds to free
/// at once (this may run inside a user's command or a keyspace event).
fn discard(view: Option<View>) {
    let totals = match view {
        Some(View::Building { sums, .. }) => sums.abandon(),
        // A read still holding it (never across commands) frees it when done.
        Some(View::Ready { totals, .. }) => match Rc::try_unwrap(totals) {
            Ok(totals) => totals,
            Err(_) => return,
        },
        None => return,
    };
    if !totals.is_empty() {
        DISCARDED.with(|d| d.borrow_mut().push(totals));
    }
}

/// Frees discarded views, about `work` members' worth.
pub(super) fn free_discarded(work: usize) {
    DISCARDED.with(|d| {
        let mut discarded = d.borrow_mut();
        if let Some(last) = discarded.last_mut() {
            if last.free_step(work) {
                discarded.pop();
            }
        }
    });
}

/// The board at `base` is gone: forget everything held about it in memory.
pub(super) fn forget_board(db: c_int, base: &[u8]) {
    let id = (db, base.to_vec());
    BOARDS.with(|b| b.borrow_mut().get_mut(&db).map(|in_db| in_db.remove(base)));
    QUARANTINE.with(|q| q.borrow_mut().remove(&id));
    CURSORS.with(|c| c.borrow_mut().remove(&id));
    discard(VIEWS.with(|v| v.borrow_mut().remove(&id)));
}

/// Forgets the boards of database `db` (every database if `db` is -1).
pub(super) fn forget_db(db: c_int) {
    let keep = |d: c_int| db >= 0 && d != db;
    BOARDS.with(|b| b.borrow_mut().retain(|d, _| keep(*d)));
    QUARANTINE.with(|q| q.borrow_mut().retain(|(d, _)| keep(*d)));
    CURSORS.with(|c| c.borrow_mut().retain(|(d, _), _| keep(*d)));
    let gone: Vec<BoardId> = VIEWS.with(|v| {
        let views = v.borrow();
        views.keys().filter(|(d, _)| !keep(*d)).cloned().collect()
    });
    for id in gone {
        discard(VIEWS.with(|v| v.borrow_mut().remove(&id)));
    }
}

/// SWAPDB: what was known of one database now belongs to the other (`swap` maps a
/// database to its new number). Saved scans are dropped: they restart.
pub(super) fn swap_dbs(swap: impl Fn(c_int) -> c_int) {
    // The keys moved with their databases, but nothing is trusted across the swap.
    BOARDS.with(|m| {
        let old = std::mem::take(&mut *m.borrow_mut());
        *m.borrow_mut() = old
            .into_iter()
            .map(|(d, mut v)| {
                v.values_mut().for_each(|known| known.verified = false);
                (swap(d), v)
            })
            .collect();
    });
    QUARANTINE.with(|m| {
        let old = std::mem::take(&mut *m.borrow_mut());
        *m.borrow_mut() = old.into_iter().map(|(d, k)| (swap(d), k)).collect();
    });
    CURSORS.with(|c| c.borrow_mut().clear());
    let views = VIEWS.with(|v| std::mem::take(&mut *v.borrow_mut()));
    for view in views.into_values() {
        discard(Some(view));
    }
}
