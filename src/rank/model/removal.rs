//! The perform step of TSRANK.REM on a board's totals: each member leaves the sorted set,
//! and the reply counts those that had a non-zero window total (its total less its counts
//! in the slots that left the window; on a board being rebuilt, whose totals are not yet
//! true, its sum over the live slots). The command layer removes their counts from the
//! slot hashes and replicates both.
//!
//! Owns: that count and the removal of totals. May not touch: Redis (pure).

/// A board as TSRANK.REM sees it.
pub trait RemovalStore {
    /// A member as the store addresses it.
    type Member;
    /// `member`'s total in the sorted set, if it is there.
    fn total(&mut self, member: &Self::Member) -> Option<i64>;
    /// `member`'s counts in the slots that left the window (still in its total).
    fn pending_sum(&mut self, member: &Self::Member) -> i64;
    /// `member`'s counts in the live slots.
    fn live_sum(&mut self, member: &Self::Member) -> i64;
    /// Removes `member` from the sorted set.
    fn remove_total(&mut self, member: &Self::Member);
}

/// Removes each of `members` (each once) from the totals; answers how many had a non-zero
/// window total (see the module doc). `rebuilding`: the board is being rebuilt in steps.
pub fn remove_totals<S: RemovalStore>(
    store: &mut S,
    members: &[S::Member],
    rebuilding: bool,
) -> i64 {
    let mut removed = 0;
    for member in members {
        if rebuilding && store.live_sum(member) > 0 {
            removed += 1;
        }
        let Some(total) = store.total(member) else {
            continue;
        };
        let window_total = total.max(0).saturating_sub(store.pending_sum(member));
        if !rebuilding && window_total > 0 {
            removed += 1;
        }
        store.remove_total(member);
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{MemBoard, Rng};

    /// Slots up to `draining` have left the window (still in the totals), later ones are
    /// live.
    impl RemovalStore for MemBoard {
        type Member = Vec<u8>;

        fn total(&mut self, member: &Vec<u8>) -> Option<i64> {
            self.totals.get(member).copied()
        }
        fn pending_sum(&mut self, member: &Vec<u8>) -> i64 {
            let pending: Vec<i64> = self
                .slots
                .keys()
                .copied()
                .filter(|i| *i <= self.draining)
                .collect();
            self.count_over(member, pending)
        }
        fn live_sum(&mut self, member: &Vec<u8>) -> i64 {
            let live: Vec<i64> = self
                .slots
                .keys()
                .copied()
                .filter(|i| *i > self.draining)
                .collect();
            self.count_over(member, live)
        }
        fn remove_total(&mut self, member: &Vec<u8>) {
            self.totals.remove(member);
            self.writes
                .push(format!("ZREM {}", String::from_utf8_lossy(member)));
        }
    }

    fn names(members: &[&str]) -> Vec<Vec<u8>> {
        members.iter().map(|m| m.as_bytes().to_vec()).collect()
    }

    #[test]
    fn only_members_with_a_window_total_count_but_all_leave() {
        let mut board = MemBoard {
            draining: 1,
            ..MemBoard::default()
        };
        board.incr(1, "old", 5); // all of it left the window, not yet subtracted
        board.incr(1, "both", 2);
        board.incr(2, "both", 3);
        board.incr(2, "live", 1);
        let removed = remove_totals(&mut board, &names(&["old", "both", "live", "none"]), false);
        assert_eq!(removed, 2);
        assert!(board.totals.is_empty());
        assert_eq!(board.writes, ["ZREM old", "ZREM both", "ZREM live"]);
    }

    #[test]
    fn on_a_board_being_rebuilt_the_live_slots_decide() {
        let mut board = MemBoard {
            draining: 1,
            ..MemBoard::default()
        };
        board.incr(2, "a", 3);
        board.incr(2, "b", 3);
        // Native edits: a's total gone, b's lowered, c's forged without counts.
        board.totals.remove(b"a".as_slice());
        board.totals.insert(b"b".to_vec(), 1);
        board.totals.insert(b"c".to_vec(), 9);
        let removed = remove_totals(&mut board, &names(&["a", "b", "c"]), true);
        assert_eq!(removed, 2);
        assert!(board.totals.is_empty());
        assert_eq!(board.writes, ["ZREM b", "ZREM c"]);
    }

    #[test]
    fn a_users_edit_in_a_pending_slot_counts_as_nothing() {
        let mut board = MemBoard {
            draining: 1,
            ..MemBoard::default()
        };
        board.incr(1, "m", 4);
        let slot = board.slots.entry(1).or_default();
        slot.insert(b"m".to_vec(), b"lots".to_vec());
        // The garbled pending count subtracts nothing: the whole total is in the window.
        assert_eq!(remove_totals(&mut board, &names(&["m"]), false), 1);
    }

    #[test]
    fn the_count_matches_the_window_totals_on_random_boards() {
        for seed in 0..10 {
            let mut rng = Rng(seed);
            let mut board = MemBoard {
                draining: 2,
                ..MemBoard::default()
            };
            for _ in 0..200 {
                let member = format!("m{}", rng.below(30));
                board.incr(1 + rng.below(4), &member, 1 + rng.below(5));
            }
            let members: Vec<Vec<u8>> = (0..40)
                .filter(|_| rng.below(2) == 0)
                .map(|i| format!("m{i}").into_bytes())
                .collect();
            let expected = members
                .iter()
                .filter(|m| board.count_over(m, [3, 4]) > 0)
                .count() as i64;
            let left: Vec<Vec<u8>> = board
                .totals
                .keys()
                .filter(|m| !members.contains(m))
                .cloned()
                .collect();
            assert_eq!(
                remove_totals(&mut board, &members, false),
                expected,
                "seed {seed}"
            );
            let now: Vec<Vec<u8>> = board.totals.keys().cloned().collect();
            assert_eq!(now, left);
        }
    }
}
