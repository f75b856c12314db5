//! Positions in the order of the window while slots that left it are still being
//! subtracted, without a pass over the members: only the members of those slots (the
//! pending members) have a window total below their raw one, so a position in the
//! corrected order is a position in the raw order (a sorted set, or next totals: both
//! count the entries ahead of a key in O(log N) and read a range by position) less the
//! pending members ahead of it there, plus the pending members ahead of it by their exact
//! totals. TSRANK.RANK and TSRANK.AROUND read this way while the pending slots hold few
//! fields: O(log N + count + pending members). Pure: no Redis imports.
//!
//! Owns: that arithmetic. May not touch: Redis (pure).

use std::cmp::Ordering;
use std::collections::HashMap;

use super::order::ahead;
use super::ranked::RankedSet;

/// The raw order of a board, as the corrected order reads it.
pub trait RawOrder {
    /// How many entries rank strictly ahead of `(total, member)`, present or not.
    fn ahead_of(&mut self, total: i64, member: &[u8]) -> usize;
    /// The `(member, raw total)` entries at positions `from .. from + len` (fewer past
    /// the end).
    fn rows(&mut self, from: usize, len: usize) -> Vec<(Vec<u8>, i64)>;
}

/// Next totals as a raw order.
impl RawOrder for &RankedSet {
    fn ahead_of(&mut self, total: i64, member: &[u8]) -> usize {
        RankedSet::ahead_of(self, total, member)
    }

    fn rows(&mut self, from: usize, len: usize) -> Vec<(Vec<u8>, i64)> {
        self.top(from, len).map(|(m, t)| (m.to_vec(), t)).collect()
    }
}

/// The pending members: each one's raw total and exact window total, once each.
pub struct Pending {
    members: HashMap<Vec<u8>, (i64, i64)>,
    /// The pending members with a positive exact total, in leaderboard order.
    ranked: Vec<(Vec<u8>, i64)>,
}

impl Pending {
    /// From `(member, raw, exact)` of every pending member (a member given twice counts
    /// once, as its last).
    pub fn new(members: impl IntoIterator<Item = (Vec<u8>, i64, i64)>) -> Pending {
        let members: HashMap<Vec<u8>, (i64, i64)> = members
            .into_iter()
            .map(|(member, raw, exact)| (member, (raw, exact)))
            .collect();
        let mut ranked: Vec<(Vec<u8>, i64)> = members
            .iter()
            .filter(|(_, &(_, exact))| exact > 0)
            .map(|(member, &(_, exact))| (member.clone(), exact))
            .collect();
        ranked.sort_by(|a, b| ahead((b.1, &b.0), (a.1, &a.0)));
        Pending { members, ranked }
    }

    /// Each pending member's `(raw, exact)` totals.
    pub fn totals(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.members.values().copied()
    }

    /// How many pending members rank ahead of `key` by their exact totals.
    fn ahead_exact(&self, key: (i64, &[u8])) -> usize {
        self.ranked
            .partition_point(|(m, t)| ahead((*t, m), key) == Ordering::Greater)
    }
}

/// The position (0 = first) of `key`, a member and its exact window total, in the
/// corrected order.
pub fn corrected_rank(order: &mut impl RawOrder, pending: &Pending, key: (i64, &[u8])) -> usize {
    let raw_ahead = order.ahead_of(key.0, key.1);
    let left = pending
        .members
        .iter()
        .filter(|(m, &(raw, _))| ahead((raw, m), key) == Ordering::Greater)
        .count();
    raw_ahead.saturating_sub(left) + pending.ahead_exact(key)
}

/// TSRANK.AROUND in the corrected order: the `count` entries ahead of `key` (a member
/// and its positive exact total), `key` itself, and the `count` entries behind it, each
/// `(member, exact total)`, positive totals only.
pub fn corrected_around(
    order: &mut impl RawOrder,
    pending: &Pending,
    key: (i64, &[u8]),
    count: usize,
) -> Vec<(Vec<u8>, i64)> {
    let raw_ahead = order.ahead_of(key.0, key.1);
    let split = pending.ahead_exact(key);
    let (pending_ahead, pending_behind) = pending.ranked.split_at(split);
    let pending_behind = pending_behind.iter().filter(|(m, _)| m.as_slice() != key.1);

    // Ahead: the raw entries just ahead of the key that are not pending, nearest first,
    // merged with the pending members ahead; the nearest `count` of them.
    let mut above = raw_walk_up(order, pending, raw_ahead, count);
    above.reverse();
    let start = pending_ahead.len().saturating_sub(count);
    let mut rows = merge(above, pending_ahead.iter().skip(start).cloned());
    let first = rows.len().saturating_sub(count);
    rows.drain(..first);

    rows.push((key.1.to_vec(), key.0));
    let below = raw_walk_down(order, pending, raw_ahead, key.1, count);
    let below = merge(below, pending_behind.take(count).cloned());
    rows.extend(below.into_iter().take(count));
    rows
}

