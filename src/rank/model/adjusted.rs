//! Ranking while an expired slot is still being subtracted: a member's window total is
//! its sorted-set score minus its counts in the pending slots. Pure: no Redis imports.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use super::order::ahead;

#[derive(Debug, PartialEq, Eq)]
struct Entry {
    total: i64,
    member: Vec<u8>,
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        ahead((self.total, &self.member), (other.total, &other.member))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The `want` best `(member, total)` of `members`, best first.
///
/// `members` yields `(member, raw score)` in leaderboard order (as a reverse walk of the
/// sorted set does); `adjust(member, raw)` gives the exact total, which is never above
/// `raw`. Threshold algorithm: the walk stops once the next raw score (with its member)
/// ranks below the `want`-th best exact total found so far, since no later member can
/// beat it. Members whose total is not positive are skipped.
pub fn top_adjusted(
    members: impl Iterator<Item = (Vec<u8>, i64)>,
    want: usize,
    mut adjust: impl FnMut(&[u8], i64) -> i64,
) -> Vec<(Vec<u8>, i64)> {
    if want == 0 {
        return Vec::new();
    }
    let mut best: BinaryHeap<Reverse<Entry>> = BinaryHeap::new();
    for (member, raw) in members {
        if raw <= 0 {
            break;
        }
        if best.len() >= want {
            if let Some(Reverse(worst)) = best.peek() {
                if ahead((raw, &member), (worst.total, &worst.member)) == Ordering::Less {
                    break;
                }
            }
        }
        let total = adjust(&member, raw);
        if total <= 0 {
            continue;
        }
        best.push(Reverse(Entry { total, member }));
        if best.len() > want {
            best.pop();
        }
    }
    let mut out: Vec<Entry> = best.into_iter().map(|Reverse(e)| e).collect();
    out.sort_by(|a, b| b.cmp(a));
    out.into_iter().map(|e| (e.member, e.total)).collect()
}

/// Rank (0 = best) of a member whose exact total is `total`, among `members` (leaderboard
/// order, raw scores, as for [`top_adjusted`]). Only members whose raw score ranks ahead of
/// `(total, member)` can be ahead, so the walk stops at the first one that does not.
pub fn rank_adjusted(
    members: impl Iterator<Item = (Vec<u8>, i64)>,
    target: (i64, &[u8]),
    mut adjust: impl FnMut(&[u8], i64) -> i64,
) -> i64 {
    let mut rank = 0;
    for (member, raw) in members {
        if ahead((raw, &member), target) != Ordering::Greater {
            break;
        }
        let total = adjust(&member, raw);
        if total > 0 && ahead((total, &member), target) == Ordering::Greater {
            rank += 1;
        }
    }
    rank
}

/// Every `(member, total)` of `totals` in leaderboard order, positive totals only.
pub fn sort_totals(totals: impl IntoIterator<Item = (Vec<u8>, i64)>) -> Vec<(Vec<u8>, i64)> {
    let mut out: Vec<(Vec<u8>, i64)> = totals.into_iter().filter(|(_, t)| *t > 0).collect();
    out.sort_by(|a, b| ahead((b.1, &b.0), (a.1, &a.0)));
    out
}
