//! Totals and their order: what a sorted-set score holds and how a leaderboard ranks.
//!
//! Owns: that order. May not touch: Redis (pure).

use std::cmp::Ordering;

/// Totals are kept in sorted-set scores (doubles): integers are exact up to 2^53.
pub const MAX_TOTAL: i64 = 1 << 53;

/// A sorted-set score as an integer total (scores written by tally are integers).
pub fn score_to_total(score: f64) -> i64 {
    if score.is_nan() {
        return 0;
    }
    score.round().clamp(i64::MIN as f64, i64::MAX as f64) as i64
}

/// Leaderboard order: higher total first, ties by member descending (as `ZREVRANGE`).
/// `Ordering::Greater` means `a` ranks ahead of `b`.
pub fn ahead(a: (i64, &[u8]), b: (i64, &[u8])) -> Ordering {
    a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1))
}
