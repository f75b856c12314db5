//! Rebuilding a large quarantined leaderboard in steps: a write whose caller may write
//! every part of the board starts it, and from then on
//!
//! * every write keeps the members it touches exact: their total becomes their sum over
//!   every stored slot hash (`lo ..= hi`, the slots that left the window included, as on a
//!   healthy board), O(stored slots) per member, and the reply is that sum less the slots
//!   that left the window, as the one-pass repair (`repair`) would answer;
//! * the expiry timer walks the board in steps bounded by its deadline: phase 1 sets each
//!   member of the sorted set to its sum over the slot hashes (or removes it), phase 2
//!   walks the slot hashes and adds the members the sorted set lacks; then the board
//!   leaves quarantine and the usual drain subtracts the slots that left the window.
//!
//! A native edit meanwhile stops the rebuild (the board is plainly quarantined again, and
//! the next write starts over). The rebuild lives in memory only: after a restart or a
//! failover the meta's `_edited` field quarantines the board again and the next write
//! starts over. Reads meanwhile answer as for a quarantined board, from the sorted set
//! (exact for every member a write or the timer has set) unless the slots are few enough
//! for the read to sum them.
//!
//! Owns: the rebuild in steps and when a write uses it instead of `repair`. May not touch:
//! the slot hashes (read only), the meta hash (`meta` clears `_edited`); replicates only
//! through [`Effects`].

use std::os::raw::c_int;

use redis_module::Context;

use crate::error::Result;
use crate::expiry::{self, Visit};
use crate::host::replicate::Batch;
use crate::host::server::{monotonic_us, selected_db};
use crate::host::store::acl::Acl;
use crate::host::store::scan::HashCursor;
use crate::host::store::{Key, KeyKind, RStr};
use crate::rank::{
    meta_key, recount_members, recount_missing, score_to_total, slot_key, sums_over_slots,
    BoardStore, Meta,
};

use super::lifecycle::has_jobs;
use super::meta::mark_edited;
use super::slots::count_in;
use super::state::{self, BoardId, Rebuild};
use super::transit::Transit;
use super::view;

/// Up to this many fields in its slot hashes, a quarantined board is repaired by the write
/// itself, in one pass (about 5 us per field: a few milliseconds at most); above, it is
/// rebuilt in steps.
pub(super) const REPAIRED_AT_ONCE: usize = 1024;

/// How soon the timer looks again at a board whose cluster slot is moving.
const TRANSIT_RETRY_MS: i64 = 100;

/// The stored slot hashes of a board (`lo ..= hi`) with their indexes, opened for reading.
pub(super) type Stored = Vec<(i64, Key)>;

/// Called by a write on the quarantined board `base`: true if the board is rebuilt in
/// steps (started now or earlier), false if its slot hashes are few (the caller repairs
/// it in one pass). Checks the caller's write permission on every stored slot hash: the
/// rebuild writes what a user allowed only on `base|*` could not.
pub(super) fn begin(ctx: &Context, acl: &Acl, base: &[u8], meta: &Meta, now: i64) -> Result<bool> {
    let db = selected_db(ctx);
    let rebuilding = state::with(|s| s.is_rebuilding(db, base));
    if !rebuilding
        && (meta.is_empty()
            || view::fields_in(ctx, base, (meta.lo, meta.hi), REPAIRED_AT_ONCE) <= REPAIRED_AT_ONCE)
    {
        return Ok(false);
    }
    if !meta.is_empty() {
        for index in meta.lo..=meta.hi {
            acl.check_bytes(&slot_key(base, index), true)?;
        }
    }
    if !rebuilding {
        let cursor = HashCursor::new();
        state::with(|s| {
            // The timer's totals for reads would miss this write and the next ones.
            s.drop_view(db, base);
            s.put_rebuild((db, base.to_vec()), Rebuild::Members(cursor));
        });
        expiry::schedule(ctx, &meta_key(base), now);
    }
    Ok(true)
}

/// Opens the board's stored slot hashes `lo ..= hi` for reading (through the caller's
/// ACL), leaving out slot `except` (the one the caller writes, already open). A missing
/// one may be on the other node during a reshard: then the sums cannot be made here
/// (TRYAGAIN).
pub(super) fn open_stored(
    ctx: &Context,
    acl: &Acl,
    base: &[u8],
    (meta, except): (&Meta, Option<i64>),
    transit: &Transit,
) -> Result<Stored> {
    let mut stored = Vec::new();
    if meta.is_empty() {
        return Ok(stored);
    }
    for index in meta.lo..=meta.hi {
        if Some(index) == except {
            continue;
        }
        let slot = acl.open(ctx, &slot_key(base, index), false)?;
        match slot.kind() {
            KeyKind::Hash => stored.push((index, slot)),
            KeyKind::Empty => transit.missing()?,
            _ => {}
        }
    }
    Ok(stored)
}

