//! What tally knows in memory about leaderboards, by `(db, base)`: the last meta it read or
//! wrote (so keyspace events are understood without opening keys inside the notification
//! callback), the quarantine set, and the cursors of slots being expired.
//!
//! Owns: these maps. May not touch: keys, replication, the job queue (`lifecycle`).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::os::raw::c_int;

use crate::rank::Meta;
use crate::store::scan::HashCursor;

/// A leaderboard in a database: (db, name its derived keys live under).
pub(super) type BoardId = (c_int, Vec<u8>);

thread_local! {
    // Commands, events and timers all run on Redis's main thread.
    /// By database, then base: a lookup by `&[u8]` needs no allocation (every INCRBY
    /// and read remembers its board's meta).
    static BOARDS: RefCell<HashMap<c_int, HashMap<Vec<u8>, Meta>>> = RefCell::new(HashMap::new());
    static QUARANTINE: RefCell<HashSet<BoardId>> = RefCell::new(HashSet::new());
    /// Resumable scans of slots being expired, by board: (slot index, cursor).
    static CURSORS: RefCell<HashMap<BoardId, (i64, HashCursor)>> =
        RefCell::new(HashMap::new());
}

/// Records the meta of a board tally just read or wrote.
pub(super) fn remember(db: c_int, base: &[u8], meta: Meta) {
    BOARDS.with(|b| {
        let mut boards = b.borrow_mut();
        let in_db = boards.entry(db).or_default();
        match in_db.get_mut(base) {
            Some(known) => *known = meta,
            None => {
                in_db.insert(base.to_vec(), meta);
            }
        }
    });
}

/// The last meta tally saw for the board at `base`.
pub(super) fn known_meta(db: c_int, base: &[u8]) -> Option<Meta> {
    BOARDS.with(|b| b.borrow().get(&db)?.get(base).copied())
}

pub(super) fn is_quarantined(db: c_int, base: &[u8]) -> bool {
    QUARANTINE.with(|q| {
        let q = q.borrow();
        !q.is_empty() && q.contains(&(db, base.to_vec()))
    })
}

pub(super) fn lift_quarantine(db: c_int, base: &[u8]) {
    QUARANTINE.with(|q| q.borrow_mut().remove(&(db, base.to_vec())));
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

/// The board at `base` is gone: forget everything held about it in memory.
pub(super) fn forget_board(db: c_int, base: &[u8]) {
    let id = (db, base.to_vec());
    BOARDS.with(|b| b.borrow_mut().get_mut(&db).map(|in_db| in_db.remove(base)));
    QUARANTINE.with(|q| q.borrow_mut().remove(&id));
    CURSORS.with(|c| c.borrow_mut().remove(&id));
}

/// Forgets the boards of database `db` (every database if `db` is -1).
pub(super) fn forget_db(db: c_int) {
    let keep = |d: c_int| db >= 0 && d != db;
    BOARDS.with(|b| b.borrow_mut().retain(|d, _| keep(*d)));
    QUARANTINE.with(|q| q.borrow_mut().retain(|(d, _)| keep(*d)));
    CURSORS.with(|c| c.borrow_mut().retain(|(d, _), _| keep(*d)));
}

/// SWAPDB: what was known of one database now belongs to the other (`swap` maps a
/// database to its new number). Saved scans are dropped: they restart.
pub(super) fn swap_dbs(swap: impl Fn(c_int) -> c_int) {
    BOARDS.with(|m| {
        let old = std::mem::take(&mut *m.borrow_mut());
        *m.borrow_mut() = old.into_iter().map(|(d, v)| (swap(d), v)).collect();
    });
    QUARANTINE.with(|m| {
        let old = std::mem::take(&mut *m.borrow_mut());
        *m.borrow_mut() = old.into_iter().map(|(d, k)| (swap(d), k)).collect();
    });
    CURSORS.with(|c| c.borrow_mut().clear());
}
