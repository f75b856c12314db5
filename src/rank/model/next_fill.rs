//! How a board's totals without its oldest slot are filled and kept: for every member, its
//! total less its count in the excluded slot, read in steps from the board's keys (a pass
//! over the sorted set, over the slot hashes after the excluded one, or over the excluded
//! one itself), set again for each member a write changes, and settled again for each
//! member a replica's primary changed. The memory they live in is [`super::NextTotals`].
//!
//! Owns: those values and the order of the passes. May not touch: Redis (pure; the command
//! layer opens the keys, bounds the steps by its deadline and keeps the values).

use crate::args::parse_i64;

use super::next_totals::NextScan;

/// Where next totals read a board's keys: the sorted set, its slot hashes and the
/// excluded slot's counts.
pub trait NextSource {
    /// A resumable scan.
    type Cursor;
    /// A scan from the start.
    fn new_cursor(&self) -> Self::Cursor;
    /// One scan step over the sorted set: appends `(member, score)` to `out`; false once
    /// the scan is complete.
    fn scan_totals(&mut self, cursor: &mut Self::Cursor, out: &mut Vec<(Vec<u8>, Vec<u8>)>)
        -> bool;
    /// One scan step over slot hash `index`: appends `(member, count)` to `out`; false
    /// once the scan is complete or when there is no such hash.
    fn scan_slot(
        &mut self,
        index: i64,
        cursor: &mut Self::Cursor,
        out: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> bool;
    /// `member`'s total in the sorted set (0 if absent).
    fn total(&mut self, member: &[u8]) -> i64;
    /// `member`'s count in the excluded slot (a value that is not a positive integer, a
    /// user's edit, counts as nothing).
    fn excluded_count(&mut self, member: &[u8]) -> i64;
}

/// `member`'s total without the excluded slot, from the keys as they are now.
pub fn next_value<S: NextSource>(store: &mut S, member: &[u8]) -> i64 {
    let count = store.excluded_count(member);
    store.total(member).saturating_sub(count)
}

/// `member`'s total without the excluded slot after a write of its count in slot
/// `written` (now `count`) and of its total (now `total`): the count itself is left out
/// when the write went to the excluded slot, else its count there (`excluded_count`).
pub fn value_after_write(
    excluded: i64,
    written: i64,
    (count, total): (i64, i64),
    excluded_count: impl FnOnce() -> i64,
) -> i64 {
    let left_out = match excluded == written {
        true => count,
        false => excluded_count(),
    };
    total.saturating_sub(left_out)
}

/// One step of filling the totals without slot `excluded` (the board's slots go up to
/// `hi`): appends the `(member, value)` it read to `values`. False once `scan` is done.
pub fn fill_step<S: NextSource>(
    store: &mut S,
    excluded: i64,
    hi: i64,
    scan: &mut NextScan<S::Cursor>,
    values: &mut Vec<(Vec<u8>, i64)>,
) -> bool {
    let mut batch = Vec::new();
    match scan {
        NextScan::Slots { index, cursor } => {
            let more = store.scan_slot(*index, cursor, &mut batch);
            for (member, _) in batch {
                let value = next_value(store, &member);
                values.push((member, value));
            }
            if more {
                return true;
            }
            *index = index.saturating_add(1);
            *cursor = store.new_cursor();
            *index <= hi
        }
        NextScan::Totals(cursor) => {
            let more = store.scan_totals(cursor, &mut batch);
            for (member, _) in batch {
                let value = next_value(store, &member);
                values.push((member, value));
            }
            more
        }
        NextScan::Excluded(cursor) => {
            let more = store.scan_slot(excluded, cursor, &mut batch);
            for (member, count) in batch {
                let count = parse_i64(&count).unwrap_or(0).max(0);
                let value = store.total(&member).saturating_sub(count);
                values.push((member, value));
            }
            more
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::rank::model::{drain_step, RankedSet};
    use crate::testutil::{MemBoard, Rng};

    /// A healthy board: members `m0..m{members}` incremented at random in slots
    /// `1 ..= 4`, slot 1 the oldest (the excluded one, `draining`).
    fn board(seed: u64, members: i64, writes: usize) -> MemBoard {
        let mut rng = Rng(seed);
        let mut board = MemBoard {
            draining: 1,
            ..MemBoard::default()
        };
        for _ in 0..writes {
            let member = format!("m{}", rng.below(members));
            board.incr(1 + rng.below(4), &member, 1 + rng.below(9));
        }
        board
    }

    /// What next totals must hold: each member's total less its count in the excluded
    /// slot, where positive.
    fn expected(board: &MemBoard) -> BTreeMap<Vec<u8>, i64> {
        (board.totals.iter())
            .map(|(m, t)| (m.clone(), t - board.count(board.draining, m)))
            .filter(|(_, v)| *v > 0)
            .collect()
    }

    fn held(next: &RankedSet) -> BTreeMap<Vec<u8>, i64> {
        let rows = next.top(0, next.len());
        rows.map(|(m, t)| (m.to_vec(), t))
            .filter(|(_, t)| *t > 0)
            .collect()
    }

    /// Runs `scan` to its end (at most `steps` steps), setting the values read.
    fn fill(board: &mut MemBoard, scan: &mut NextScan<usize>, next: &mut RankedSet) -> usize {
        let mut steps = 0;
        loop {
            let mut values = Vec::new();
            let more = fill_step(board, board.draining, 4, scan, &mut values);
            for (member, value) in values {
                next.set(&member, value);
            }
            steps += 1;
            if !more {
                return steps;
            }
            assert!(steps < 10_000, "the fill never ends");
        }
    }

    /// The sorted set as next totals (what the `Excluded` pass starts from).
    fn copy_of_totals(board: &MemBoard) -> RankedSet {
        let mut next = RankedSet::default();
        for (member, total) in &board.totals {
            next.set(member, *total);
        }
        next
    }

    #[test]
    fn a_pass_over_the_sorted_set_fills_every_value() {
        for seed in 0..5 {
            let mut board = board(seed, 40, 300);
            let mut next = RankedSet::default();
            let steps = fill(&mut board, &mut NextScan::Totals(0), &mut next);
            assert!(steps > 1, "filled in one step");
            assert_eq!(held(&next), expected(&board), "seed {seed}");
        }
    }

    #[test]
    fn a_pass_over_the_later_slots_fills_every_value_and_crosses_gaps() {
        for seed in 0..5 {
            let mut board = board(seed, 40, 300);
            // A gap: slot 3 was never written (or emptied by REM).
            if let Some(gone) = board.slots.remove(&3) {
                for (member, value) in gone {
                    let count = crate::args::parse_i64(&value).unwrap_or(0);
                    let total = board.totals.get(&member).copied().unwrap_or(0) - count;
                    match total > 0 {
                        true => board.totals.insert(member, total),
                        false => board.totals.remove(&member),
                    };
                }
            }
            let mut next = RankedSet::default();
            let mut scan = NextScan::Slots {
                index: 2,
                cursor: 0,
            };
            fill(&mut board, &mut scan, &mut next);
            assert_eq!(held(&next), expected(&board), "seed {seed}");
        }
    }

    #[test]
    fn a_pass_over_the_excluded_slot_corrects_a_copy_of_the_sorted_set() {
        for seed in 0..5 {
            let mut board = board(seed, 40, 300);
            let mut next = copy_of_totals(&board);
            fill(&mut board, &mut NextScan::Excluded(0), &mut next);
            assert_eq!(held(&next), expected(&board), "seed {seed}");
        }
    }

    #[test]
    fn writes_between_fill_steps_keep_the_values_exact() {
        for seed in 0..5 {
            let mut rng = Rng(100 + seed);
            let mut board = board(seed, 40, 300);
            for start in 0..3 {
                let mut next = match start {
                    2 => copy_of_totals(&board),
                    _ => RankedSet::default(),
                };
                let mut scan = match start {
                    0 => NextScan::Totals(0),
                    1 => NextScan::Slots {
                        index: 2,
                        cursor: 0,
                    },
                    _ => NextScan::Excluded(0),
                };
                loop {
                    let mut values = Vec::new();
                    let more = fill_step(&mut board, 1, 4, &mut scan, &mut values);
                    for (member, value) in values {
                        next.set(&member, value);
                    }
                    // A write (new members too, the excluded slot too) follows at once.
                    let member = format!("m{}", rng.below(60));
                    let index = 1 + rng.below(4);
                    board.incr(index, &member, 1 + rng.below(5));
                    let count = board.count(index, member.as_bytes());
                    let total = board.totals.get(member.as_bytes()).copied().unwrap_or(0);
                    let excluded = board.count(1, member.as_bytes());
                    let value = value_after_write(1, index, (count, total), || excluded);
                    next.set(member.as_bytes(), value);
                    if !more {
                        break;
                    }
                }
                assert_eq!(held(&next), expected(&board), "seed {seed} pass {start}");
            }
        }
    }

    #[test]
    fn a_write_to_the_excluded_slot_leaves_out_its_own_count() {
        let mut asked = false;
        assert_eq!(
            value_after_write(7, 7, (4, 10), || {
                asked = true;
                99
            }),
            6
        );
        assert!(!asked, "the excluded slot was written: its count is known");
        assert_eq!(value_after_write(7, 8, (4, 10), || 3), 7);
        // A member only in the excluded slot has no total without it.
        assert_eq!(value_after_write(7, 8, (4, 3), || 3), 0);
    }

    #[test]
    fn the_values_stay_exact_while_the_excluded_slot_is_subtracted() {
        // The slot leaves the window: the timer subtracts it in steps, each count leaving
        // the slot hash in the step that subtracts it, so no value changes.
        for seed in 0..5 {
            let mut board = board(seed, 60, 500);
            let mut next = RankedSet::default();
            fill(&mut board, &mut NextScan::Totals(0), &mut next);
            let before = held(&next);
            while board.slots.contains_key(&1) {
                let batch = board.scan_draining(4);
                drain_step(&mut board, &batch);
                assert_eq!(expected(&board), before, "seed {seed}");
            }
            assert_eq!(held(&next), expected(&board));
            // Subtracted and gone: the next totals equal the sorted set.
            let totals: BTreeMap<Vec<u8>, i64> = board.totals.clone().into_iter().collect();
            assert_eq!(held(&next), totals);
        }
    }

    #[test]
    fn a_replica_settles_the_members_its_primary_changed() {
        // A replica's next totals do not see the primary's effects as values: the members
        // they name are marked dirty and set again from the keys (`next_value`).
        for seed in 0..5 {
            let mut rng = Rng(200 + seed);
            let mut board = board(seed, 40, 300);
            let mut next = RankedSet::default();
            fill(&mut board, &mut NextScan::Totals(0), &mut next);
            let mut dirty = std::collections::BTreeSet::new();
            for round in 0..50 {
                match round % 3 {
                    // The primary's INCRBY (ZADD and HSET effects).
                    0 | 1 => {
                        let member = format!("m{}", rng.below(50));
                        board.incr(1 + rng.below(4), &member, 1 + rng.below(5));
                        dirty.insert(member.into_bytes());
                    }
                    // The primary's drain of the excluded slot (ZADD/ZREM and HDEL).
                    _ => {
                        let batch = board.scan_draining(2);
                        dirty.extend(batch.iter().map(|(m, _)| m.clone()));
                        drain_step(&mut board, &batch);
                    }
                }
            }
            for member in &dirty {
                let value = next_value(&mut board, member);
                next.set(member, value);
            }
            assert_eq!(held(&next), expected(&board), "seed {seed}");
        }
    }

    #[test]
    fn a_users_edit_of_the_excluded_slot_counts_as_nothing() {
        let mut board = board(1, 10, 60);
        let member = b"m1".to_vec();
        let slot = board.slots.entry(1).or_default();
        slot.insert(member.clone(), b"garbage".to_vec());
        slot.insert(b"m2".to_vec(), b"-5".to_vec());
        let total = board.totals.get(&member).copied().unwrap_or(0);
        assert_eq!(next_value(&mut board, &member), total);
        let mut next = copy_of_totals(&board);
        fill(&mut board, &mut NextScan::Excluded(0), &mut next);
        assert_eq!(held(&next), expected(&board));
    }

    #[test]
    fn a_missing_member_or_slot_has_nothing_to_leave_out() {
        let mut board = board(2, 10, 60);
        assert_eq!(next_value(&mut board, b"nobody"), 0);
        board.slots.remove(&1);
        let totals: BTreeMap<Vec<u8>, i64> = board.totals.clone().into_iter().collect();
        let mut next = RankedSet::default();
        fill(&mut board, &mut NextScan::Totals(0), &mut next);
        assert_eq!(held(&next), totals);
        // A pass over a missing excluded slot ends at once.
        let mut values = Vec::new();
        assert!(!fill_step(
            &mut board,
            1,
            4,
            &mut NextScan::Excluded(0),
            &mut values
        ));
        assert!(values.is_empty());
    }
}
