//! Pure leaderboard (TSRANK) logic. No Redis imports: settings and bookkeeping, names of
//! derived keys, and the algorithms, over a [`BoardStore`] where they read and write the
//! keys (as the counter's run over `crate::counter::model::SlotStore`): the drain of a slot that
//! left the window, the recount of a quarantined board, an INCRBY's arithmetic, ranking
//! while an expired slot is still being subtracted, the totals of a quarantined board and
//! those without the oldest slot, the lifecycle jobs' queue, and a replica's announcements
//! of its primary's effects. The command layer (`rank/commands/`) opens the native keys,
//! calls these, records the effects and replies.
//!
//! Layout of one leaderboard `key` (all keys start with `key`, so a hash tag in `key`
//! keeps them in one cluster slot):
//! * `key`: a native sorted set of window totals (`ZREVRANGE key 0 9 WITHSCORES`);
//! * `key|meta`: a hash whose `_tally` field is `rank <window ms> <slot ms>` (the
//!   settings, never changed after CREATE) and whose `_slots` field is `<lo> <hi>`: the
//!   range of slot indexes that may still have a slot hash (`hi < lo`: none). Metas
//!   written before `_slots` existed hold all four numbers in `_tally` and no `_slots`
//!   ([`MetaLayout::FourNumberMarker`]): they load, and the next write of the range
//!   rewrites them in the current layout. Any other combination is not a leaderboard;
//! * `_edited` (present or not) on `key|meta`: the board is quarantined (see
//!   `rank/commands/lifecycle.rs`);
//! * `key|slot|<slot index>`: a hash `member -> count` of the events of one slot
//!   (slot index = slot start / slot length).
//!
//! Invariant: every existing slot hash has an index in the meta's `lo ..= hi`, and a slot
//! hash is created only where the meta hash is. So while a reshard splits a board between
//! two nodes, a slot index outside `lo ..= hi` has no hash on either node and may be
//! created; one inside that is missing may be on the other node (see `rank/commands/`).
//!
//! Exactness while an expiry is in progress: expiry subtracts a member's count from the
//! totals and removes the member from the expiring slot's hash in the same step. So at any
//! moment, what is not yet subtracted is exactly what remains in slot hashes that have
//! left the window ("pending" slots), and a member's window total is its sorted-set score
//! minus its counts in the pending slots.
//!
//! Owns: leaderboard arithmetic, key names and the meta's stored text. May not touch:
//! Redis (pure).

mod adjusted;
mod announced;
mod around;
mod board_id;
mod board_store;
mod capacity;
mod corrected;
mod discarded;
mod drain;
mod increment;
mod job_queue;
mod known_metas;
mod meta;
mod names;
mod next_fill;
mod next_totals;
mod order;
mod quarantine;
mod ranked;
mod recount;
mod removal;
mod totals;

pub use adjusted::{rank_adjusted, sort_totals, top_adjusted};
pub use announced::{member_positions, Announcements, Taken, MAX_ANNOUNCED};
pub use around::{above_adjusted, above_corrected, around_count, around_span, MAX_AROUND};
pub use board_id::BoardId;
pub use board_store::{BoardStore, DrainedSlot};
pub use capacity::{
    plan_write, positive_only, window_error, Held, Orders, Plan, SlotOrder, Target, FILL_IN_WRITE,
};
pub use corrected::{corrected_around, corrected_rank, Pending, RawOrder};
pub use drain::{drain_step, DrainScans};
pub use increment::{apply_increments, Incremented, MemberCounts};
pub use job_queue::{Job, JobQueue, LifecycleMemory, Resolution};
pub use known_metas::{KnownMetas, MetaOrigin};
pub use meta::{
    error_field, parse_error, validate_capacity, validate_settings, Meta, MetaLayout,
    ERROR_FIELD_PREFIX, MAX_CAPACITY, MAX_SLOTS, SPAN_WINDOWS,
};
pub use names::{
    base_of_meta, base_of_part, base_of_slot, has_hash_tag, may_be_part, meta_key, slot_key,
    KeyName, META_SUFFIX, PART_BYTE, SLOT_INFIX,
};
pub use next_fill::{fill_step, next_value, value_after_write, NextSource};
pub use next_totals::{Next, NextScan, NextTotals};
pub use order::{ahead, score_to_total, MAX_TOTAL};
pub use quarantine::{Quarantine, Rebuild, View};
pub use ranked::RankedSet;
pub use recount::{recount_members, recount_missing, set_to_sum, sums_over_slots};
pub use removal::{remove_totals, RemovalStore};
pub use totals::{Member, SteppedSort, Totals, TotalsBuilder};

#[cfg(test)]
mod tests;