/// Rows read at a time by a walk of the raw order beyond what it needs at the least.
const WALK_PAGE: usize = 64;

/// At most `count` raw entries that are not pending, walking up from position `from - 1`
/// (the entry just ahead of the key), nearest first.
fn raw_walk_up(
    order: &mut impl RawOrder,
    pending: &Pending,
    from: usize,
    count: usize,
) -> Vec<(Vec<u8>, i64)> {
    let mut out = Vec::new();
    let mut end = from;
    while out.len() < count && end > 0 {
        let page = (count - out.len()).saturating_add(WALK_PAGE).min(end);
        let start = end - page;
        for row in order.rows(start, page).into_iter().rev() {
            if out.len() < count && !pending.members.contains_key(&row.0) {
                out.push(row);
            }
        }
        end = start;
    }
    out
}

/// At most `count` raw entries with a positive total that are not pending (nor `member`
/// itself), walking down from position `from`, in order.
fn raw_walk_down(
    order: &mut impl RawOrder,
    pending: &Pending,
    from: usize,
    member: &[u8],
    count: usize,
) -> Vec<(Vec<u8>, i64)> {
    let mut out = Vec::new();
    let mut at = from;
    while out.len() < count {
        let page = (count - out.len()).saturating_add(WALK_PAGE);
        let rows = order.rows(at, page);
        let read = rows.len();
        for row in rows {
            if row.1 <= 0 {
                return out;
            }
            let skip = row.0 == member || pending.members.contains_key(&row.0);
            if out.len() < count && !skip {
                out.push(row);
            }
        }
        if read < page {
            break;
        }
        at = at.saturating_add(read);
    }
    out
}

