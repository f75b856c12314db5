//! Next totals on a replica (see `next`): its own timer fills them from its copies of the
//! keys, as the primary's does, and they follow the primary's effects member by member.
//!
//! The primary's effects (`HSET slot m c`, `ZADD key t m`, `ZREM`, `HDEL`) fire keyspace
//! events that name the key, not the members. A command filter, registered only while
//! this server is a replica and some board holds next totals, sees each command's
//! arguments when it is queued (in a MULTI) or about to run: it *announces* the members of
//! a `ZADD`/`ZINCRBY`/`ZREM` on a board's sorted set and of an `HSET`/`HMSET`/`HDEL`/`HINCRBY`
//! on its excluded slot hash. The keyspace event that fires when the command runs takes
//! the announcements of its key and marks those members dirty in the board's [`Next`]; a
//! read (or the next timer visit) sets each dirty member's value from the keys first
//! (`next::settle`), O(dirty members). Anything else on those two keys (an event with no
//! announcement: a command the filter cannot read, a script's or a module's write, `DEL`,
//! `RENAME`, ...) drops the board's next totals, as on a primary. Events on the board's
//! meta and other slot hashes leave them as they are: a value is the sorted set's total
//! less the count in the excluded slot, nothing else.
//!
//! How announcements follow a MULTI, and which arguments are members, is
//! `crate::rank::model::Announcements`. The filter does not know a command's database (`SELECT` in the stream): an event marks its members
//! dirty in every database with a board of that name (a needless refresh, never a missed
//! one). A command that changes nothing fires no event: its count stays until a later
//! event on the key uses it. What this cannot see is a write to those keys that does not
//! pass the filter and comes while such a count is left: a script or a module command on
//! a writable replica (`replica-read-only no`), never the primary's stream.
//!
//! The replica's timer visits the boards whose meta changed (a new slot, a subtracted
//! one) and those whose oldest slot was written, and prepares, continues or drops their
//! next totals with `next::visit`; it leaves them as they are while the primary subtracts
//! a slot. It stops on promotion (the primary's timer takes over; the totals, kept in step,
//! stay valid) and unregisters the filter once no board has next totals.
//!
//! Owns: announcements, the replica's watch of boards, its timer and the filter's
//! registration. May not touch: keys (opens them read-only, untouched), replication.

use std::os::raw::c_int;
use std::time::Duration;

use redis_module::{Context, ContextFlags};

use crate::collections::due_queue::Popped;
use crate::expiry::{self, Visit};
use crate::host::config;
use crate::host::server::{
    has_command_filter, is_acting_primary, monotonic_us, now_ms, set_command_filter, DbGuard,
    FilterArgs,
};
use crate::host::store::Key;
use crate::rank::model::{
    base_of_meta, base_of_part, base_of_slot, member_positions, meta_key, slot_key, Taken,
};

use super::memory::{self, MetaOrigin};
use super::meta_hash::{self, is_marked_edited};
use super::next;

/// How long the timer sleeps when nothing is due (a board's due time may be far away).
const IDLE_MS: i64 = 100;

/// Members' worth of discarded next totals freed per tick.
const FREED_PER_TICK: usize = 8192;

/// Entries of the watch list no longer current that one pop may drop before the tick looks
/// at its clock again.
const STALE_PER_POP: usize = 1024;

/// How soon a board is visited again while the primary subtracts its slot.
const DRAINING_MS: i64 = 100;

/// The replica's part of the family's memory (see [`memory::Replica`]).
fn with<R>(f: impl FnOnce(&mut memory::Replica) -> R) -> R {
    memory::replica(f)
}

