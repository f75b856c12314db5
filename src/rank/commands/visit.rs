//! The expiry timer's visit of a leaderboard: slots that left the window are subtracted
//! from the totals member by member and deleted, in steps bounded by the tick's deadline,
//! resuming where the last visit stopped; the slot orders of a board with `CAPACITY` that
//! a write could not read itself are filled from their slot hashes the same way.
//!
//! Owns: the timer's visit of a board, the resumable drain of expired slots and the fill
//! of slot orders. May not
//! touch: quarantined boards (the timer writes none of their keys unless a write asked for
//! their rebuild; `repair` computes a large one's totals in memory), a board whose
//! cluster slot is moving, the meta hash's fields other than through `meta_hash`; replicates
//! only through [`Effects`]. Opens keys for writing only when there is work (a write open
//! invalidates WATCH).

use std::os::raw::c_int;

use redis_module::Context;

use crate::expiry::{self, Visit};
use crate::host::replicate::{Batch, Effects};
use crate::host::server::{monotonic_us, selected_db};
use crate::host::store::scan::HashCursor;
use crate::host::store::{Key, KeyKind, RStr};
use crate::rank::model::{base_of_meta, drain_step, slot_key, DrainedSlot, Meta};

use super::key_board::{KeyBoard, SlotCounts};
use super::lifecycle::{broken_meta_found, has_jobs};
use super::memory::{self, BoardId, MetaOrigin};
use super::meta_hash::{self, is_marked_edited};
use super::next;
use super::repair;
use super::slots::count_in;
use super::transit::Transit;

/// How soon the expiry timer looks again at a board whose slot is being resharded.
const TRANSIT_RETRY_MS: i64 = 100;

/// Members' worth of discarded totals freed between two looks at the clock.
const FREED_PER_STEP: usize = 2048;

/// How many slot indexes the drain probes between two looks at the clock.
const PROBES_PER_CLOCK_CHECK: u32 = 64;

/// The slot hash that left the window being drained, as the pure drain sees it (see
/// `crate::rank::model::drain_step`): opened for writing, every field it removes recorded
/// as `HDEL slot member ...`.
struct Drained<'a> {
    slot: &'a Key,
    drained: Batch<'a>,
}

impl SlotCounts for Drained<'_> {
    fn sum(&self, member: &RStr) -> i64 {
        count_in(self.slot, member)
    }
}

impl DrainedSlot for KeyBoard<'_, Drained<'_>> {
    fn remove_count(&mut self, name: &[u8], member: &RStr) {
        self.slots.slot.hdel_str(member);
        self.slots.drained.entry().arg(name);
    }
}

/// Subtracts one expired slot from the totals, member by member, until the slot hash is
/// empty (true) or the deadline passes (false; the scan resumes at the next visit).
fn drain_slot(
    ctx: &Context,
    board: &BoardId,
    index: i64,
    keys: (&Key, &Key, &[u8]),
    deadline_us: u64,
) -> bool {
    let (zset, slot, slot_name) = keys;
    let mut cursor = match memory::drains(|d| d.take(board)) {
        Some((saved_index, cursor)) if saved_index == index => cursor,
        _ => HashCursor::new(),
    };
    let drained = Drained {
        slot,
        drained: Batch::new(c"HDEL", slot_name),
    };
    let mut store = KeyBoard::new(zset, &board.1, drained);
    let mut batch = Vec::new();
    let drained = loop {
        batch.clear();
        let more = cursor.step(slot, &mut batch);
        drain_step(&mut store, &batch);
        if !more {
            if slot.kind() != KeyKind::Hash {
                break true;
            }
            // Fields the scan missed (the hash changed under it): scan again.
            cursor = HashCursor::new();
        }
        if monotonic_us() >= deadline_us {
            memory::drains(|d| d.save(board.clone(), index, cursor));
            break false;
        }
    };
    // The sorted set's `ZADD` and `ZREM` first, then the slot's `HDEL`.
    store.emit(ctx);
    store.slots.drained.effects.emit(ctx);
    drained
}

/// Timer visit of a scheduled key whose `_tally` marker starts with the family's word: the
/// meta hash `name` of a leaderboard (`key`, opened untouched; its `_tally` and `_slots`
/// are read together, so the marker passed in is not needed). Subtracts slots that left
/// the window, in bounded steps.
pub fn expire(
    ctx: &Context,
    key: Key,
    name: &[u8],
    _marker: &[u8],
    now: i64,
    deadline_us: u64,
) -> Visit {
    // (Totals no longer true are freed by every tick: see [`release`].)
    visit(ctx, key, name, now, deadline_us)
}

