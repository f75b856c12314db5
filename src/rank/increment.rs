//! The arithmetic of TSRANK.INCRBY for one member: its count in the written slot, its
//! total and its counts in the slots that left the window, after each increment, and the
//! reply to it. Every increment is checked before anything is written: one that would
//! overflow a total or take a count below zero refuses the whole command.
//!
//! Owns: that arithmetic. May not touch: Redis (pure; the command layer reads the values
//! from the keys, writes and replicates them).

use crate::error::{Error, Result};

use super::MAX_TOTAL;

/// A member's stored values as one INCRBY changes them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemberCounts {
    /// Its count in the slot written (0: the field goes).
    pub slot_count: i64,
    /// Its total in the sorted set (0: it leaves the sorted set).
    pub total: i64,
    /// Its counts in the slots that left the window, still in `total` until drained.
    pub pending: i64,
}

impl MemberCounts {
    /// Adds `increment` (a member may be incremented several times in one command) and
    /// answers the member's exact window total after it: its total less its pending
    /// counts.
    pub fn add(&mut self, increment: i64) -> Result<i64> {
        self.slot_count = self.slot_count.saturating_add(increment);
        self.total = self.total.saturating_add(increment);
        if self.total > MAX_TOTAL {
            return Err(Error::Overflow);
        }
        // A total is the sum of the member's counts: it cannot go below 0 before its
        // count in the slot does (the second test is for a stored total that disagrees).
        if self.slot_count < 0 || self.total < 0 {
            return Err(Error::Invalid("count would go below zero".into()));
        }
        Ok(self.total.saturating_sub(self.pending))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(slot_count: i64, total: i64, pending: i64) -> MemberCounts {
        MemberCounts {
            slot_count,
            total,
            pending,
        }
    }

    #[test]
    fn an_increment_adds_to_the_slot_count_and_the_total_and_answers_the_window_total() {
        let mut member = counts(2, 10, 3);
        assert_eq!(member.add(5), Ok(12));
        assert_eq!(member, counts(7, 15, 3));
    }

    #[test]
    fn a_new_member_starts_from_nothing() {
        let mut member = MemberCounts::default();
        assert_eq!(member.add(1), Ok(1));
        assert_eq!(member, counts(1, 1, 0));
    }

    #[test]
    fn repeated_increments_of_one_member_accumulate_and_each_gets_its_reply() {
        let mut member = counts(0, 4, 4);
        let replies: Vec<i64> = [1, 2, -1, 10]
            .iter()
            .map(|&i| member.add(i).unwrap_or(i64::MIN))
            .collect();
        assert_eq!(replies, [1, 3, 2, 12]);
        assert_eq!(member, counts(12, 16, 4));
    }

    #[test]
    fn a_decrement_to_zero_empties_the_count_and_the_total() {
        let mut member = counts(3, 3, 0);
        assert_eq!(member.add(-3), Ok(0));
        assert_eq!(member, counts(0, 0, 0));
    }

    #[test]
    fn a_count_below_zero_is_refused_even_when_the_total_would_allow_it() {
        // The member has 8 in older slots but only 2 in the slot written.
        let mut member = counts(2, 10, 0);
        assert_eq!(
            member.add(-3),
            Err(Error::Invalid("count would go below zero".into()))
        );
    }

    #[test]
    fn a_total_below_zero_is_refused_when_a_user_lowered_it() {
        // A stored total that disagrees with the slots (a user's edit).
        let mut member = counts(5, 2, 0);
        assert!(member.add(-3).is_err());
    }

    #[test]
    fn a_total_past_the_exact_range_of_a_score_overflows() {
        let mut member = counts(0, MAX_TOTAL - 1, 0);
        assert_eq!(member.add(1), Ok(MAX_TOTAL));
        assert_eq!(member.add(1), Err(Error::Overflow));
        let mut member = counts(0, i64::MAX, 0);
        assert_eq!(member.add(i64::MAX), Err(Error::Overflow));
    }

    #[test]
    fn the_reply_leaves_out_what_is_still_pending() {
        // The oldest slot left the window with 7 of the member's 9, not yet drained.
        let mut member = counts(0, 9, 7);
        assert_eq!(member.add(1), Ok(3));
        let mut member = counts(i64::MIN + 1, 0, i64::MIN);
        assert!(member.add(1).is_err());
    }
}
