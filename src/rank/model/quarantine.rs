//! The quarantine's memory: the boards edited by native commands, where the rebuilds in
//! steps of large ones stand, and the totals the timer computes in steps for their reads
//! (views), with those no longer true, freed in steps. Generic over the scan cursor `C`
//! the command layer resumes (a hash scan over native keys).
//!
//! Owns: that memory. May not touch: Redis (pure).

use std::collections::{HashMap, HashSet};
use std::mem::size_of;
use std::os::raw::c_int;
use std::rc::Rc;

use super::board_id::{BoardId, ENTRY_OVERHEAD};
use super::discarded::Discarded;
use super::totals::{Totals, TotalsBuilder};

/// A quarantined board's totals over its live slots `range` (first and last slot index),
/// from its slot hashes as they were when computed: being computed, or done.
pub enum View<C> {
    /// Slots before `index` are summed in `sums`; `cursor` is the scan of slot `index`;
    /// past the last slot, the sums are being ordered.
    Building {
        range: (i64, i64),
        index: i64,
        cursor: C,
        sums: Box<TotalsBuilder>,
    },
    Ready {
        range: (i64, i64),
        totals: Rc<Totals>,
    },
}

impl<C> View<C> {
    fn bytes(&self) -> usize {
        match self {
            View::Building { sums, .. } => sums.bytes(),
            View::Ready { totals, .. } => totals.bytes(),
        }
    }
}

/// Where the rebuild in steps of a quarantined board stands: a write whose caller may
/// write every part of the board started it.
pub enum Rebuild<C> {
    /// Phase 1: the walk of the sorted set, each member set to its sum over the slots.
    Members(C),
    /// Phase 2: the walk of slot hash `index`'s fields, adding members the sorted set
    /// lacks.
    Slots { index: i64, cursor: C },
}

/// See the module doc.
pub struct Quarantine<C> {
    boards: HashSet<BoardId>,
    rebuilds: HashMap<BoardId, Rebuild<C>>,
    views: HashMap<BoardId, View<C>>,
    /// Views no longer true, freed by the timer in steps.
    discarded: Discarded<Totals>,
}

impl<C> Default for Quarantine<C> {
    fn default() -> Self {
        Quarantine {
            boards: HashSet::new(),
            rebuilds: HashMap::new(),
            views: HashMap::new(),
            discarded: Discarded::default(),
        }
    }
}

fn key(db: c_int, base: &[u8]) -> BoardId {
    (db, base.to_vec())
}

impl<C> Quarantine<C> {
    pub fn bytes(&self) -> usize {
        let board_ids = |n: usize| n * (size_of::<BoardId>() + ENTRY_OVERHEAD);
        let names: usize = self.boards.iter().map(|(_, b)| b.len()).sum();
        let views: usize = self.views.values().map(View::bytes).sum();
        let discarded = self.discarded.bytes();
        board_ids(self.boards.len())
            + names
            + board_ids(self.rebuilds.len())
            + board_ids(self.views.len())
            + views
            + discarded
    }

    pub fn contains(&self, db: c_int, base: &[u8]) -> bool {
        !self.boards.is_empty() && self.boards.contains(&key(db, base))
    }

    /// Puts the board in quarantine; true if it was not in it yet.
    pub fn insert(&mut self, db: c_int, base: &[u8]) -> bool {
        self.boards.insert(key(db, base))
    }

    /// The board is rebuilt: out of quarantine, with its rebuild and view gone.
    pub fn lift(&mut self, db: c_int, base: &[u8]) {
        self.boards.remove(&key(db, base));
        self.cancel_rebuild(db, base);
        self.drop_view(db, base);
    }

    // ---------------------------------------------------------------------- rebuilds

    /// True while the quarantined board is being rebuilt in steps.
    pub fn is_rebuilding(&self, db: c_int, base: &[u8]) -> bool {
        !self.rebuilds.is_empty() && self.rebuilds.contains_key(&key(db, base))
    }

    /// Takes where the board's rebuild stands (the timer puts it back unless it is done).
    pub fn take_rebuild(&mut self, board: &BoardId) -> Option<Rebuild<C>> {
        self.rebuilds.remove(board)
    }

