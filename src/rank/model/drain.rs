//! The drain of a slot that left the window: its counts are subtracted from the totals
//! member by member, in steps (a slot may hold a million members), each count removed
//! from the slot hash in the step that subtracts it. So at any moment what is not yet
//! subtracted is exactly what the slot hashes that left the window still hold, and a
//! member's window total is its total less its counts there (see `crate::rank::model`).
//!
//! Owns: one step of that subtraction. May not touch: Redis (pure; the command layer scans
//! the slot hash, bounds the steps by its deadline and replicates what the store records).

use std::collections::HashMap;
use std::mem::size_of;
use std::os::raw::c_int;

use crate::args::parse_i64;

use super::board_id::{BoardId, ENTRY_OVERHEAD};
use super::board_store::DrainedSlot;

/// Where the drains in steps stand, by board: the slot index being subtracted and the
/// resumable scan `C` of its hash (the timer's next visit goes on from there).
pub struct DrainScans<C> {
    scans: HashMap<BoardId, (i64, C)>,
}

impl<C> Default for DrainScans<C> {
    fn default() -> Self {
        DrainScans {
            scans: HashMap::new(),
        }
    }
}

impl<C> DrainScans<C> {
    pub fn bytes(&self) -> usize {
        self.scans.len() * (size_of::<BoardId>() + ENTRY_OVERHEAD)
    }

    /// Takes the saved scan of `board`'s expiring slot, if any.
    pub fn take(&mut self, board: &BoardId) -> Option<(i64, C)> {
        self.scans.remove(board)
    }

    /// Saves where the scan of `board`'s expiring slot `index` stopped.
    pub fn save(&mut self, board: BoardId, index: i64, cursor: C) {
        self.scans.insert(board, (index, cursor));
    }

    /// The board is gone.
    pub fn forget(&mut self, board: &BoardId) {
        self.scans.remove(board);
    }

    /// Keeps only the databases `keep` says to.
    pub fn retain_dbs(&mut self, keep: impl Fn(c_int) -> bool) {
        self.scans.retain(|(d, _), _| keep(*d));
    }

    /// Saved scans restart (SWAPDB).
    pub fn clear(&mut self) {
        self.scans.clear();
    }
}

