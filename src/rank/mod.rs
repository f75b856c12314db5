//! Pure leaderboard (TSRANK) logic. No Redis imports: settings and bookkeeping, names of
//! derived keys, and the algorithms, over a [`BoardStore`] where they read and write the
//! keys (as the counter's run over `crate::counter::SlotStore`): the drain of a slot that
//! left the window, the recount of a quarantined board, an INCRBY's arithmetic, ranking
//! while an expired slot is still being subtracted, the totals of a quarantined board and
//! those without the oldest slot, the lifecycle jobs' queue, and a replica's announcements
//! of its primary's effects. The command layer (`commands/rank/`) opens the native keys,
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
//!   `commands/rank/lifecycle.rs`);
//! * `key|slot|<slot index>`: a hash `member -> count` of the events of one slot
//!   (slot index = slot start / slot length).
//!
//! Invariant: every existing slot hash has an index in the meta's `lo ..= hi`, and a slot
//! hash is created only where the meta hash is. So while a reshard splits a board between
//! two nodes, a slot index outside `lo ..= hi` has no hash on either node and may be
//! created; one inside that is missing may be on the other node (see `commands/rank/`).
//!
//! Exactness while an expiry is in progress: expiry subtracts a member's count from the
//! totals and removes the member from the expiring slot's hash in the same step. So at any
//! moment, what is not yet subtracted is exactly what remains in slot hashes that have
//! left the window ("pending" slots), and a member's window total is its sorted-set score
//! minus its counts in the pending slots.
//!
//! Owns: leaderboard arithmetic, key names and the meta's stored text. May not touch:
//! Redis (pure).

use std::cmp::Ordering;

mod adjusted;
mod announced;
mod board_store;
mod drain;
mod increment;
mod job_queue;
mod known_metas;
mod meta;
mod names;
mod next_totals;
mod quarantine;
mod ranked;
mod recount;
mod totals;

pub use adjusted::*;
pub use announced::{member_positions, Announcements, Taken, MAX_ANNOUNCED};
pub use board_store::{BoardStore, DrainedSlot};
pub use drain::{drain_step, DrainScans};
pub use increment::{apply_increments, Incremented, MemberCounts};
pub use job_queue::{Job, JobQueue, LifecycleMemory, Resolution};
pub use known_metas::{KnownMetas, MetaOrigin};
pub use meta::*;
pub use names::*;
pub use next_totals::{Next, NextScan, NextTotals};
pub use quarantine::{Quarantine, Rebuild, View};
pub use ranked::RankedSet;
pub use recount::{recount_members, recount_missing, set_to_sum, sums_over_slots};
pub use totals::*;

/// Suffix of the meta hash name.
pub const META_SUFFIX: &[u8] = b"|meta";
/// Infix of slot hash names: `key|slot|<index>`.
pub const SLOT_INFIX: &[u8] = b"|slot|";
/// At most this many slots in a window.
pub const MAX_SLOTS: i64 = 10_000;
/// Totals are kept in sorted-set scores (doubles): integers are exact up to 2^53.
pub const MAX_TOTAL: i64 = 1 << 53;
/// A meta's `hi - lo` stays below this many windows. Every slot index in between may be
/// probed by a read, so a span that does not fit its window is not a leaderboard (a forged
/// `rank 10000 1 0 1000000` would make every TOP walk a million names). Tally never writes
/// one: a write that would stretch the span this far waits for expiry (TRYAGAIN).
pub const SPAN_WINDOWS: i64 = 2;

/// A leaderboard in a database: (db, name its derived keys live under).
pub type BoardId = (std::os::raw::c_int, Vec<u8>);

/// Bookkeeping bytes of a hash-map entry besides its key and value (control byte, the
/// key's vector header, slack of the table): the family's memory estimates count it.
const ENTRY_OVERHEAD: usize = 40;

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

#[cfg(test)]
mod tests;
