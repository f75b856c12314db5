//! "You and your neighbours" and shared ranks: the arithmetic of TSRANK.AROUND (the slice of
//! leaderboard order around a member's position) and of TSRANK.RANK ... TIES (how many
//! members have a strictly higher total), over whichever totals a board answers from (its
//! sorted set, a quarantined board's computed totals, its next totals), and while slots
//! that left the window are still being subtracted (their counts corrected member by
//! member, as [`super::rank_adjusted`] and [`super::top_adjusted`] do). Pure: no Redis
//! imports.
//!
//! Owns: that arithmetic and AROUND's `count` bound. May not touch: Redis (pure).

use crate::error::{Error, Result};

/// The largest `count` of TSRANK.AROUND: at most `2 * MAX_AROUND + 1` rows.
pub const MAX_AROUND: i64 = 1000;

/// AROUND's `count`, checked: an integer from 0 to [`MAX_AROUND`].
pub fn around_count(count: i64) -> Result<usize> {
    if !(0..=MAX_AROUND).contains(&count) {
        return Err(Error::Invalid(format!(
            "count must be between 0 and {MAX_AROUND}"
        )));
    }
    Ok(count as usize)
}

/// The rows of leaderboard order AROUND answers for a member at position `rank` (0 =
/// first): `(offset, len)`, from `count` positions above it (fewer near the top) to
/// `count` below it (the reader stops at the last member).
pub fn around_span(rank: usize, count: usize) -> (usize, usize) {
    let offset = rank.saturating_sub(count);
    let len = (rank - offset).saturating_add(count).saturating_add(1);
    (offset, len)
}

/// The competition rank of a member whose exact total is `total`: how many of `members`
/// have an exact total strictly higher.
///
/// `members` yields `(member, raw score)` in leaderboard order (as a reverse walk of the
/// sorted set does); `adjust(member, raw)` gives the exact total, never above `raw`. Only a
/// member whose raw score is higher than `total` can be above it, so the walk stops at the
/// first that is not.
pub fn above_adjusted(
    members: impl Iterator<Item = (Vec<u8>, i64)>,
    total: i64,
    mut adjust: impl FnMut(&[u8], i64) -> i64,
) -> usize {
    let mut above = 0;
    for (member, raw) in members {
        if raw <= total {
            break;
        }
        if adjust(&member, raw) > total {
            above += 1;
        }
    }
    above
}

/// The competition rank of a member whose exact total is `total`, from the raw totals:
/// `raw_above` members have a raw total (sorted-set score, or next total) above `total`,
/// and only the members of the pending slots have an exact total below their raw one,
/// given as `(raw, exact)` once each. O(pending members), no pass over the others.
pub fn above_corrected(
    raw_above: usize,
    pending: impl IntoIterator<Item = (i64, i64)>,
    total: i64,
) -> usize {
    let (mut left, mut came) = (0usize, 0usize);
    for (raw, exact) in pending {
        left += usize::from(raw > total);
        came += usize::from(exact > total);
    }
    raw_above.saturating_sub(left).saturating_add(came)
}

