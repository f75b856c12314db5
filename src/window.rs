//! Pure slot and window arithmetic shared by every family. No Redis imports.
//!
//! Time is Unix milliseconds. A slot of length `len` is identified by its index
//! `floor(t / len)`; its start is `index * len` (slots are aligned to the epoch).
//! Arguments are bounded where they are parsed (timestamps in `[0, 2^53)`, durations and
//! kept spans at most 10,000 years), so on them nothing here comes near `i64`'s limits.
//! The arithmetic still saturates, so absurd stored values (a user's forged field) can
//! never overflow.
//!
//! Owns: slot and window arithmetic. May not touch: Redis (pure).

/// Index of the slot of length `len` containing `t`.
pub fn slot_index(t: i64, len: i64) -> i64 {
    t.div_euclid(len.max(1))
}

/// Start time of the slot with index `index`.
pub fn slot_start(index: i64, len: i64) -> i64 {
    index.saturating_mul(len)
}

/// Index of the oldest slot kept at `now` when `samples` slots are kept:
/// the kept slots are `first_kept ..= slot_index(now)`.
pub fn first_kept(now: i64, len: i64, samples: i64) -> i64 {
    slot_index(now, len)
        .saturating_sub(samples)
        .saturating_add(1)
}

/// The moment slot `index` stops being kept when `samples` slots are kept: from then on,
/// `first_kept(now) > index`.
pub fn leaves_at(index: i64, len: i64, samples: i64) -> i64 {
    slot_start(index.saturating_add(samples), len)
}

/// Number of whole slots of length `len` needed to cover `window` (ceil division).
pub fn slots_covering(window: i64, len: i64) -> i64 {
    let len = len.max(1);
    window / len + i64::from(window % len != 0)
}

/// Resolves the time a command acts at: `at` if given, else the server's `now`.
/// A time ahead of `now` by at most `max_future` is treated as `now`; further ahead is
/// refused (returns `None`).
pub fn effective_time(at: Option<i64>, now: i64, max_future: i64) -> Option<i64> {
    match at {
        None => Some(now),
        Some(t) if t <= now => Some(t),
        Some(t) if t.saturating_sub(now) <= max_future => Some(now),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_epoch_aligned() {
        assert_eq!(slot_index(0, 1000), 0);
        assert_eq!(slot_index(999, 1000), 0);
        assert_eq!(slot_index(1000, 1000), 1);
        assert_eq!(slot_index(-1, 1000), -1);
        assert_eq!(slot_start(slot_index(12_345, 5_000), 5_000), 10_000);
    }

    #[test]
    fn kept_range_and_leaving_agree() {
        let (len, samples) = (1000, 120);
        for now in [0i64, 999, 1000, 123_456_789] {
            let first = first_kept(now, len, samples);
            assert_eq!(slot_index(now, len) - first + 1, samples);
            // The oldest kept slot leaves exactly when the clock reaches leaves_at.
            let leave = leaves_at(first, len, samples);
            assert_eq!(first_kept(leave - 1, len, samples), first);
            assert_eq!(first_kept(leave, len, samples), first + 1);
        }
    }

    #[test]
    fn covering_rounds_up() {
        assert_eq!(slots_covering(5_000, 1_000), 5);
        assert_eq!(slots_covering(5_001, 1_000), 6);
        assert_eq!(slots_covering(1, 1_000), 1);
    }

    #[test]
    fn future_times_clamp_or_refuse() {
        assert_eq!(effective_time(None, 100, 10), Some(100));
        assert_eq!(effective_time(Some(50), 100, 10), Some(50));
        assert_eq!(effective_time(Some(110), 100, 10), Some(100));
        assert_eq!(effective_time(Some(111), 100, 10), None);
        assert_eq!(
            effective_time(Some(i64::MAX), i64::MAX - 5, 10),
            Some(i64::MAX - 5)
        );
    }

    #[test]
    fn extremes_saturate() {
        assert_eq!(leaves_at(i64::MAX, 1000, 120), i64::MAX);
        assert_eq!(first_kept(i64::MIN, 1, 100), i64::MIN + 1);
    }
}
