//! The arithmetic of TSRANK.INCRBY for one member: its count in the written slot, its
//! total and its counts in the slots that left the window, after each increment, and the
//! reply to it. Every increment is checked before anything is written: one that would
//! overflow a total or take a count below zero refuses the whole command.
//!
//! Owns: that arithmetic. May not touch: Redis (pure; the command layer reads the values
//! from the keys, writes and replicates them).

use std::collections::HashMap;

use crate::error::{Error, Result};

use super::order::MAX_TOTAL;

/// Above this many increments, repeated members are found through a map.
const LINEAR_LOOKUP_MAX: usize = 8;

/// One member of an INCRBY as the command layer holds it (its handles on the keys), with
/// the values the increments change.
pub trait Incremented {
    /// The member's name.
    fn name(&self) -> &[u8];
    /// Its values, changed in place.
    fn counts(&mut self) -> &mut MemberCounts;
}

/// The perform step of TSRANK.INCRBY: applies `pairs` (`(increment, member)`, in order;
/// a member may appear several times) to the members' stored values, which `current`
/// reads the first time a member appears. Returns every member once, in the order first
/// seen, and calls `reply` with each increment's answer (the member's exact window total
/// after it). The first refused increment (or unreadable member) refuses the command,
/// before anything is written.
pub fn apply_increments<'a, T: Incremented>(
    pairs: &[(i64, &'a [u8])],
    mut current: impl FnMut(&'a [u8]) -> Result<T>,
    mut reply: impl FnMut(i64),
) -> Result<Vec<T>> {
    let mut members: Vec<T> = Vec::with_capacity(pairs.len());
    let mut index_of: HashMap<&[u8], usize> = HashMap::new();
    let by_map = pairs.len() > LINEAR_LOOKUP_MAX;
    for &(increment, name) in pairs {
        let found = match by_map {
            true => index_of.get(name).copied(),
            false => members.iter().position(|m| m.name() == name),
        };
        let at = match found {
            Some(at) => at,
            None => {
                members.push(current(name)?);
                if by_map {
                    index_of.insert(name, members.len() - 1);
                }
                members.len() - 1
            }
        };
        let member = members
            .get_mut(at)
            .ok_or(Error::Internal("a member just found or added is missing"))?;
        reply(member.counts().add(increment)?);
    }
    Ok(members)
}

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

    /// A member as a unit test holds it: its name and values.
    #[derive(Debug, PartialEq)]
    struct Held(Vec<u8>, MemberCounts);

    impl Incremented for Held {
        fn name(&self) -> &[u8] {
            &self.0
        }
        fn counts(&mut self) -> &mut MemberCounts {
            &mut self.1
        }
    }

    /// What [`run`] answers: the members (as `(name, counts)`), the replies and how many
    /// reads were made.
    type Run = (Result<Vec<(String, MemberCounts)>>, Vec<i64>, usize);

    /// Runs `pairs` over stored values `(member, slot count, total, pending)`; answers
    /// the members (as `(name, counts)`), the replies and how many reads were made.
    fn run(pairs: &[(i64, &str)], stored: &[(&str, i64, i64, i64)]) -> Run {
        let pairs: Vec<(i64, &[u8])> = pairs.iter().map(|(i, m)| (*i, m.as_bytes())).collect();
        let mut reads = 0;
        let mut replies = Vec::new();
        let current = |name: &[u8]| {
            reads += 1;
            if name == b"unreadable" {
                return Err(Error::WrongType);
            }
            let found = stored.iter().find(|(m, ..)| m.as_bytes() == name);
            let values = found.map_or(MemberCounts::default(), |&(_, s, t, p)| counts(s, t, p));
            Ok(Held(name.to_vec(), values))
        };
        let members = apply_increments(&pairs, current, |r| replies.push(r));
        let members = members.map(|all| {
            (all.into_iter())
                .map(|Held(n, c)| (String::from_utf8_lossy(&n).into_owned(), c))
                .collect()
        });
        (members, replies, reads)
    }

    #[test]
    fn each_member_is_read_once_and_its_increments_accumulate_in_order() {
        let (members, replies, reads) = run(
            &[(2, "a"), (3, "b"), (-1, "a"), (4, "a")],
            &[("a", 1, 5, 2)],
        );
        assert_eq!(reads, 2);
        assert_eq!(replies, [5, 3, 4, 8]);
        let expected = vec![
            ("a".into(), counts(6, 10, 2)),
            ("b".into(), counts(3, 3, 0)),
        ];
        assert_eq!(members, Ok(expected));
    }

    #[test]
    fn many_members_are_found_through_a_map_with_the_same_answers() {
        let names: Vec<String> = (0..20).map(|i| format!("m{}", i % 7)).collect();
        let pairs: Vec<(i64, &str)> = names.iter().map(|n| (1, n.as_str())).collect();
        let (members, replies, reads) = run(&pairs, &[("m3", 0, 10, 4)]);
        assert_eq!(reads, 7);
        let members = members.unwrap_or_default();
        assert_eq!(members.len(), 7);
        // m3 appears at increments 3, 10 and 17: 10 - 4 pending, plus one each time.
        assert_eq!((replies[3], replies[10], replies[17]), (7, 8, 9));
        let m3 = members.iter().find(|(n, _)| n == "m3").map(|(_, c)| *c);
        assert_eq!(m3, Some(counts(3, 13, 4)));
        // The order first seen.
        let order: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(order, ["m0", "m1", "m2", "m3", "m4", "m5", "m6"]);
    }

    #[test]
    fn a_refused_increment_refuses_the_command_whatever_came_before() {
        let (members, replies, _) = run(&[(5, "a"), (-6, "a"), (1, "b")], &[]);
        assert_eq!(
            members,
            Err(Error::Invalid("count would go below zero".into()))
        );
        // The replies so far are the command layer's to drop: nothing was written.
        assert_eq!(replies, [5]);
        let (members, _, reads) = run(&[(1, "a"), (1, "unreadable"), (1, "c")], &[]);
        assert_eq!(members, Err(Error::WrongType));
        assert_eq!(reads, 2);
    }

    #[test]
    fn an_increment_inside_a_pending_slot_correction_answers_the_window_total() {
        // The member's whole total (12) is in a slot that left the window and is being
        // subtracted: the reply is what the window holds after the increment.
        let (members, replies, _) = run(&[(1, "a"), (1, "a")], &[("a", 0, 12, 12)]);
        assert_eq!(replies, [1, 2]);
        assert_eq!(members.map(|m| m[0].1), Ok(counts(2, 14, 12)));
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
