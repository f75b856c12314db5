//! The [`BoardStore`] over a board's keys: its sorted set, opened for writing, every write
//! recorded as `ZADD key total member ...` and `ZREM key member ...`, and the slot hashes
//! a caller holds open (see [`SlotCounts`]).
//!
//! Owns: the writes to the sorted set the pure algorithms make and their effects. May not
//! touch: the slot hashes (their owner, the [`SlotCounts`], reads or drains them);
//! replicates only through [`Batch`].

use redis_module::Context;

use crate::host::replicate::Batch;
use crate::host::store::{Key, RStr};
use crate::rank::model::{score_to_total, BoardStore};

/// The slot hashes a [`KeyBoard`] sums a member's counts over.
pub(super) trait SlotCounts {
    /// `member`'s counts summed over these slot hashes (see [`BoardStore::slot_sum`]).
    fn sum(&self, member: &RStr) -> i64;
}

/// A board as the pure algorithms see it over its keys: the sorted set `zset`, the slot
/// hashes `slots`, and the effects of the writes to the sorted set.
pub(super) struct KeyBoard<'a, S> {
    zset: &'a Key,
    pub(super) slots: S,
    set: Batch<'a>,
    removed: Batch<'a>,
}

impl<'a, S> KeyBoard<'a, S> {
    /// The board `base` whose sorted set `zset` is open for writing.
    pub(super) fn new(zset: &'a Key, base: &'a [u8], slots: S) -> Self {
        KeyBoard {
            zset,
            slots,
            set: Batch::new(c"ZADD", base),
            removed: Batch::new(c"ZREM", base),
        }
    }

    /// Replicates the writes to the sorted set: the `ZADD`, then the `ZREM`.
    pub(super) fn emit(&mut self, ctx: &Context) {
        self.set.effects.emit(ctx);
        self.removed.effects.emit(ctx);
    }
}

impl<S: SlotCounts> BoardStore for KeyBoard<'_, S> {
    type Member = RStr;

    fn member(&mut self, name: &[u8]) -> Option<RStr> {
        RStr::new(name)
    }

    fn total(&mut self, member: &RStr) -> Option<i64> {
        self.zset.zscore(member).map(score_to_total)
    }

    fn set_total(&mut self, name: &[u8], member: &RStr, total: i64) {
        self.zset.zadd(member, total as f64);
        self.set.entry().int(total).arg(name);
    }

    fn remove_total(&mut self, name: &[u8], member: &RStr) {
        self.zset.zrem(member);
        self.removed.entry().arg(name);
    }

    fn slot_sum(&mut self, member: &RStr) -> i64 {
        self.slots.sum(member)
    }
}