/// Two lists in leaderboard order merged into one.
fn merge(
    a: Vec<(Vec<u8>, i64)>,
    b: impl IntoIterator<Item = (Vec<u8>, i64)>,
) -> Vec<(Vec<u8>, i64)> {
    let mut out = Vec::with_capacity(a.len());
    let mut b = b.into_iter().peekable();
    for row in a {
        while let Some(next) =
            b.next_if(|n| ahead((n.1, &n.0), (row.1, &row.0)) == Ordering::Greater)
        {
            out.push(next);
        }
        out.push(row);
    }
    out.extend(b);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rank::model::sort_totals;
    use crate::testutil::Rng;

    type Row = (Vec<u8>, i64);
    /// A pending member, its raw and its exact total.
    type PendingRow = (Vec<u8>, i64, i64);

    /// The raw order as a sorted list (what a sorted set answers), counting its reads.
    struct Listed {
        rows: Vec<(Vec<u8>, i64)>,
        read: usize,
    }

    impl RawOrder for Listed {
        fn ahead_of(&mut self, total: i64, member: &[u8]) -> usize {
            let key = (total, member);
            self.rows
                .partition_point(|(m, t)| ahead((*t, m), key) == Ordering::Greater)
        }

        fn rows(&mut self, from: usize, len: usize) -> Vec<(Vec<u8>, i64)> {
            let rows: Vec<_> = self.rows.iter().skip(from).take(len).cloned().collect();
            self.read += rows.len();
            rows
        }
    }

    /// A seeded board: raw totals (some zero), and pending counts taken off some members
    /// (some down to zero or below), with large groups of equal totals.
    fn board(rng: &mut Rng, members: usize) -> (Vec<Row>, Vec<PendingRow>) {
        let spread = 1 + rng.below(6);
        let raw: Vec<(Vec<u8>, i64)> = (0..members)
            .map(|i| (format!("m{i}").into_bytes(), rng.below(spread)))
            .collect();
        let mut pending = Vec::new();
        for (m, r) in &raw {
            if rng.below(4) == 0 {
                pending.push((m.clone(), *r, r - rng.below(r + 2)));
            }
        }
        (raw, pending)
    }

    /// The raw order: every entry, zero totals last (a sorted set may hold them).
    fn listed(raw: &[(Vec<u8>, i64)]) -> Listed {
        let mut rows = raw.to_vec();
        rows.sort_by(|a, b| ahead((b.1, &b.0), (a.1, &a.0)));
        Listed { rows, read: 0 }
    }

    /// The exact window order by brute force.
    fn exact(raw: &[(Vec<u8>, i64)], pending: &[(Vec<u8>, i64, i64)]) -> Vec<(Vec<u8>, i64)> {
        let fixed: HashMap<&Vec<u8>, i64> = pending.iter().map(|(m, _, e)| (m, *e)).collect();
        sort_totals(
            raw.iter()
                .map(|(m, r)| (m.clone(), fixed.get(m).copied().unwrap_or(*r))),
        )
    }

    #[test]
    fn rank_and_around_equal_the_brute_force_order() {
        let mut rng = Rng(0x5eed_0a0d);
        for case in 0..300 {
            let members = 1 + rng.below(60) as usize;
            let (raw, pending) = board(&mut rng, members);
            let want = exact(&raw, &pending);
            let corrected = Pending::new(pending.clone());
            let mut next = RankedSet::default();
            for (member, total) in &raw {
                next.set(member, *total);
            }
            for (at, (member, total)) in want.iter().enumerate() {
                let mut order = listed(&raw);
                let key = (*total, member.as_slice());
                assert_eq!(
                    corrected_rank(&mut order, &corrected, key),
                    at,
                    "case {case}"
                );
                let count = rng.below(5) as usize;
                let from = at.saturating_sub(count);
                let to = (at + count + 1).min(want.len());
                assert_eq!(
                    corrected_around(&mut &next, &corrected, key, count),
                    want[from..to].to_vec(),
                    "case {case}: next totals"
                );
                assert_eq!(
                    corrected_around(&mut order, &corrected, key, count),
                    want[from..to].to_vec(),
                    "case {case}, {} count {count}",
                    String::from_utf8_lossy(member)
                );
            }
        }
    }

    #[test]
    fn around_reads_count_and_the_pending_members_not_the_board() {
        // 100k members in one tie group and 30 pending members: AROUND near the bottom
        // reads a few pages, not the rows ahead.
        let raw: Vec<(Vec<u8>, i64)> = (0..100_000)
            .map(|i| (format!("m{i:06}").into_bytes(), 3))
            .collect();
        let pending: Vec<_> = (0..30)
            .map(|i| (format!("m{:06}", i * 3000).into_bytes(), 3, 1))
            .collect();
        let want = exact(&raw, &pending);
        let corrected = Pending::new(pending.clone());
        let at = 90_000;
        let (member, total) = &want[at];
        let mut order = listed(&raw);
        let rows = corrected_around(&mut order, &corrected, (*total, member), 10);
        assert_eq!(rows, want[at - 10..=at + 10].to_vec());
        assert!(
            order.read < 4 * (10 + WALK_PAGE + 30),
            "read {}",
            order.read
        );
        assert_eq!(corrected_rank(&mut order, &corrected, (*total, member)), at);
    }

    #[test]
    fn a_pending_member_moves_down_past_its_tie_group() {
        // Totals 9, 7, 7, 5 before; `b` (7) loses 3 and ranks below `d` (5).
        let raw = [("a", 9), ("b", 7), ("c", 7), ("d", 5)]
            .map(|(m, t)| (m.as_bytes().to_vec(), t))
            .to_vec();
        let pending = vec![(b"b".to_vec(), 7, 4)];
        let corrected = Pending::new(pending);
        let mut order = listed(&raw);
        assert_eq!(corrected_rank(&mut order, &corrected, (4, b"b")), 3);
        assert_eq!(corrected_rank(&mut order, &corrected, (5, b"d")), 2);
        let rows = corrected_around(&mut order, &corrected, (5, b"d"), 1);
        assert_eq!(
            rows,
            vec![(b"c".to_vec(), 7), (b"d".to_vec(), 5), (b"b".to_vec(), 4)]
        );
    }
}
