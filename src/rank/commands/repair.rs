//! The repair of a quarantined leaderboard: a recount of its totals from its slot hashes, as the
//! native edit may have made the sorted set disagree with them. One idea, three ways:
//!
//! * **at once** ([`at_once`]): a write to a small quarantined board rebuilds it before
//!   it writes: its totals become the sums of its live slot hashes (`slots::live_totals`,
//!   as a read of a small quarantined board sums them) and the slots that left the window
//!   go;
//! * **in steps, on the keys** ([`begin_in_steps`], [`rebuild_step`]): a write whose caller
//!   may write every part of a large board starts it, and from then on every write keeps
//!   the members it touches exact (their total becomes their sum over every stored slot
//!   hash, `lo ..= hi`, the slots that left the window included, as on a healthy board;
//!   the reply is that sum less the slots that left the window, as [`at_once`] would
//!   answer), while the expiry timer walks the board in steps bounded by its deadline:
//!   phase 1 sets each member of the sorted set to its sum over the slot hashes (or
//!   removes it), phase 2 walks the slot hashes and adds the members the sorted set
//!   lacks; then the board leaves quarantine and the usual drain subtracts the slots that
//!   left the window. A native edit meanwhile stops it (the board is plainly quarantined
//!   again, and the next write starts over). It lives in memory only: after a restart or
//!   a failover the meta's `_edited` field quarantines the board again and the next write
//!   starts over. Reads meanwhile answer as for a quarantined board;
//! * **in steps, in memory** ([`view_step`]): the totals of a large quarantined board for
//!   its reads, computed by the timer without writing a key (the edit may be a forgery by
//!   a user who may not touch the totals). Until they are done, the board answers from
//!   its sorted set, the board as tally last left it; once done, from them, until any
//!   event on the board's keys or the window's next move drops them.
//!
//! Owns: the recount and when each way is used. May not touch: the slot hashes (read
//! only, except the slots that left the window, which [`at_once`] deletes), the meta hash
//! (the caller saves the new range via `meta_hash`; `meta_hash::mark_edited` clears `_edited`);
//! replicates only through `Effects` and `Batch`.

use std::os::raw::c_int;
use std::rc::Rc;

use redis_module::Context;

use crate::error::Result;
use crate::expiry::{self, Visit};
use crate::host::replicate::Effects;
use crate::host::server::{monotonic_us, selected_db};
use crate::host::store::acl::Acl;
use crate::host::store::scan::HashCursor;
use crate::host::store::{Key, KeyKind, RStr};
use crate::rank::model::{
    meta_key, recount_members, recount_missing, slot_key, sums_over_slots, Meta, TotalsBuilder,
};
use crate::window::{slot_index, slot_start};

use super::key_board::{KeyBoard, SlotCounts};
use super::lifecycle::has_jobs;
use super::memory::{self, BoardId, Rebuild, View};
use super::meta_hash::mark_edited;
use super::slots::{count_in, live_totals, open_range};
use super::transit::Transit;

// ------------------------------------------------------------------- at once

/// Members per replicated `ZADD` of a rebuild (a board may have millions).
const ZADD_CHUNK: usize = 256;

