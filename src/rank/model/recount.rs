//! The recount of a quarantined board: a member's total made again from the slot hashes
//! (the sorted set may have been edited by a user; the slots are what tally counted). The
//! rebuild in steps recounts the sorted set's members (phase 1), then the members only the
//! slot hashes hold (phase 2), and every write meanwhile recounts the members it touches.
//!
//! Owns: a member's sums over the slots and setting its total to them. May not touch:
//! Redis (pure; the command layer scans the keys, bounds the steps by its deadline and
//! replicates what the store records).

use super::board_store::BoardStore;

/// A member's counts `(slot index, count)` summed: over all of them, and over those of the
/// slots up to `pending_end` (the slots that left the window).
pub fn sums_over_slots(
    counts: impl IntoIterator<Item = (i64, i64)>,
    pending_end: Option<i64>,
) -> (i64, i64) {
    let (mut all, mut pending) = (0i64, 0i64);
    for (index, count) in counts {
        all = all.saturating_add(count);
        if pending_end.is_some_and(|end| index <= end) {
            pending = pending.saturating_add(count);
        }
    }
    (all, pending)
}

/// Sets `member`'s total to `sum` (removes it at 0 or below) if it differs; true if the
/// sorted set changed.
pub fn set_to_sum<S: BoardStore>(store: &mut S, name: &[u8], member: &S::Member, sum: i64) -> bool {
    let current = store.total(member);
    if sum <= 0 {
        if current.is_none() {
            return false;
        }
        store.remove_total(name, member);
    } else {
        if current == Some(sum) {
            return false;
        }
        store.set_total(name, member, sum);
    }
    true
}

/// Phase 1 of a rebuild, one step: each member of `names` (scanned from the sorted set)
/// gets its sum over every stored slot hash as its total.
pub fn recount_members<'a, S: BoardStore>(
    store: &mut S,
    names: impl IntoIterator<Item = &'a [u8]>,
) {
    for name in names {
        if let Some(member) = store.member(name) {
            let sum = store.slot_sum(&member);
            set_to_sum(store, name, &member, sum);
        }
    }
}

