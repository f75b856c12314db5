//! Where a leaderboard's data lives, as the pure algorithms see it: the [`BoardStore`]
//! trait (the native sorted set and slot hashes in the command layer, maps in the unit
//! tests), as the counter's logic sees its hash through `crate::counter::model::SlotStore`.
//!
//! Owns: that interface. May not touch: Redis (pure).

/// A board's totals (its sorted set) and the counts of the slot hashes a command or a
/// timer visit holds open. Tally's own writes go through it, and an implementation over
/// native keys records each as an effect.
pub trait BoardStore {
    /// A member as the store addresses it (a module string over native keys): made once
    /// for all the calls about one member.
    type Member;
    /// The handle of the member named `name`; `None` when it cannot be made (the member
    /// is then passed over, as a key the server cannot allocate).
    fn member(&mut self, name: &[u8]) -> Option<Self::Member>;
    /// `member`'s total in the sorted set, if it is there.
    fn total(&mut self, member: &Self::Member) -> Option<i64>;
    /// Sets `member`'s total (positive) in the sorted set.
    fn set_total(&mut self, name: &[u8], member: &Self::Member, total: i64);
    /// Removes `member` from the sorted set.
    fn remove_total(&mut self, name: &[u8], member: &Self::Member);
    /// `member`'s counts summed over the slot hashes the store holds open (0 where it has
    /// none; a value that is not a positive integer, a user's edit, counts as nothing).
    fn slot_sum(&mut self, member: &Self::Member) -> i64;
}

/// A board whose slot hash that left the window is being subtracted (see
/// `crate::rank::model::drain_step`): its fields go as they are subtracted.
pub trait DrainedSlot: BoardStore {
    /// Removes `member`'s field from the slot hash being drained.
    fn remove_count(&mut self, name: &[u8], member: &Self::Member);
}