/// Rebuilds the quarantined board `base` (sorted set `zset`, meta `meta`, whose range
/// is updated here): the totals become the sums of the live slot hashes, slots that left
/// the window are deleted, and the board leaves quarantine. The caller holds write
/// permission on every key touched (checked here for the slots). Costs one pass over the
/// board's stored data, once.
pub(super) fn at_once(
    ctx: &Context,
    acl: &Acl,
    zset: &Key,
    base: &[u8],
    meta: &mut Meta,
    now: i64,
    transit: &Transit,
) -> Result<()> {
    let totals = live_totals(ctx, acl, base, meta, meta.slots(), now, transit)?.abandon();
    let mut gone = Vec::new();
    if let Some((start, end)) = meta.pending_range(now) {
        for index in start..=end {
            let name = slot_key(base, index);
            let slot = acl.open(ctx, &name, true)?;
            if slot.kind() == KeyKind::Hash {
                slot.unlink();
                gone.push(name);
            }
        }
        meta.lo = end.saturating_add(1);
        if meta.hi < meta.lo {
            *meta = Meta::with_capacity(meta.window, meta.slot, meta.capacity);
        }
    }
    // The sorted set can be far larger than the slot hashes (a native ZADD quarantines the
    // board): freed in the background.
    zset.unlink();
    let mut effects = Effects::new();
    effects.command(c"UNLINK").arg(base);
    let rows: Vec<(i64, &[u8])> = totals
        .rows()
        .filter_map(|(member, total)| {
            let m = RStr::new(member)?;
            zset.zadd(&m, total as f64);
            Some((total, member))
        })
        .collect();
    for chunk in rows.chunks(ZADD_CHUNK) {
        effects.command(c"ZADD").arg(base);
        for &(total, member) in chunk {
            effects.int(total).arg(member);
        }
    }
    for name in &gone {
        effects.command(c"UNLINK").arg(name);
    }
    effects.emit(ctx);
    let db = selected_db(ctx);
    memory::quarantine(|q| q.lift(db, base));
    // The timer frees the totals it computed for the quarantined board, in steps.
    expiry::schedule(ctx, &meta_key(base), now);
    mark_edited(ctx, base, false);
    Ok(())
}