    pub fn put_rebuild(&mut self, board: BoardId, rebuild: Rebuild<C>) {
        self.rebuilds.insert(board, rebuild);
    }

    /// A native edit (or the board's end) stops its rebuild: the next write starts over.
    pub fn cancel_rebuild(&mut self, db: c_int, base: &[u8]) {
        if !self.rebuilds.is_empty() {
            self.rebuilds.remove(&key(db, base));
        }
    }

    // ------------------------------------------------------------------------- views

    /// The computed totals of the quarantined board `base` over the live slots `range`,
    /// if they are done. Any event on the board's keys drops them ([`Self::drop_view`]).
    pub fn ready_view(&self, db: c_int, base: &[u8], range: (i64, i64)) -> Option<Rc<Totals>> {
        match self.views.get(&key(db, base))? {
            View::Ready { range: r, totals } if *r == range => Some(Rc::clone(totals)),
            _ => None,
        }
    }

    /// Takes the board's view (the timer puts it back when it is still valid).
    pub fn take_view(&mut self, board: &BoardId) -> Option<View<C>> {
        self.views.remove(board)
    }

    pub fn put_view(&mut self, board: BoardId, view: View<C>) {
        self.views.insert(board, view);
    }

    /// Something changed the board's keys: its computed totals are no longer true.
    pub fn drop_view(&mut self, db: c_int, base: &[u8]) {
        if self.views.is_empty() {
            return;
        }
        let view = self.views.remove(&key(db, base));
        self.discard(view);
    }

    /// Keeps a view to be freed by the timer (this may run inside a user's command or a
    /// keyspace event, where freeing a large one at once would stall the server).
    fn discard(&mut self, view: Option<View<C>>) {
        let totals = match view {
            Some(View::Building { sums, .. }) => (*sums).abandon(),
            // A read still holding it (never across commands) frees it when done.
            Some(View::Ready { totals, .. }) => match Rc::try_unwrap(totals) {
                Ok(totals) => totals,
                Err(_) => return,
            },
            None => return,
        };
        self.discarded.push(totals);
    }

    pub fn has_discarded(&self) -> bool {
        !self.discarded.is_empty()
    }

    /// Frees discarded totals, about `work` members' worth.
    pub fn free_discarded(&mut self, work: usize) {
        self.discarded.free_step(work);
    }

    // ---------------------------------------------------------- boards and databases

    /// The board is gone: forget everything held about it.
    pub fn forget(&mut self, db: c_int, base: &[u8]) {
        let id = key(db, base);
        self.boards.remove(&id);
        self.rebuilds.remove(&id);
        let view = self.views.remove(&id);
        self.discard(view);
    }

    /// Keeps only the databases `keep` says to.
    pub fn retain_dbs(&mut self, keep: impl Fn(c_int) -> bool) {
        self.boards.retain(|(d, _)| keep(*d));
        self.rebuilds.retain(|(d, _), _| keep(*d));
        let gone: Vec<BoardId> = (self.views.keys())
            .filter(|(d, _)| !keep(*d))
            .cloned()
            .collect();
        for id in gone {
            let view = self.views.remove(&id);
            self.discard(view);
        }
    }