/// Frees the totals no longer true (quarantined boards' views, next totals) until
/// `deadline_us`, a step at a time (freeing a million members at once would hold the
/// server for tens of milliseconds); true when none are left. Every tick calls it, on
/// every server: a flush may leave no board to visit.
pub fn release(deadline_us: u64) -> bool {
    while memory::with(|s| s.free_discarded(FREED_PER_STEP)) {
        if monotonic_us() >= deadline_us {
            return false;
        }
    }
    true
}

/// The visit of the board whose meta hash is `name` (see [`expire`]).
fn visit(ctx: &Context, key: Key, name: &[u8], now: i64, deadline_us: u64) -> Visit {
    if has_jobs() {
        // A rename or delete of this board may be queued: let it run first.
        return Visit::DueAt(now.saturating_add(1));
    }
    let read = meta_hash::read(&key);
    let marked = is_marked_edited(&key);
    let db = selected_db(ctx);
    let (Some((mut meta, layout)), Some(base)) = (read, base_of_meta(name)) else {
        // A field past its TTL the server has not reclaimed yet: the meta is put back (and
        // scheduled again), as after an `HDEL` of the field (see `broken_meta_found`).
        if let Some(base) = base_of_meta(name) {
            broken_meta_found(ctx, db, base, &key);
        }
        return Visit::Done;
    };
    // The board's keys are opened below, for writing when there is work.
    drop(key);
    memory::known(|k| k.note(db, base, meta, MetaOrigin::Read));
    let (quarantined, rebuilding) = memory::quarantine(|q| {
        if marked {
            q.insert(db, base);
        }
        (q.contains(db, base), q.is_rebuilding(db, base))
    });
    if rebuilding {
        // A write whose caller may write every part asked for the rebuild (see `repair`).
        return repair::rebuild_step(ctx, db, base, &meta, now, deadline_us);
    }
    if quarantined {
        // Edited by a native command, maybe by a user who may not touch the totals: the
        // timer writes none of its keys (the next write rebuilds the board), it only
        // computes the totals of a large one in memory for the reads.
        return repair::view_step(ctx, db, base, &meta, now, deadline_us);
    }
    if let Some(visit) = fill_orders(ctx, db, base, &meta, now, deadline_us) {
        return visit;
    }
    if meta.pending_range(now).is_none() {
        // Nothing to expire yet: open nothing for writing (that would invalidate WATCH).
        if let Some(visit) = next::visit(ctx, db, base, &meta, deadline_us) {
            return visit;
        }
        return meta.next_due().map_or(Visit::Done, Visit::DueAt);
    }
    let Some(key) = Key::open_bytes(ctx, name, true) else {
        return Visit::Done;
    };
    let Some(zset) = Key::open_bytes(ctx, base, true) else {
        return Visit::Done;
    };
    if !matches!(zset.kind(), KeyKind::Empty | KeyKind::Zset) {
        return Visit::Done;
    }
    // During a reshard the keys of this board may be split between two nodes: subtracting
    // a slot whose totals are elsewhere, or skipping a slot hash that is elsewhere (and
    // forgetting it), would lose counts. Such a board is visited again later.
    let transit = Transit::new(ctx, &ctx.get_flags(), base);
    let retry = Visit::DueAt(now.saturating_add(TRANSIT_RETRY_MS));
    if zset.kind() == KeyKind::Empty && meta.pending_range(now).is_some() && transit.active() {
        return retry;
    }
    let before = meta;
    let progress = drain_pending(
        ctx,
        (db, base),
        &mut meta,
        &zset,
        &transit,
        now,
        deadline_us,
    );
    if meta != before {
        if meta.is_empty() && zset.kind() == KeyKind::Empty {
            // Nothing left at all: the leaderboard disappears, like an emptied sorted set.
            key.delete();
            let mut effects = Effects::new();
            effects.command(c"DEL").arg(name);
            effects.emit(ctx);
            memory::with(|s| s.forget_board(db, base));
            return Visit::Done;
        }
        let mut effects = Effects::new();
        meta_hash::write_range(&key, name, &meta, layout, &mut effects);
        if meta.is_bounded() {
            // The errors of the slots drained (boards with CAPACITY) go with them.
            meta_hash::drop_errors(&key, name, before.lo..meta.lo, &mut effects);
        }
        effects.emit(ctx);
        memory::known(|k| k.note(db, base, meta, MetaOrigin::Written));
    }
    drop((key, zset));
    match progress {
        Progress::Blocked => retry,
        Progress::Unfinished => Visit::Unfinished,
        // The next oldest slot may need next totals, ready before it leaves.
        Progress::Done => match next::visit(ctx, db, base, &meta, deadline_us) {
            Some(visit) => visit,
            None => meta.next_due().map_or(Visit::Done, Visit::DueAt),
        },
    }
}