// ------------------------------------------------------------ in steps, on keys

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
pub(super) fn begin_in_steps(
    ctx: &Context,
    acl: &Acl,
    base: &[u8],
    meta: &Meta,
    now: i64,
) -> Result<bool> {
    let db = selected_db(ctx);
    let rebuilding = memory::quarantine(|q| q.is_rebuilding(db, base));
    if !rebuilding
        && (meta.is_empty()
            || fields_in(ctx, base, (meta.lo, meta.hi), REPAIRED_AT_ONCE) <= REPAIRED_AT_ONCE)
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
        memory::quarantine(|q| {
            // The timer's totals for reads would miss this write and the next ones.
            q.drop_view(db, base);
            q.put_rebuild((db, base.to_vec()), Rebuild::Members(cursor));
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
    let range = (!meta.is_empty()).then_some((meta.lo, meta.hi));
    open_range(ctx, acl, base, (range, except), transit)
}

/// `member`'s counts summed over `stored`: over every slot, and over the slots up to
/// `pending_end` (those that left the window).
pub(super) fn sums(stored: &[(i64, Key)], member: &RStr, pending_end: Option<i64>) -> (i64, i64) {
    let counts = stored
        .iter()
        .map(|(index, slot)| (*index, count_in(slot, member)));
    sums_over_slots(counts, pending_end)
}

/// The slot hashes of a board being rebuilt, as the recount sees them (see
/// `crate::rank::model::recount_members`): every stored one, read only.
impl SlotCounts for &[(i64, Key)] {
    fn sum(&self, member: &RStr) -> i64 {
        sums(self, member, None).0
    }
}

/// Timer visit of the board `(db, base)` being rebuilt: continues where the last visit
/// stopped until the deadline; once done, the board leaves quarantine.
pub(super) fn rebuild_step(
    ctx: &Context,
    db: c_int,
    base: &[u8],
    meta: &Meta,
    now: i64,
    deadline_us: u64,
) -> Visit {
    let board: BoardId = (db, base.to_vec());
    let Some(mut step) = memory::quarantine(|q| q.take_rebuild(&board)) else {
        return Visit::DueAt(now.saturating_add(1));
    };
    let put_back = |step: Rebuild| memory::quarantine(|q| q.put_rebuild(board.clone(), step));
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
    let mut board = KeyBoard::new(&zset, base, &stored[..]);
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
    board.emit(ctx);
    drop((zset, stored));
    if !done {
        put_back(step);
        return Visit::Unfinished;
    }
    // Every member is its sum over the stored slots: the board is healthy again, and the
    // usual drain subtracts the slots that left the window.
    memory::quarantine(|q| q.lift(db, base));
    mark_edited(ctx, base, false);
    meta.next_due().map_or(Visit::Done, Visit::DueAt)
}

// ---------------------------------------------------------- in steps, in memory

/// Rows ordered between two looks at the clock (each comparison may miss the cache twice
/// on a large board: 4096 took 4-5 ms with a million members).
const ORDER_WORK: usize = 256;

/// Up to this many slot hash fields, a read of a quarantined board sums its live slots
/// itself (exact at once, a few milliseconds at most); above, it uses the timer's totals.
pub(super) const SUMMED_BY_READS: usize = 2048;

/// Number of fields in the board's slot hashes `range`, counting no further than `limit`.
pub(super) fn fields_in(ctx: &Context, base: &[u8], range: (i64, i64), limit: usize) -> usize {
    let mut fields = 0usize;
    for index in range.0..=range.1 {
        if let Some(slot) = Key::open_bytes(ctx, &slot_key(base, index), false) {
            if slot.kind() == KeyKind::Hash {
                fields = fields.saturating_add(slot.len());
            }
        }
        if fields > limit {
            break;
        }
    }
    fields
}

/// Timer visit of the quarantined board `(db, base)`: continues (or starts) computing its
/// totals over the live slots until the deadline. Small boards need none (their reads sum
/// the slots themselves).
pub(super) fn view_step(
    ctx: &Context,
    db: c_int,
    base: &[u8],
    meta: &Meta,
    now: i64,
    deadline_us: u64,
) -> Visit {
    let board: BoardId = (db, base.to_vec());
    let Some(range) = meta.live_range(now) else {
        memory::quarantine(|q| q.drop_view(db, base));
        return Visit::Done;
    };
    // The window moves at the next slot start: the totals are computed again then.
    let moves_at = slot_start(slot_index(now, meta.slot).saturating_add(1), meta.slot);
    let (mut index, mut cursor, mut sums) = match memory::quarantine(|q| q.take_view(&board)) {
        Some(View::Ready { range: r, totals }) if r == range => {
            memory::quarantine(|q| q.put_view(board, View::Ready { range, totals }));
            return Visit::DueAt(moves_at);
        }
        Some(View::Building {
            range: r,
            index,
            cursor,
            sums,
        }) if r == range => (index, cursor, sums),
        _ => {
            let fields = fields_in(ctx, base, range, usize::MAX);
            if fields <= SUMMED_BY_READS {
                return Visit::Done;
            }
            (
                range.0,
                HashCursor::new(),
                Box::new(TotalsBuilder::with_capacity(fields)),
            )
        }
    };
    let mut batch = Vec::new();
    while index <= range.1 {
        let slot = Key::open_bytes(ctx, &slot_key(base, index), false);
        let mut more = false;
        if let Some(slot) = slot.filter(|s| s.kind() == KeyKind::Hash) {
            loop {
                batch.clear();
                more = cursor.step(&slot, &mut batch);
                for (member, count) in &batch {
                    sums.add(member, count);
                }
                if !more || monotonic_us() >= deadline_us {
                    break;
                }
            }
        }
        if !more {
            index = index.saturating_add(1);
            cursor = HashCursor::new();
        }
        if has_jobs() {
            // Opening a slot expired a part lazily: the queued job removes the board.
            return Visit::DueAt(now.saturating_add(1));
        }
        if index <= range.1 && monotonic_us() >= deadline_us {
            let view = View::Building {
                range,
                index,
                cursor,
                sums,
            };
            memory::quarantine(|q| q.put_view(board, view));
            return Visit::Unfinished;
        }
    }
    // Every slot is summed: order the totals, in steps too.
    while !sums.order_step(ORDER_WORK) {
        if monotonic_us() >= deadline_us {
            let view = View::Building {
                range,
                index,
                cursor,
                sums,
            };
            memory::quarantine(|q| q.put_view(board, view));
            return Visit::Unfinished;
        }
    }
    let totals = Rc::new(sums.finish());
    memory::quarantine(|q| q.put_view(board, View::Ready { range, totals }));
    Visit::DueAt(moves_at)
}