/// A keyspace event on a board's key on a server that is not an acting primary (a
/// replica, or a load): keeps the board's next totals in step, drops them, or asks the
/// timer to look at the board. Opens no key.
pub(super) fn on_event(ctx: &Context, db: c_int, event: &str, key: &[u8]) {
    let base = base_of_part(key).unwrap_or(key);
    let is_part = base.len() < key.len();
    if !is_part && !memory::nexts(|n| n.any()) {
        // Not a board's part, and no totals to keep: nothing to do (the common event).
        return;
    }
    let flags = ctx.get_flags();
    if !flags.contains(ContextFlags::SLAVE) || flags.contains(ContextFlags::LOADING) {
        // A load (which drops every next totals when it ends): drop, as a primary would.
        memory::nexts(|n| n.drop(db, base));
        return;
    }
    if let Some(base) = base_of_meta(key) {
        // A new slot, a subtracted one, a new board: the timer looks.
        watch(ctx, db, base, 0);
        return;
    }
    let (base, is_slot) = match base_of_slot(key) {
        Some(base) => (base, true),
        None => (key, false),
    };
    let excluded = memory::nexts(|n| n.get(db, base).map(|next| next.excluded));
    let Some(excluded) = excluded else {
        // A write to the oldest slot may have made it large: the timer looks.
        if is_slot {
            let lo = memory::known(|k| k.get(db, base)).map(|meta| meta.lo);
            if lo.is_none_or(|lo| slot_key(base, lo).as_ref() == key) {
                watch(ctx, db, base, 0);
            }
        }
        return;
    };
    if is_slot && slot_key(base, excluded).as_ref() != key {
        // Another slot: no next value depends on it (what was announced for it, while it
        // was the excluded slot of the board in another database, is not needed).
        with(|r| r.announced.forget(key));
        return;
    }
    let understood = matches!(
        event,
        "hset" | "hdel" | "hincrby" | "zadd" | "zincr" | "zrem"
    );
    // An `HDEL` that empties a hash fires `del` right after `hdel`.
    let Taken {
        members,
        follows_taken: emptied,
    } = with(|r| r.announced.take(db, key, understood));
    let kept = match (event, members) {
        (_, Some(members)) => {
            if !members.is_empty() {
                memory::nexts(|n| n.mark_dirty(base, members));
                // The timer settles them in steps, before they pile up for a read.
                watch(ctx, db, base, 0);
            }
            true
        }
        // The excluded slot hash emptied by the `HDEL` just taken.
        ("del", None) => is_slot && emptied,
        _ => false,
    };
    if !kept {
        memory::nexts(|n| n.drop(db, base));
        // The filter goes once no board needs it.
        watch(ctx, db, base, 0);
    }
}

/// The command filter (see the module doc): announces the members a command names on a
/// board key that has next totals. Runs for every command on the server while registered.
fn on_command(args: &FilterArgs) {
    let n = args.len();
    let Some((first, step)) = member_positions(args.get(0), n, |pos| args.get(pos)) else {
        return;
    };
    let key = args.get(1);
    if base_of_meta(key).is_some() {
        return;
    }
    // The sorted set, or the excluded slot hash: other slot hashes change no next value.
    let follows = match base_of_slot(key) {
        Some(base) => memory::nexts(|n| n.excludes_slot(base, key)),
        None => memory::nexts(|n| n.has_named(key)),
    };
    if !follows {
        return;
    }
    let members: Vec<Vec<u8>> = (first..n)
        .step_by(step)
        .map(|pos| args.get(pos).to_vec())
        .collect();
    if !with(|r| r.announced.announce(key, members)) {
        // Commands queued and never run: every next totals go.
        memory::nexts(|n| n.drop_where(|_| true));
    }
}

/// Asks the replica's timer to visit the board `base` of database `db` at `due`.
fn watch(ctx: &Context, db: c_int, base: &[u8], due: i64) {
    with(|r| r.watch.insert(db, &meta_key(base), due));
    arm(ctx, due.saturating_sub(now_ms()));
}

/// Arms the replica timer to fire in `delay_ms` (within 1 ms .. [`IDLE_MS`]), unless it
/// fires by then already.
fn arm(ctx: &Context, delay_ms: i64) {
    let delay_ms = delay_ms.clamp(1, IDLE_MS);
    let fires_at = now_ms().saturating_add(delay_ms);
    let generation = with(|r| {
        if r.armed.is_some_and(|(_, at)| at <= fires_at) {
            return None;
        }
        r.generation = r.generation.wrapping_add(1);
        r.armed = Some((r.generation, fires_at));
        Some(r.generation)
    });
    if let Some(generation) = generation {
        ctx.create_timer(Duration::from_millis(delay_ms as u64), tick, generation);
    }
}