/// Phase 2 of a rebuild, one step: each member of `names` (scanned from a slot hash) that
/// the sorted set lacks gets its sum as its total. Members in the sorted set are exact
/// already (phase 1, or a write since).
pub fn recount_missing<'a, S: BoardStore>(
    store: &mut S,
    names: impl IntoIterator<Item = &'a [u8]>,
) {
    for name in names {
        let Some(member) = store.member(name) else {
            continue;
        };
        if store.total(&member).is_none() {
            let sum = store.slot_sum(&member);
            set_to_sum(store, name, &member, sum);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{MemBoard, Rng};

    fn names(board: &MemBoard) -> Vec<Vec<u8>> {
        board.totals.keys().cloned().collect()
    }

    /// The rebuild of `board` in steps of `step` members: phase 1 over the sorted set,
    /// phase 2 over each slot hash, `between` called after every step.
    fn rebuild(board: &mut MemBoard, step: usize, mut between: impl FnMut(&mut MemBoard)) {
        let members = names(board);
        for chunk in members.chunks(step.max(1)) {
            recount_members(board, chunk.iter().map(|m| &m[..]));
            between(board);
        }
        let indexes: Vec<i64> = board.slots.keys().copied().collect();
        for index in indexes {
            let fields: Vec<Vec<u8>> = board
                .slots
                .get(&index)
                .map(|slot| slot.keys().cloned().collect())
                .unwrap_or_default();
            for chunk in fields.chunks(step.max(1)) {
                recount_missing(board, chunk.iter().map(|m| &m[..]));
                between(board);
            }
        }
    }

    /// Every member's total is its sum over every slot hash, and no total is 0.
    fn assert_recounted(board: &MemBoard) {
        let slots: Vec<i64> = board.slots.keys().copied().collect();
        for member in board.members() {
            let sum = board.count_over(&member, slots.iter().copied());
            let total = board.totals.get(&member).copied();
            let expected = (sum > 0).then_some(sum);
            assert_eq!(total, expected, "{}", String::from_utf8_lossy(&member));
        }
    }

    /// A healthy random board, then a user's native edits of both the sorted set and the
    /// slot hashes: the quarantine a rebuild repairs.
    fn edited_board(rng: &mut Rng) -> MemBoard {
        let mut board = MemBoard::default();
        for _ in 0..3000 {
            let member = format!("m{}", rng.below(400));
            board.incr(rng.below(6), &member, 1 + rng.below(100));
        }
        for _ in 0..50 {
            let member = format!("m{}", rng.below(400)).into_bytes();
            match rng.below(4) {
                0 => {
                    board.totals.remove(&member);
                }
                1 => {
                    board.totals.insert(member, 1 + rng.below(1_000_000));
                }
                2 => {
                    let index = rng.below(6);
                    let slot = board.slots.entry(index).or_default();
                    slot.insert(member, b"garbage".to_vec());
                }
                _ => {
                    board
                        .totals
                        .insert(format!("stranger{}", rng.below(10)).into(), 5);
                }
            }
        }
        board
    }

    #[test]
    fn sums_split_the_counts_that_left_the_window() {
        let counts = [(3, 1), (4, 10), (5, 100), (6, 1000)];
        assert_eq!(sums_over_slots(counts, None), (1111, 0));
        assert_eq!(sums_over_slots(counts, Some(4)), (1111, 11));
        assert_eq!(sums_over_slots(counts, Some(2)), (1111, 0));
        assert_eq!(sums_over_slots(counts, Some(6)), (1111, 1111));
        assert_eq!(sums_over_slots([], Some(6)), (0, 0));
        assert_eq!(
            sums_over_slots([(1, i64::MAX), (2, i64::MAX)], Some(1)),
            (i64::MAX, i64::MAX)
        );
    }

    #[test]
    fn a_total_set_to_its_sum_writes_only_when_it_differs() {
        let mut board = MemBoard::default();
        let m = b"m".to_vec();
        assert!(set_to_sum(&mut board, b"m", &m, 5));
        assert!(!set_to_sum(&mut board, b"m", &m, 5));
        assert!(set_to_sum(&mut board, b"m", &m, 7));
        assert_eq!(board.totals.get(&m), Some(&7));
        assert!(set_to_sum(&mut board, b"m", &m, 0));
        assert!(board.totals.is_empty());
        assert!(!set_to_sum(&mut board, b"m", &m, 0));
        assert!(!set_to_sum(&mut board, b"m", &m, -3));
        assert_eq!(board.writes, ["ZADD 5 m", "ZADD 7 m", "ZREM m"]);
    }

    #[test]
    fn phase_one_sets_each_member_of_the_sorted_set_to_its_sum() {
        let mut board = MemBoard::default();
        board.incr(0, "a", 2);
        board.incr(1, "a", 3);
        board.totals.insert(b"a".to_vec(), 99);
        board.totals.insert(b"ghost".to_vec(), 4);
        recount_members(&mut board, [&b"a"[..], &b"ghost"[..]]);
        assert_eq!(board.totals.get(&b"a"[..]), Some(&5));
        assert!(!board.totals.contains_key(&b"ghost"[..]));
        assert_eq!(board.writes, ["ZADD 5 a", "ZREM ghost"]);
    }

    #[test]
    fn phase_two_adds_only_the_members_the_sorted_set_lacks() {
        let mut board = MemBoard::default();
        board.incr(0, "a", 2);
        board.incr(1, "b", 3);
        board.totals.remove(&b"b"[..]);
        // `a` is exact already (or set by a write since): phase 2 leaves it alone even
        // where it differs.
        board.totals.insert(b"a".to_vec(), 40);
        recount_missing(&mut board, [&b"a"[..], &b"b"[..]]);
        assert_eq!(board.totals.get(&b"a"[..]), Some(&40));
        assert_eq!(board.totals.get(&b"b"[..]), Some(&3));
        assert_eq!(board.writes, ["ZADD 3 b"]);
    }

    #[test]
    fn garbage_and_non_positive_counts_count_as_nothing() {
        let mut board = MemBoard::default();
        board.incr(0, "a", 2);
        for (index, value) in [(1, "x"), (2, "-4"), (3, "0"), (4, "2.5")] {
            let slot = board.slots.entry(index).or_default();
            slot.insert(b"a".to_vec(), value.into());
        }
        board.totals.insert(b"a".to_vec(), 1);
        recount_members(&mut board, [&b"a"[..]]);
        assert_eq!(board.totals.get(&b"a"[..]), Some(&2));
    }

    #[test]
    fn only_the_slot_hashes_held_open_count() {
        let mut board = MemBoard::default();
        board.incr(0, "a", 2);
        board.incr(1, "a", 3);
        board.incr(2, "a", 4);
        board.open = Some(vec![1, 2, 9]);
        recount_members(&mut board, [&b"a"[..]]);
        assert_eq!(board.totals.get(&b"a"[..]), Some(&7));
    }

    #[test]
    fn a_rebuild_in_any_steps_repairs_every_native_edit() {
        for (seed, step) in [(1, 1), (2, 7), (3, 100), (4, 100_000)] {
            let mut board = edited_board(&mut Rng(seed));
            rebuild(&mut board, step, |_| {});
            assert_recounted(&board);
        }
    }

    #[test]
    fn a_rebuild_run_twice_writes_nothing_the_second_time() {
        let mut board = edited_board(&mut Rng(5));
        rebuild(&mut board, 16, |_| {});
        board.writes.clear();
        rebuild(&mut board, 16, |_| {});
        assert!(board.writes.is_empty(), "{:?}", board.writes);
    }

    #[test]
    fn writes_during_a_rebuild_keep_the_members_they_touch_exact() {
        let mut rng = Rng(9);
        let mut board = edited_board(&mut rng);
        rebuild(&mut board, 10, |board| {
            // A TSRANK.INCRBY meanwhile: its member's total becomes its sum over every
            // stored slot with the new count (what the write path computes).
            let member = format!("m{}", rng.below(450));
            let slot = board.slots.entry(5).or_default();
            let count = slot.entry(member.clone().into()).or_insert(b"0".to_vec());
            let new = crate::args::parse_i64(count).unwrap_or(0).max(0) + 3;
            *count = new.to_string().into_bytes();
            let sum = board.count_over(member.as_bytes(), 0..=5);
            board.totals.insert(member.into(), sum);
        });
        assert_recounted(&board);
    }

    #[test]
    fn a_native_edit_during_a_rebuild_is_repaired_by_the_rebuild_that_starts_over() {
        let mut rng = Rng(13);
        let mut board = edited_board(&mut rng);
        // The first rebuild is cut short by a native edit after a few steps (the edit
        // stops it: the board is plainly quarantined again).
        let members = names(&board);
        for chunk in members.chunks(25).take(3) {
            recount_members(&mut board, chunk.iter().map(|m| &m[..]));
        }
        board.totals.insert(b"m1".to_vec(), 123_456);
        let slot = board.slots.entry(2).or_default();
        slot.insert(b"m2".to_vec(), b"77".to_vec());
        // The next write starts it over, and it repairs the edit too.
        rebuild(&mut board, 25, |_| {});
        assert_recounted(&board);
    }

    #[test]
    fn a_member_recounted_after_a_slot_hash_went_no_longer_counts_it() {
        let mut board = edited_board(&mut Rng(17));
        rebuild(&mut board, 30, |_| {});
        // A slot hash goes (emptied, or left out of the slots held open): recounting the
        // sorted set's members leaves every total exact over the slots that are left.
        board.slots.remove(&3);
        let members = names(&board);
        recount_members(&mut board, members.iter().map(|m| &m[..]));
        assert_recounted(&board);
    }

    /// The recount at once, in memory: every field of the slots `live` summed.
    fn summed(board: &MemBoard, live: &[i64]) -> crate::rank::model::Totals {
        let mut builder = crate::rank::model::TotalsBuilder::new();
        for index in live {
            for (member, value) in board.slots.get(index).into_iter().flatten() {
                builder.add(member, value);
            }
        }
        builder.finish()
    }

    #[test]
    fn the_recount_in_memory_and_the_rebuild_in_place_agree() {
        for seed in [21, 22, 23] {
            let mut board = edited_board(&mut Rng(seed));
            let live = [2, 3, 4, 5];
            let in_memory = summed(&board, &live);
            board.open = Some(live.to_vec());
            let members = board.members();
            recount_members(&mut board, members.iter().map(|m| &m[..]));
            for member in &members {
                let total = board.totals.get(member).copied().unwrap_or(0);
                assert_eq!(in_memory.get(member), total);
            }
            // Unordered rows and the leaderboard order hold the same members.
            let mut rows: Vec<(Vec<u8>, i64)> =
                in_memory.rows().map(|(m, t)| (m.to_vec(), t)).collect();
            rows.sort();
            let mut top: Vec<(Vec<u8>, i64)> = in_memory
                .top(0, usize::MAX)
                .map(|(m, t)| (m.to_vec(), t))
                .collect();
            assert_eq!(top, crate::rank::model::sort_totals(top.clone()));
            top.sort();
            assert_eq!(rows, top);
            assert_eq!(rows.len(), board.totals.len());
        }
    }
}