/// `member`'s counts summed over `stored`: over every slot, and over the slots up to
/// `pending_end` (those that left the window).
pub(super) fn sums(stored: &[(i64, Key)], member: &RStr, pending_end: Option<i64>) -> (i64, i64) {
    let counts = stored
        .iter()
        .map(|(index, slot)| (*index, count_in(slot, member)));
    sums_over_slots(counts, pending_end)
}

/// A board being rebuilt, as the recount sees it (see `crate::rank::recount_members`): its
/// sorted set, opened for writing, every write recorded as `ZADD key total member ...` and
/// `ZREM key member ...`, and its stored slot hashes, read only.
struct Rebuilding<'a> {
    zset: &'a Key,
    stored: &'a [(i64, Key)],
    set: Batch<'a>,
    removed: Batch<'a>,
}

impl BoardStore for Rebuilding<'_> {
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
        sums(self.stored, member, None).0
    }
}

/// Timer visit of the board `(db, base)` being rebuilt: continues where the last visit
/// stopped until the deadline; once done, the board leaves quarantine.
pub(super) fn visit(
    ctx: &Context,
    db: c_int,
    base: &[u8],
    meta: &Meta,
    now: i64,
    deadline_us: u64,
) -> Visit {
    let board: BoardId = (db, base.to_vec());
    let Some(mut step) = state::with(|s| s.take_rebuild(&board)) else {
        return Visit::DueAt(now.saturating_add(1));
    };
    let put_back = |step: Rebuild| state::with(|s| s.put_rebuild(board.clone(), step));
    // During a reshard the board's keys may be split between two nodes.
    if Transit::new(ctx, &ctx.get_flags(), base).active() {
        put_back(step);
        return Visit::DueAt(now.saturating_add(TRANSIT_RETRY_MS));
    }
    let Some(zset) = Key::open_bytes(ctx, base, true) else {
        return Visit::Done;
    };
    if !matches!(zset.kind(), KeyKind::Empty | KeyKind::Zset) {
        // Overwritten by another type: a queued job removes the board.
        return Visit::DueAt(now.saturating_add(1));
    }
    let mut stored = Vec::new();
    if !meta.is_empty() {
        for index in meta.lo..=meta.hi {
            if let Some(slot) = Key::open_bytes(ctx, &slot_key(base, index), false) {
                if slot.kind() == KeyKind::Hash {
                    stored.push((index, slot));
                }
            }
        }
    }
    if has_jobs() {
        // Opening a key expired a part lazily: the queued job removes the board.
        put_back(step);
        return Visit::DueAt(now.saturating_add(1));
    }
    let mut board = Rebuilding {
        zset: &zset,
        stored: &stored,
        set: Batch::new(c"ZADD", base),
        removed: Batch::new(c"ZREM", base),
    };
    let mut batch = Vec::new();
    let done = loop {
        batch.clear();
        match &mut step {
            Rebuild::Members(cursor) => {
                let more = cursor.step(&zset, &mut batch);
                recount_members(&mut board, batch.iter().map(|(member, _)| &member[..]));
                if !more {
                    step = Rebuild::Slots {
                        index: meta.lo,
                        cursor: HashCursor::new(),
                    };
                }
            }
            Rebuild::Slots { index, cursor } => {
                // Members in the sorted set are exact already (phase 1, or a write since).
                let Some((at, slot)) = stored.iter().find(|(i, _)| *i >= *index) else {
                    break true;
                };
                if *at != *index {
                    // Slot `index` is gone (emptied by writes): the scan moves to the next.
                    *index = *at;
                    *cursor = HashCursor::new();
                }
                let more = cursor.step(slot, &mut batch);
                recount_missing(&mut board, batch.iter().map(|(member, _)| &member[..]));
                if !more {
                    *index = at.saturating_add(1);
                    *cursor = HashCursor::new();
                }
            }
        }
        if monotonic_us() >= deadline_us {
            break false;
        }
    };
    board.set.effects.emit(ctx);
    board.removed.effects.emit(ctx);
    drop((zset, stored));
    if !done {
        put_back(step);
        return Visit::Unfinished;
    }
    // Every member is its sum over the stored slots: the board is healthy again, and the
    // usual drain subtracts the slots that left the window.
    state::with(|s| s.lift_quarantine(db, base));
    mark_edited(ctx, base, false);
    meta.next_due().map_or(Visit::Done, Visit::DueAt)
}