    /// SWAPDB: the quarantine follows its database; rebuilds restart with the next write
    /// (the boards stay quarantined) and views are computed again.
    pub fn swap_dbs(&mut self, swap: impl Fn(c_int) -> c_int) {
        self.boards = std::mem::take(&mut self.boards)
            .into_iter()
            .map(|(d, base)| (swap(d), base))
            .collect();
        self.rebuilds.clear();
        for view in std::mem::take(&mut self.views).into_values() {
            self.discard(Some(view));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Q = Quarantine<u32>;

    fn ready(q: &mut Q, db: c_int, base: &[u8], range: (i64, i64), rows: &[(&str, &str)]) {
        let mut sums = TotalsBuilder::new();
        for (member, count) in rows {
            sums.add(member.as_bytes(), count.as_bytes());
        }
        let totals = Rc::new(sums.finish());
        q.put_view(key(db, base), View::Ready { range, totals });
    }

    #[test]
    fn a_quarantine_is_per_database_and_board() {
        let mut q = Q::default();
        assert!(!q.contains(0, b"b"));
        assert!(q.insert(0, b"b"));
        assert!(!q.insert(0, b"b"));
        assert!(q.contains(0, b"b"));
        assert!(!q.contains(1, b"b"));
        assert!(!q.contains(0, b"c"));
    }

    #[test]
    fn lifting_the_quarantine_ends_the_rebuild_and_the_view() {
        let mut q = Q::default();
        q.insert(0, b"b");
        q.put_rebuild(key(0, b"b"), Rebuild::Members(7));
        ready(&mut q, 0, b"b", (1, 4), &[("m", "3")]);
        assert!(q.is_rebuilding(0, b"b"));
        assert!(q.ready_view(0, b"b", (1, 4)).is_some());
        q.lift(0, b"b");
        assert!(!q.contains(0, b"b"));
        assert!(!q.is_rebuilding(0, b"b"));
        assert!(q.ready_view(0, b"b", (1, 4)).is_none());
        // The view's totals wait to be freed in steps.
        assert!(q.has_discarded());
        while q.has_discarded() {
            q.free_discarded(1);
        }
    }

    #[test]
    fn a_view_answers_only_for_the_range_it_was_computed_over() {
        let mut q = Q::default();
        ready(&mut q, 0, b"b", (1, 4), &[("m", "3"), ("n", "5")]);
        let totals = q.ready_view(0, b"b", (1, 4)).map(|t| t.get(b"n"));
        assert_eq!(totals, Some(5));
        // The window moved on: a slot left, the view is for another range.
        assert!(q.ready_view(0, b"b", (2, 5)).is_none());
        assert!(q.ready_view(1, b"b", (1, 4)).is_none());
    }

    #[test]
    fn a_view_a_read_still_holds_is_not_freed_by_the_timer() {
        let mut q = Q::default();
        ready(&mut q, 0, b"b", (1, 4), &[("m", "3")]);
        let held = q.ready_view(0, b"b", (1, 4));
        q.drop_view(0, b"b");
        assert!(!q.has_discarded());
        assert_eq!(held.map(|t| t.get(b"m")), Some(3));
    }

    #[test]
    fn a_native_edit_cancels_a_rebuild_in_steps_which_starts_over() {
        let mut q = Q::default();
        q.insert(0, b"b");
        q.put_rebuild(
            key(0, b"b"),
            Rebuild::Slots {
                index: 4,
                cursor: 9,
            },
        );
        q.cancel_rebuild(0, b"b");
        assert!(!q.is_rebuilding(0, b"b"));
        assert!(q.contains(0, b"b"));
        assert!(q.take_rebuild(&key(0, b"b")).is_none());
    }

    #[test]
    fn a_view_being_built_is_discarded_with_what_it_summed() {
        let mut q = Q::default();
        let mut sums = Box::new(TotalsBuilder::new());
        sums.add(b"m", b"2");
        let view = View::Building {
            range: (1, 3),
            index: 2,
            cursor: 0,
            sums,
        };
        q.put_view(key(0, b"b"), view);
        assert!(q.bytes() > 0);
        q.forget(0, b"b");
        assert!(q.has_discarded());
        assert!(q.take_view(&key(0, b"b")).is_none());
    }

    #[test]
    fn flush_and_swapdb_keep_the_quarantine_where_its_database_goes() {
        let mut q = Q::default();
        q.insert(0, b"a");
        q.insert(1, b"b");
        q.put_rebuild(key(0, b"a"), Rebuild::Members(1));
        ready(&mut q, 1, b"b", (1, 2), &[("m", "1")]);
        q.swap_dbs(|d| 1 - d);
        assert!(q.contains(1, b"a") && q.contains(0, b"b"));
        assert!(!q.is_rebuilding(1, b"a") && !q.is_rebuilding(0, b"a"));
        assert!(q.ready_view(0, b"b", (1, 2)).is_none());
        q.retain_dbs(|d| d != 1);
        assert!(!q.contains(1, b"a") && q.contains(0, b"b"));
        assert!(q.bytes() > 0);
        q.retain_dbs(|_| false);
        while q.has_discarded() {
            q.free_discarded(100);
        }
        assert_eq!(q.bytes(), 0);
    }
}