/// Fills the slot orders of a board with CAPACITY that are not complete (see
/// `crate::rank::model::capacity`: after a restart, a failover, a native edit, a write to a
/// slot whose order was let go) from saved scans of their slot hashes, until the deadline.
/// `Some(Unfinished)` while one is left (the rest of the visit waits: a fill takes at
/// most ~300 ms of ticks at k = 100,000), `None` when every order is complete. It only
/// reads: nothing to replicate, and the slot hashes are opened without touching them.
fn fill_orders(
    ctx: &Context,
    db: c_int,
    base: &[u8],
    meta: &Meta,
    now: i64,
    deadline_us: u64,
) -> Option<Visit> {
    if !meta.is_bounded() || memory::orders(|o| o.building(db, base)).is_none() {
        return None;
    }
    let held = memory::orders(|o| o.take_all(db, base));
    // An order of a slot that left the window is of no use any more (its drain empties it).
    let first_kept = meta.first_kept(now);
    let (mut held, gone): (Vec<_>, Vec<_>) =
        held.into_iter().partition(|h| h.order.index >= first_kept);
    let mut unfinished = false;
    let mut batch = Vec::new();
    for h in held.iter_mut().filter(|h| !h.order.is_complete()) {
        if unfinished {
            break;
        }
        let slot = Key::open_bytes_untouched(ctx, &slot_key(base, h.order.index));
        let Some(slot) = slot.filter(|slot| slot.kind() == KeyKind::Hash) else {
            // No slot hash: every member the slot has came through the writes.
            h.order.scan_done(0);
            h.scan = None;
            continue;
        };
        let cursor = h.scan.get_or_insert_with(HashCursor::new);
        loop {
            batch.clear();
            let more = cursor.step(&slot, &mut batch);
            h.order.scanned(&batch);
            if !more {
                h.order.scan_done(slot.len());
                h.scan = None;
                break;
            }
            if monotonic_us() >= deadline_us {
                unfinished = true;
                break;
            }
        }
    }
    memory::orders(|o| {
        o.put_all(db, base, held);
        gone.into_iter().for_each(|h| o.discard(h.order));
    });
    unfinished.then_some(Visit::Unfinished)
}

/// How far one visit got through the pending slots.
enum Progress {
    /// Every pending slot is subtracted.
    Done,
    /// The deadline passed: resume at the next tick.
    Unfinished,
    /// A slot hash is missing while the cluster slot moves: look again later.
    Blocked,
}

/// Drains the pending slots of the board `(db, base)` in order, advancing `meta.lo` past
/// each one done (or missing: a gap), until none is left, the deadline passes or a
/// missing slot may be on another node.
fn drain_pending(
    ctx: &Context,
    (db, base): (c_int, &[u8]),
    meta: &mut Meta,
    zset: &Key,
    transit: &Transit,
    now: i64,
    deadline_us: u64,
) -> Progress {
    let mut expired = 0u64;
    let mut probes = 0u32;
    let progress = loop {
        let Some((index, _)) = meta.pending_range(now) else {
            break Progress::Done;
        };
        let slot_name = slot_key(base, index);
        let slot = Key::open_bytes(ctx, &slot_name, true);
        let kind = slot.as_ref().map_or(KeyKind::Empty, |s| s.kind());
        if kind == KeyKind::Empty && transit.active() {
            break Progress::Blocked;
        }
        if kind == KeyKind::Hash {
            let Some(slot) = slot else {
                break Progress::Done;
            };
            // Next totals that leave out another slot would change with this one.
            memory::nexts(|n| {
                if n.get(db, base).is_some_and(|next| next.excluded != index) {
                    n.drop(db, base);
                }
            });
            let board: BoardId = (db, base.to_vec());
            if !drain_slot(ctx, &board, index, (zset, &slot, &slot_name), deadline_us) {
                break Progress::Unfinished;
            }
            expired += 1;
        }
        meta.lo = index.saturating_add(1);
        probes += 1;
        if probes.is_multiple_of(PROBES_PER_CLOCK_CHECK) && monotonic_us() >= deadline_us {
            break Progress::Unfinished;
        }
    };
    expiry::count_expired(expired);
    progress
}
