//! The totals of a large quarantined board, computed by the expiry timer in steps bounded
//! by the tick's deadline, in memory (the recount a read of a small board makes at once,
//! `slots::live_totals`, here in steps): the timer writes no key of a quarantined board (the
//! edit may be a forgery by a user who may not touch the totals). Until they are done, the
//! board answers from its sorted set, the board as tally last left it; once done, from
//! them, until any event on the board's keys or the window's next move drops them.
//!
//! Owns: that computation and when a quarantined board is large enough to need it. May
//! not touch: keys (opens slot hashes read-only), replication.

use std::os::raw::c_int;
use std::rc::Rc;

use redis_module::Context;

use crate::expiry::Visit;
use crate::host::server::monotonic_us;
use crate::host::store::scan::HashCursor;
use crate::host::store::{Key, KeyKind};
use crate::rank::{slot_key, Meta, TotalsBuilder};
use crate::window::{slot_index, slot_start};

use super::lifecycle::has_jobs;
use super::state::{self, BoardId, View};

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
pub(super) fn visit(
    ctx: &Context,
    db: c_int,
    base: &[u8],
    meta: &Meta,
    now: i64,
    deadline_us: u64,
) -> Visit {
    let board: BoardId = (db, base.to_vec());
    let Some(range) = meta.live_range(now) else {
        state::with(|s| s.drop_view(db, base));
        return Visit::Done;
    };
    // The window moves at the next slot start: the totals are computed again then.
    let moves_at = slot_start(slot_index(now, meta.slot).saturating_add(1), meta.slot);
    let (mut index, mut cursor, mut sums) = match state::with(|s| s.take_view(&board)) {
        Some(View::Ready { range: r, totals }) if r == range => {
            state::with(|s| s.put_view(board, View::Ready { range, totals }));
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
            state::with(|s| s.put_view(board, view));
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
            state::with(|s| s.put_view(board, view));
            return Visit::Unfinished;
        }
    }
    let totals = Rc::new(sums.finish());
    state::with(|s| s.put_view(board, View::Ready { range, totals }));
    Visit::DueAt(moves_at)
}