/// The replica's timer: visits the due boards within `tally.expire-budget-us`.
fn tick(ctx: &Context, generation: u64) {
    let current = with(|r| {
        let current = r.armed.is_some_and(|(g, _)| g == generation);
        if current {
            r.armed = None;
        }
        current
    });
    if !current {
        // Replaced by a timer that fires sooner.
        return;
    }
    if is_acting_primary(ctx) {
        // Promoted (or never a replica): the primary's timer keeps the totals from now on.
        with(|r| *r = memory::Replica::default());
        set_command_filter(ctx, None);
        return;
    }
    let started = monotonic_us();
    let deadline = started.saturating_add(config::expire_budget_us().max(1) as u64);
    let now = now_ms();
    let guard = DbGuard::new(ctx);
    let mut first = true;
    while first || monotonic_us() < deadline {
        first = false;
        let (db, name) = match with(|r| r.watch.pop_due_bounded(now, STALE_PER_POP)) {
            Popped::Due(db, name) => (db, name),
            Popped::Skipped => continue,
            Popped::Nothing => break,
        };
        if !guard.select(db) {
            continue;
        }
        let Some(base) = base_of_meta(&name) else {
            continue;
        };
        match visit(ctx, db, base, now, deadline) {
            Visit::DueAt(due) => with(|r| r.watch.insert(db, &name, due)),
            Visit::Unfinished => with(|r| r.watch.insert(db, &name, now)),
            Visit::Done => {}
        }
    }
    drop(guard);
    let freeing = memory::with(|s| s.free_discarded(FREED_PER_TICK));
    expiry::record_tick(started);
    // The filter exactly while some board has next totals (they were made in this tick,
    // before any command could change them).
    let needed = memory::nexts(|n| n.any());
    if needed != has_command_filter() {
        set_command_filter(ctx, needed.then_some(on_command as fn(&FilterArgs)));
    }
    if !needed {
        with(|r| r.announced.clear());
    }
    let next = with(|r| r.watch.first_due()).map(|due| due.saturating_sub(now_ms()));
    match next {
        // Next totals no longer used are freed a step per tick.
        _ if freeing => arm(ctx, 1),
        Some(delay) => arm(ctx, delay),
        None => {}
    }
}

/// Visits the board `base` of the selected database `db`: settles, prepares, continues or
/// drops its next totals, writing nothing.
fn visit(ctx: &Context, db: c_int, base: &[u8], now: i64, deadline_us: u64) -> Visit {
    let read = Key::open_bytes_untouched(ctx, &meta_key(base)).map(|key| {
        let marked = is_marked_edited(&key);
        (meta_hash::read(&key), marked)
    });
    let Some((Some((meta, _)), false)) = read else {
        // Gone, not a board, or edited by a native command: no next totals.
        memory::nexts(|n| n.drop(db, base));
        return Visit::Done;
    };
    memory::known(|k| k.note(db, base, meta, MetaOrigin::Read));
    let quarantined = memory::quarantine(|q| q.contains(db, base));
    if quarantined {
        memory::nexts(|n| n.drop(db, base));
        return Visit::Done;
    }
    if meta.pending_range(now).is_some() {
        // The primary subtracts a slot: the totals stay as they are (settled here so that
        // dirty members do not pile up); its meta write when done brings the board back.
        if !next::settle(ctx, db, base, Some(deadline_us)) {
            return Visit::Unfinished;
        }
        let has = memory::nexts(|n| n.get(db, base).is_some());
        return match has {
            true => Visit::DueAt(now.saturating_add(DRAINING_MS)),
            false => Visit::Done,
        };
    }
    match next::visit(ctx, db, base, &meta, deadline_us) {
        Some(visit) => visit,
        None => meta.next_due().map_or(Visit::Done, Visit::DueAt),
    }
}