/// Subtracts the fields `batch` of the slot hash being drained (`(member, value)`, as
/// scanned) from the totals and removes them from the slot. A total that reaches 0 leaves
/// the sorted set; a member the sorted set lacks (a user removed it) has nothing to
/// subtract from; a value that is not a positive integer (a user's edit) subtracts
/// nothing. Every field of the batch goes either way.
pub fn drain_step<S: DrainedSlot>(store: &mut S, batch: &[(Vec<u8>, Vec<u8>)]) {
    for (name, value) in batch {
        let Some(member) = store.member(name) else {
            continue;
        };
        let count = parse_i64(value).unwrap_or(0);
        if count > 0 {
            if let Some(total) = store.total(&member) {
                let left = total.saturating_sub(count);
                if left <= 0 {
                    store.remove_total(name, &member);
                } else {
                    store.set_total(name, &member, left);
                }
            }
        }
        store.remove_count(name, &member);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_saved_drain_is_taken_once_and_follows_its_database() {
        let mut scans = super::DrainScans::<u32>::default();
        let board = (0, b"b".to_vec());
        scans.save(board.clone(), 5, 77);
        scans.save((1, b"c".to_vec()), 6, 78);
        assert!(scans.bytes() > 0);
        assert_eq!(scans.take(&board), Some((5, 77)));
        assert_eq!(scans.take(&board), None);
        scans.retain_dbs(|d| d != 1);
        assert_eq!(scans.take(&(1, b"c".to_vec())), None);
        scans.save(board.clone(), 5, 1);
        scans.clear();
        assert_eq!(scans.bytes(), 0);
    }

    use super::*;
    use crate::testutil::{MemBoard, Rng};

    fn field(member: &str, value: &str) -> (Vec<u8>, Vec<u8>) {
        (member.into(), value.into())
    }

    /// A board with `counts` of member `m` in slots 0, 1, 2 (its total their sum),
    /// draining slot 0.
    fn with_counts(counts: [i64; 3]) -> MemBoard {
        let mut board = MemBoard::default();
        for (index, &count) in counts.iter().enumerate() {
            if count != 0 {
                board.incr(index as i64, "m", count);
            }
        }
        board
    }

    /// Drains the board's `draining` slot `step` fields at a time, calling `check` after
    /// every step.
    fn drain_all(board: &mut MemBoard, step: usize, mut check: impl FnMut(&MemBoard)) {
        while board.slots.contains_key(&board.draining) {
            let batch = board.scan_draining(step);
            drain_step(board, &batch);
            check(board);
        }
    }

    #[test]
    fn a_count_is_subtracted_from_its_total_and_leaves_the_slot_in_the_same_step() {
        let mut board = with_counts([3, 4, 0]);
        drain_step(&mut board, &[field("m", "3")]);
        assert_eq!(board.totals.get(&b"m"[..]), Some(&4));
        assert!(!board.slots.contains_key(&0), "an emptied slot hash goes");
        assert_eq!(board.writes, ["ZADD 4 m", "HDEL 0 m"]);
    }

    #[test]
    fn a_total_that_reaches_zero_leaves_the_sorted_set() {
        let mut board = with_counts([5, 0, 0]);
        drain_step(&mut board, &[field("m", "5")]);
        assert!(board.totals.is_empty());
        assert_eq!(board.writes, ["ZREM m", "HDEL 0 m"]);
    }

    #[test]
    fn a_total_a_user_lowered_below_the_count_leaves_rather_than_going_negative() {
        let mut board = with_counts([5, 2, 0]);
        board.totals.insert(b"m".to_vec(), 3);
        drain_step(&mut board, &[field("m", "5")]);
        assert!(board.totals.is_empty());
        assert_eq!(board.writes, ["ZREM m", "HDEL 0 m"]);
    }

    #[test]
    fn a_member_a_user_removed_from_the_sorted_set_only_loses_its_field() {
        let mut board = with_counts([5, 2, 0]);
        board.totals.clear();
        drain_step(&mut board, &[field("m", "5")]);
        assert!(board.totals.is_empty());
        assert_eq!(board.writes, ["HDEL 0 m"]);
    }

    #[test]
    fn a_value_that_is_not_a_positive_integer_subtracts_nothing_but_its_field_goes() {
        for value in ["0", "-5", "abc", "", "1.5", " 3", "99999999999999999999"] {
            let mut board = with_counts([5, 2, 0]);
            drain_step(&mut board, &[field("m", value)]);
            assert_eq!(board.totals.get(&b"m"[..]), Some(&7), "{value:?}");
            assert_eq!(board.writes, ["HDEL 0 m"], "{value:?}");
        }
    }

    #[test]
    fn the_largest_counts_saturate_instead_of_overflowing() {
        let mut board = with_counts([1, 0, 0]);
        board.totals.insert(b"m".to_vec(), i64::MIN + 1);
        drain_step(&mut board, &[field("m", &i64::MAX.to_string())]);
        assert!(board.totals.is_empty());
        let mut board = with_counts([1, 0, 0]);
        board.totals.insert(b"m".to_vec(), i64::MAX);
        drain_step(&mut board, &[field("m", "1")]);
        assert_eq!(board.totals.get(&b"m"[..]), Some(&(i64::MAX - 1)));
    }

    #[test]
    fn every_field_of_a_batch_goes_whatever_its_member() {
        let mut board = MemBoard::default();
        for (member, count) in [("a", 1), ("b", 2), ("c", 3)] {
            board.incr(0, member, count);
            board.incr(1, member, 10);
        }
        let batch = board.scan_draining(10);
        drain_step(&mut board, &batch);
        assert!(!board.slots.contains_key(&0));
        let totals: Vec<i64> = board.totals.values().copied().collect();
        assert_eq!(totals, [10, 10, 10]);
        assert_eq!(board.writes.len(), 6);
    }

    #[test]
    fn an_empty_batch_writes_nothing() {
        let mut board = with_counts([1, 2, 3]);
        drain_step(&mut board, &[]);
        assert!(board.writes.is_empty());
        assert_eq!(board.totals.get(&b"m"[..]), Some(&6));
    }

    /// A random board of `members` members over slots `0 .. slots`.
    fn random_board(rng: &mut Rng, members: i64, slots: i64, writes: usize) -> MemBoard {
        let mut board = MemBoard::default();
        for _ in 0..writes {
            let member = format!("m{}", rng.below(members));
            board.incr(rng.below(slots), &member, 1 + rng.below(1000));
        }
        board
    }

    /// Exactness while slots are drained: every member's total less its counts in the
    /// slots that left the window (`pending`) is its sum over the live slots (`live`).
    fn assert_exact(board: &MemBoard, pending: &[i64], live: std::ops::RangeInclusive<i64>) {
        for member in board.members() {
            let total = board.totals.get(&member).copied().unwrap_or(0);
            let corrected = total - board.count_over(&member, pending.iter().copied());
            let window = board.count_over(&member, live.clone());
            assert_eq!(corrected, window, "{}", String::from_utf8_lossy(&member));
            assert!(total >= 0);
        }
    }

    #[test]
    fn reads_stay_exact_at_every_step_of_a_large_slot_leaving() {
        let mut rng = Rng(7);
        for step in [1, 3, 64, 10_000] {
            let mut board = random_board(&mut rng, 300, 4, 2000);
            board.draining = 0;
            drain_all(&mut board, step, |board| assert_exact(board, &[0], 1..=3));
            assert_exact(&board, &[], 1..=3);
        }
    }

    #[test]
    fn a_slot_leaving_while_a_large_one_is_subtracted_is_corrected_by_reads_until_its_turn() {
        let mut rng = Rng(11);
        let mut board = random_board(&mut rng, 500, 5, 5000);
        board.draining = 0;
        // Half of slot 0 is subtracted, then slot 1 leaves the window too.
        let half = board.slots.get(&0).map_or(0, |s| s.len() / 2);
        for _ in 0..half {
            let batch = board.scan_draining(1);
            drain_step(&mut board, &batch);
            assert_exact(&board, &[0], 1..=4);
        }
        assert_exact(&board, &[0, 1], 2..=4);
        drain_all(&mut board, 7, |board| assert_exact(board, &[0, 1], 2..=4));
        board.draining = 1;
        drain_all(&mut board, 13, |board| assert_exact(board, &[1], 2..=4));
        assert_exact(&board, &[], 2..=4);
        // What is left is exactly the live slots' sums, and nothing is left at zero.
        for (member, &total) in &board.totals {
            assert!(total > 0);
            assert_eq!(total, board.count_over(member, 2..=4));
        }
    }

    #[test]
    fn writes_to_live_slots_between_drain_steps_keep_reads_exact() {
        let mut rng = Rng(23);
        let mut board = random_board(&mut rng, 200, 3, 2000);
        board.draining = 0;
        while board.slots.contains_key(&0) {
            let batch = board.scan_draining(5);
            drain_step(&mut board, &batch);
            // An INCRBY lands in the current slot meanwhile, for members old and new.
            let member = format!("m{}", rng.below(260));
            board.incr(2, &member, 1 + rng.below(50));
            assert_exact(&board, &[0], 1..=2);
        }
        assert_exact(&board, &[], 1..=2);
    }

    #[test]
    fn a_user_edit_of_the_draining_slot_costs_the_edited_counts_only() {
        let mut board = MemBoard::default();
        for member in ["a", "b", "c"] {
            board.incr(0, member, 5);
            board.incr(1, member, 1);
        }
        // A user garbles one count: the board is quarantined in truth, but the drain
        // still never makes a total negative or touches the other members.
        board
            .slots
            .entry(0)
            .or_default()
            .insert(b"b".to_vec(), b"x".to_vec());
        drain_all(&mut board, 2, |_| {});
        assert_eq!(board.totals.get(&b"a"[..]), Some(&1));
        assert_eq!(board.totals.get(&b"b"[..]), Some(&6));
        assert_eq!(board.totals.get(&b"c"[..]), Some(&1));
    }
}