/// The competition rank of `total` among totals in leaderboard order: the length of the
/// prefix of `totals` (a slice of totals, highest first) strictly higher, by binary search.
pub fn above_in(len: usize, total_at: impl Fn(usize) -> Option<i64>, total: i64) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if total_at(mid).is_some_and(|t| t > total) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rank::model::{rank_adjusted, sort_totals, top_adjusted};
    use crate::testutil::{MemBoard, Rng};

    /// The exact window totals of `board` once the slots `pending` are subtracted, in
    /// leaderboard order (the brute-force model).
    fn exact(board: &MemBoard, pending: &[i64]) -> Vec<(Vec<u8>, i64)> {
        sort_totals(board.totals.iter().map(|(m, &raw)| {
            let counted = board.count_over(m, pending.iter().copied());
            (m.clone(), raw - counted)
        }))
    }

    /// The raw walk of `board`'s sorted set, in leaderboard order.
    fn raw_walk(board: &MemBoard) -> impl Iterator<Item = (Vec<u8>, i64)> {
        let mut rows: Vec<(Vec<u8>, i64)> =
            board.totals.iter().map(|(m, &t)| (m.clone(), t)).collect();
        rows.sort_by(|a, b| crate::rank::model::ahead((b.1, &b.0), (a.1, &a.0)));
        rows.into_iter()
    }

    /// AROUND as the command layer composes it over a board with pending slots.
    fn around(
        board: &MemBoard,
        pending: &[i64],
        member: &[u8],
        count: usize,
    ) -> Vec<(Vec<u8>, i64)> {
        let adjust = |m: &[u8], raw: i64| raw - board.count_over(m, pending.iter().copied());
        let raw = board.totals.get(member).copied().unwrap_or(0);
        let total = adjust(member, raw);
        if total <= 0 {
            return Vec::new();
        }
        let rank = rank_adjusted(raw_walk(board), (total, member), adjust) as usize;
        let (offset, len) = around_span(rank, count);
        let rows = top_adjusted(raw_walk(board), offset + len, adjust);
        rows.into_iter().skip(offset).collect()
    }

    fn ties(board: &MemBoard, pending: &[i64], member: &[u8]) -> Option<usize> {
        let adjust = |m: &[u8], raw: i64| raw - board.count_over(m, pending.iter().copied());
        let total = adjust(member, board.totals.get(member).copied().unwrap_or(0));
        (total > 0).then(|| above_adjusted(raw_walk(board), total, adjust))
    }

    #[test]
    fn count_is_checked() {
        assert_eq!(around_count(0).ok(), Some(0));
        assert_eq!(around_count(1000).ok(), Some(1000));
        for bad in [-1, 1001, i64::MIN, i64::MAX] {
            assert_eq!(
                around_count(bad).map_err(|e| e.to_string()),
                Err("ERR count must be between 0 and 1000".to_string())
            );
        }
    }

    #[test]
    fn computed_and_next_totals_count_those_above() {
        let mut builder = crate::rank::model::TotalsBuilder::new();
        for (m, c) in [("a", "9"), ("b", "7"), ("c", "7"), ("d", "5"), ("e", "x")] {
            builder.add(m.as_bytes(), c.as_bytes());
        }
        let totals = builder.finish();
        let mut next = crate::rank::model::RankedSet::default();
        for (m, t) in [("a", 9), ("b", 7), ("c", 7), ("d", 5)] {
            next.set(m.as_bytes(), t);
        }
        let want = [0, 0, 1, 1, 3, 3, 4, 4];
        assert_eq!([10, 9, 8, 7, 6, 5, 4, 0].map(|t| totals.above(t)), want);
        assert_eq!([10, 9, 8, 7, 6, 5, 4, 0].map(|t| next.above(t)), want);
    }

    #[test]
    fn spans_stop_at_the_top() {
        assert_eq!(around_span(0, 2), (0, 3));
        assert_eq!(around_span(1, 2), (0, 4));
        assert_eq!(around_span(5, 2), (3, 5));
        assert_eq!(around_span(5, 0), (5, 1));
        assert_eq!(around_span(usize::MAX, 1000).1, 2001);
    }

    #[test]
    fn tie_ranks_share_a_place() {
        let mut board = MemBoard::default();
        for (m, t) in [("a", 9), ("b", 7), ("c", 7), ("d", 5)] {
            board.incr(1, m, t);
        }
        let got: Vec<Option<usize>> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|m| ties(&board, &[], m.as_bytes()))
            .collect();
        assert_eq!(got, vec![Some(0), Some(1), Some(1), Some(3), None]);
        let totals = [9, 7, 7, 5];
        let at = |i: usize| totals.get(i).copied();
        assert_eq!(above_in(4, at, 9), 0);
        assert_eq!(above_in(4, at, 7), 1);
        assert_eq!(above_in(4, at, 5), 3);
        assert_eq!(above_in(4, at, 1), 4);
        assert_eq!(above_in(0, at, 1), 0);
    }

    /// Seeded boards of a few slots, the oldest ones pending: AROUND and RANK ... TIES
    /// equal the brute-force model of the exact totals for every member and count.
    #[test]
    fn around_and_ties_equal_the_model_while_slots_are_pending() {
        let mut rng = Rng(11);
        for round in 0..60 {
            let mut board = MemBoard::default();
            let members = 1 + rng.below(40);
            for _ in 0..rng.below(120) {
                let m = format!("m{}", rng.below(members));
                board.incr(rng.below(4), &m, 1 + rng.below(5));
            }
            let pending: Vec<i64> = (0..rng.below(3)).collect();
            let want = exact(&board, &pending);
            for m in 0..members + 2 {
                let member = format!("m{m}").into_bytes();
                let at = want.iter().position(|(w, _)| *w == member);
                for count in [0usize, 1, 2, 5, 1000] {
                    let model = match at {
                        Some(i) => {
                            let lo = i.saturating_sub(count);
                            want[lo..(i + count + 1).min(want.len())].to_vec()
                        }
                        None => Vec::new(),
                    };
                    assert_eq!(
                        around(&board, &pending, &member, count),
                        model,
                        "round {round}"
                    );
                }
                let model = at.map(|i| want.iter().filter(|(_, t)| *t > want[i].1).count());
                assert_eq!(ties(&board, &pending, &member), model, "round {round}");
                if let Some(i) = at {
                    let total = want[i].1;
                    let raw_above = board.totals.values().filter(|&&t| t > total).count();
                    let touched = board.members().into_iter().filter(|m| {
                        pending
                            .iter()
                            .any(|p| board.slots.get(p).is_some_and(|s| s.contains_key(m)))
                    });
                    let corrections = touched.map(|m| {
                        let raw = board.totals.get(&m).copied().unwrap_or(0);
                        (raw, raw - board.count_over(&m, pending.iter().copied()))
                    });
                    assert_eq!(
                        above_corrected(raw_above, corrections, total),
                        want.iter().filter(|(_, t)| *t > total).count(),
                        "round {round}"
                    );
                }
            }
        }
    }
}
