//! Lifecycle of leaderboards: one object made of several keys (`crate::rank` layout).
//!
//! What it owns:
//! * the use of the registry of known boards (`registry`: `(db, base) -> Meta`, filled
//!   whenever tally reads or writes a meta) to understand keyspace events without opening
//!   keys inside the notification callback (an open there can lazily expire a key and
//!   lose events);
//! * the quarantine: boards whose parts were edited by native commands (`HSET`/`HDEL` on a
//!   slot hash or the meta, `ZADD` on the totals, `RENAME` of a part, ...). The timer never
//!   acts on a quarantined board: the edit may be a forgery by a user who may not touch the
//!   totals key. Reads compute its totals from the slot hashes (consistent by construction)
//!   and the next write, whose caller's ACL covers every key, rebuilds the totals;
//! * the jobs that follow keyspace events, where writing keys is not allowed: DEL, UNLINK,
//!   EXPIRE and RENAME of the main key carry the derived keys along; the loss of a part to
//!   expiry or eviction removes the board whole; a meta deleted by a user is put back.
//!
//! Jobs run from a post-notification job (Redis 7.2+, Valkey) or a 1 ms timer (Redis 7.0),
//! and first thing in every leaderboard write. Outside a command they wait while
//! replication traffic must be avoided (`CLIENT PAUSE WRITE`, failover): replicating then
//! aborts Redis. Until a job has run, reads resolve names through the queue.
//!
//! May not touch: the totals or slot counts (only whole parts move or go), the `_tally` and
//! `_slots` fields other than through `stored`; replicates only through [`Effects`].

use std::cell::{Cell, RefCell};
use std::os::raw::c_int;
use std::time::Duration;

use redis_module::{Context, NotifyEvent, Status};

use crate::expiry;
use crate::layout::RANK_EDITED_FIELD;
use crate::rank::{base_of_meta, base_of_part, meta_key, slot_key, Meta};
use crate::replicate::Effects;
use crate::server::{is_acting_primary, replica_traffic_paused, selected_db, DbGuard};
use crate::store::{Key, KeyKind};

use super::registry::{
    drop_view, forget_board, is_quarantined, known_meta, quarantine, remember, unverify,
};
use super::stored;
use super::transit::slot_in_transit;

/// How long a job waits for a client pause to end before looking again.
const PAUSED_RETRY_MS: u64 = 20;

/// Work on a board's keys that a keyspace event asked for.
enum Job {
    /// The main key `base` was deleted, expired, evicted or overwritten: remove its parts.
    Delete { db: c_int, base: Vec<u8> },
    /// `from` was renamed to `to`: drop `to`'s old parts, move `from`'s.
    Rename {
        db: c_int,
        from: Vec<u8>,
        to: Vec<u8>,
    },
    /// A part of `base` expired or was evicted: the board cannot stay consistent, remove it
    /// whole (no user is behind expiry or eviction).
    RemoveWhole { db: c_int, base: Vec<u8> },
    /// A user deleted or renamed away the meta of a known board: put it back.
    RestoreMeta {
        db: c_int,
        base: Vec<u8>,
        meta: Meta,
    },
    /// A part was edited natively: record the quarantine in the meta hash itself
    /// ([`RANK_EDITED_FIELD`]), so it survives a restart or a failover.
    MarkEdited { db: c_int, base: Vec<u8> },
}

thread_local! {
    // Commands, events and timers all run on Redis's main thread.
    static JOBS: RefCell<Vec<Job>> = const { RefCell::new(Vec::new()) };
    static RENAME_FROM: RefCell<Option<(c_int, Vec<u8>)>> = const { RefCell::new(None) };
    static JOB_TIMER_ARMED: Cell<bool> = const { Cell::new(false) };
    /// > 0 while tally itself runs a command (UNLINK, RENAME of parts): its events are ours.
    static OWN_CALLS: Cell<u32> = const { Cell::new(0) };
}

// ------------------------------------------------------------------------- quarantine

/// Quarantine after a native edit, recorded in memory and (by a job) in the meta hash.
fn quarantine_edited(ctx: &Context, db: c_int, base: &[u8]) {
    // Totals computed from the keys as they were are no longer true (the first read of a
    // large board asks the timer for new ones).
    drop_view(db, base);
    if quarantine(db, base) {
        push_job(
            ctx,
            Job::MarkEdited {
                db,
                base: base.to_vec(),
            },
        );
    }
}

/// FLUSHDB / FLUSHALL (`db` = -1): forget the flushed boards and their pending jobs.
pub fn forget_db(db: c_int) {
    let keep = |d: c_int| db >= 0 && d != db;
    super::registry::forget_db(db);
    JOBS.with(|j| j.borrow_mut().retain(|job| keep(job_db(job))));
}

/// SWAPDB a b: what was known of one database now belongs to the other.
pub fn swap_dbs(a: c_int, b: c_int) {
    let swap = |d: c_int| match d {
        d if d == a => b,
        d if d == b => a,
        d => d,
    };
    super::registry::swap_dbs(swap);
    JOBS.with(|j| {
        for job in j.borrow_mut().iter_mut() {
            match job {
                Job::Delete { db, .. }
                | Job::Rename { db, .. }
                | Job::RemoveWhole { db, .. }
                | Job::RestoreMeta { db, .. }
                | Job::MarkEdited { db, .. } => *db = swap(*db),
            }
        }
    });
}

/// Loading replaces the data: nothing known stays true.
pub fn forget_all() {
    forget_db(-1);
}

fn job_db(job: &Job) -> c_int {
    match job {
        Job::Delete { db, .. }
        | Job::Rename { db, .. }
        | Job::RemoveWhole { db, .. }
        | Job::RestoreMeta { db, .. }
        | Job::MarkEdited { db, .. } => *db,
    }
}

// ----------------------------------------------------------------------------- events

pub(super) fn has_jobs() -> bool {
    JOBS.with(|j| !j.borrow().is_empty())
}

/// What the queued jobs make of the board at `name`.
enum Resolution {
    /// Its derived keys are at this base: `name` itself, or the old name of a rename whose
    /// job has not run yet.
    At(Vec<u8>),
    /// A queued job removes it: whole (a part expired or was evicted; the sorted set at
    /// `name` is that board's and goes too), or its parts after a DEL of its sorted set.
    Removed { whole: bool },
}

fn resolve(db: c_int, name: &[u8]) -> Resolution {
    JOBS.with(|jobs| {
        let jobs = jobs.borrow();
        let mut current = name.to_vec();
        for job in jobs.iter().rev() {
            match job {
                Job::Rename { db: d, from, to } if *d == db && *to == current => {
                    current = from.clone();
                }
                Job::Rename { db: d, from, .. } if *d == db && *from == current => {
                    return Resolution::Removed { whole: false }
                }
                Job::Delete { db: d, base } if *d == db && *base == current => {
                    return Resolution::Removed { whole: false }
                }
                Job::RemoveWhole { db: d, base } if *d == db && *base == current => {
                    return Resolution::Removed { whole: true }
                }
                _ => {}
            }
        }
        Resolution::At(current)
    })
}

/// Where the derived keys of `name` are right now: `name` itself, the old name of a rename
/// whose job has not run yet, or `None` if they belong to a deleted board.
pub(super) fn resolve_base(db: c_int, name: &[u8]) -> Option<Vec<u8>> {
    match resolve(db, name) {
        Resolution::At(base) => Some(base),
        Resolution::Removed { .. } => None,
    }
}

/// The meta a queued job is about to put back at `base|meta` (a user deleted, renamed
/// away or garbled it), if any. Until that job runs (on Redis 7.0 from a timer, and on
/// every server not before a client pause ends), reads answer from it.
pub(super) fn pending_restore(db: c_int, base: &[u8]) -> Option<Meta> {
    JOBS.with(|jobs| {
        jobs.borrow().iter().rev().find_map(|job| match job {
            Job::RestoreMeta {
                db: d,
                base: b,
                meta,
            } if *d == db && b == base => Some(*meta),
            _ => None,
        })
    })
}

fn is_board(db: c_int, name: &[u8]) -> bool {
    resolve_base(db, name).is_some_and(|base| known_meta(db, &base).is_some())
}

/// Runs a command as tally itself (its keyspace events are not a user's edits).
fn own_call(ctx: &Context, command: &str, args: &[&[u8]]) {
    OWN_CALLS.with(|c| c.set(c.get() + 1));
    let _ = ctx.call(command, args);
    OWN_CALLS.with(|c| c.set(c.get().saturating_sub(1)));
}

/// Keyspace events (every class tally subscribes to) on any key, except tally's own
/// (`crate::commands::on_keyspace_event` drops those first). Never opens a key.
pub fn on_keyspace_event(ctx: &Context, class: NotifyEvent, event: &str, key: &[u8]) {
    // Whoever touched a meta hash (a user, the primary's effects on a replica, tally's own
    // RENAME), its meta must be read again before INCRBY trusts it.
    if let Some(base) = base_of_meta(key) {
        unverify(selected_db(ctx), base);
    }
    if OWN_CALLS.with(Cell::get) > 0 {
        return;
    }
    // Replicas and loads receive the primary's effects: they must not act themselves.
    if !is_acting_primary(ctx) {
        return;
    }
    let db = selected_db(ctx);
    if let Some(base) = base_of_part(key) {
        on_part_event(ctx, db, base, base_of_meta(key).is_some(), event);
        return;
    }
    let job = match event {
        "rename_from" => {
            RENAME_FROM.with(|r| *r.borrow_mut() = Some((db, key.to_vec())));
            return;
        }
        "rename_to" => {
            let from = RENAME_FROM.with(|r| r.borrow_mut().take());
            match from {
                Some((from_db, from)) if from_db == db && is_board(db, &from) => Job::Rename {
                    db,
                    from,
                    to: key.to_vec(),
                },
                // The sorted set of a board that a queued job removes whole (a part expired
                // or was evicted, the job has not run yet): it goes at its new name, with
                // what was there before.
                Some((from_db, from))
                    if from_db == db
                        && matches!(resolve(db, &from), Resolution::Removed { whole: true }) =>
                {
                    Job::RemoveWhole {
                        db,
                        base: key.to_vec(),
                    }
                }
                // A plain key renamed over a leaderboard: its old derived keys must go.
                _ if is_board(db, key) => Job::Delete {
                    db,
                    base: key.to_vec(),
                },
                _ => return,
            }
        }
        "del" | "expired" | "evicted" if is_board(db, key) => Job::Delete {
            db,
            base: key.to_vec(),
        },
        _ if !is_board(db, key) => return,
        // A user's ZADD/ZREM/... on the totals: they no longer match the slots.
        _ if class.intersects(NotifyEvent::ZSET) || event == "restore" => {
            quarantine_edited(ctx, db, key);
            return;
        }
        // Overwritten by a value of another type (SET, LPUSH after DEL, ...).
        _ if class.intersects(
            NotifyEvent::STRING
                | NotifyEvent::LIST
                | NotifyEvent::SET
                | NotifyEvent::HASH
                | NotifyEvent::STREAM,
        ) =>
        {
            Job::Delete {
                db,
                base: key.to_vec(),
            }
        }
        _ => return,
    };
    push_job(ctx, job);
}

/// An event on `base|meta` or `base|slot|<index>`.
fn on_part_event(ctx: &Context, db: c_int, base: &[u8], is_meta: bool, event: &str) {
    let known = known_meta(db, base);
    match event {
        // No user is behind these: the board cannot stay consistent, it goes whole.
        "expired" | "evicted" => {
            if known.is_some() {
                push_job(
                    ctx,
                    Job::RemoveWhole {
                        db,
                        base: base.to_vec(),
                    },
                );
            }
        }
        // A board arriving by MIGRATE (cluster resharding) or RESTORE: the expiry visit
        // registers it.
        "restore" if known.is_none() => {}
        _ => {
            // A native edit (HSET, HDEL, DEL, RENAME, ...): maybe a forgery by a user who
            // may not touch the totals. The timer keeps its hands off from now on.
            quarantine_edited(ctx, db, base);
            // A meta deleted, renamed away or stripped of its fields (HDEL `_tally`) is put
            // back from the registry, so the board keeps answering.
            if let (true, Some(meta)) = (is_meta, known) {
                push_job(
                    ctx,
                    Job::RestoreMeta {
                        db,
                        base: base.to_vec(),
                        meta,
                    },
                );
            }
        }
    }
}

fn push_job(ctx: &Context, job: Job) {
    JOBS.with(|j| j.borrow_mut().push(job));
    if matches!(
        ctx.add_post_notification_job(|ctx| run_jobs(ctx, false)),
        Ok(Status::Ok)
    ) {
        return;
    }
    // Redis 7.0 has no post-notification jobs: a timer runs them right after this command.
    arm_job_timer(ctx, 1);
}

fn arm_job_timer(ctx: &Context, delay_ms: u64) {
    if !JOB_TIMER_ARMED.with(|a| a.replace(true)) {
        ctx.create_timer(Duration::from_millis(delay_ms), jobs_timer, ());
    }
}

fn jobs_timer(ctx: &Context, _: ()) {
    JOB_TIMER_ARMED.with(|a| a.set(false));
    run_jobs(ctx, false);
}

/// Runs queued jobs before a leaderboard write, so the write never lands on stale keys.
/// A command may replicate even during a pause (inside MULTI/EXEC with the pause).
pub(super) fn flush_jobs(ctx: &Context) {
    if has_jobs() {
        run_jobs(ctx, true);
    }
}

/// Runs every queued job, in order. Outside a command, waits while a pause is in force.
fn run_jobs(ctx: &Context, in_command: bool) {
    if !has_jobs() {
        return;
    }
    if !is_acting_primary(ctx) {
        JOBS.with(|j| j.borrow_mut().clear());
        return;
    }
    if !in_command && replica_traffic_paused() {
        arm_job_timer(ctx, PAUSED_RETRY_MS);
        return;
    }
    let jobs = JOBS.with(|j| std::mem::take(&mut *j.borrow_mut()));
    let db_guard = DbGuard::new(ctx);
    for job in jobs {
        if !db_guard.select(job_db(&job)) {
            continue;
        }
        match job {
            Job::Delete { db, base } => {
                if !slot_in_transit(ctx, &base) {
                    delete_parts(ctx, db, &base);
                }
            }
            Job::Rename { db, from, to } => {
                delete_parts(ctx, db, &to);
                rename_parts(ctx, db, &from, &to);
            }
            Job::RemoveWhole { db, base } => {
                if !slot_in_transit(ctx, &base) {
                    remove_whole(ctx, db, &base);
                }
            }
            Job::RestoreMeta { db, base, meta } => {
                restore_meta(ctx, db, &base, meta);
            }
            Job::MarkEdited { base, .. } => mark_edited(ctx, &base, true),
        }
    }
}

// ------------------------------------------------------------------------- the parts

/// The meta stored at `base|meta`, if it is a valid leaderboard meta.
fn stored_meta(ctx: &Context, base: &[u8]) -> Option<Meta> {
    let key = Key::open_bytes(ctx, &meta_key(base), false)?;
    stored::read(&key).map(|(meta, _)| meta)
}

/// Existing parts of the board at `base`: meta first (if present), then slot hashes.
/// A hash at `base|meta` that is not a valid meta is the board's meta a user garbled
/// when tally knows the board (it would put it back): it goes (or moves) with the board,
/// rather than stay behind as a name that answers WRONGTYPE.
fn parts(ctx: &Context, db: c_int, base: &[u8]) -> Vec<Vec<u8>> {
    let stored = stored_meta(ctx, base);
    let known = known_meta(db, base);
    let Some(meta) = stored.or(known) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let garbled_meta = stored.is_none()
        && known.is_some()
        && Key::open_bytes(ctx, &meta_key(base), false).is_some_and(|k| k.kind() == KeyKind::Hash);
    if stored.is_some() || garbled_meta {
        names.push(meta_key(base).to_vec());
    }
    if !meta.is_empty() {
        // `span_fits` bounds this walk to two windows of slot names.
        for index in meta.lo..=meta.hi {
            let name = slot_key(base, index);
            if Key::open_bytes(ctx, &name, false).is_some_and(|k| k.kind() == KeyKind::Hash) {
                names.push(name.to_vec());
            }
        }
    }
    names
}

/// Deletes `names` (UNLINK frees a big slot hash in the background) and replicates that.
fn unlink(ctx: &Context, names: &[Vec<u8>]) {
    if names.is_empty() {
        return;
    }
    let args: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
    own_call(ctx, "UNLINK", &args);
    let mut effects = Effects::new();
    effects.command(c"UNLINK");
    for name in &args {
        effects.arg(name);
    }
    effects.emit(ctx);
}

fn delete_parts(ctx: &Context, db: c_int, base: &[u8]) {
    unlink(ctx, &parts(ctx, db, base));
    expiry::unschedule(ctx, &meta_key(base));
    forget_board(db, base);
}

fn remove_whole(ctx: &Context, db: c_int, base: &[u8]) {
    let mut names = parts(ctx, db, base);
    if Key::open_bytes(ctx, base, false).is_some_and(|k| k.kind() == KeyKind::Zset) {
        names.push(base.to_vec());
    }
    unlink(ctx, &names);
    expiry::unschedule(ctx, &meta_key(base));
    forget_board(db, base);
}

/// Moves the parts of `from` to `to`. A target name already holding a key that is not a
/// part of this board (someone else's `to|meta`, say) is never overwritten: the renamed
/// board is removed whole instead.
fn rename_parts(ctx: &Context, db: c_int, from: &[u8], to: &[u8]) {
    let names = parts(ctx, db, from);
    let meta = stored_meta(ctx, from).or_else(|| known_meta(db, from));
    let targets: Vec<Vec<u8>> = names
        .iter()
        .filter_map(|name| Some([to, name.get(from.len()..)?].concat()))
        .collect();
    let taken =
        |name: &[u8]| Key::open_bytes(ctx, name, false).is_some_and(|k| k.kind() != KeyKind::Empty);
    // A meta a user deleted or renamed away just before the board moved (on Redis 7.0 the
    // job putting it back runs after this move) is put back at the new name (below), which
    // must be free like the other targets.
    let meta_left_behind = meta.is_some() && !names.contains(&meta_key(from).to_vec());
    let occupied = targets.iter().any(|t| taken(t)) || (meta_left_behind && taken(&meta_key(to)));
    if occupied || targets.len() != names.len() {
        unlink(ctx, &names);
        if Key::open_bytes(ctx, to, false).is_some_and(|k| k.kind() == KeyKind::Zset) {
            unlink(ctx, &[to.to_vec()]);
        }
        expiry::unschedule(ctx, &meta_key(from));
        forget_board(db, from);
        return;
    }
    // Slot hashes first, meta last: until the meta moves, `from` still owns the slots.
    let mut effects = Effects::new();
    for (name, target) in names.iter().zip(&targets).rev() {
        own_call(ctx, "RENAME", &[name.as_slice(), target.as_slice()]);
        effects.command(c"RENAME").arg(name).arg(target);
    }
    effects.emit(ctx);
    let quarantined = is_quarantined(db, from);
    expiry::unschedule(ctx, &meta_key(from));
    forget_board(db, from);
    if let Some(meta) = meta {
        remember(db, to, meta);
        if quarantined {
            quarantine(db, to);
        }
        expiry::schedule(ctx, &meta_key(to), 0);
        // A meta left behind, or moved along after a user garbled it (both only on Redis
        // 7.0, where this job runs after the next commands): put back from the registry.
        // (A meta put back records the quarantine itself.)
        let restored = restore_meta(ctx, db, to, meta);
        if quarantined && !restored {
            mark_edited(ctx, to, true);
        }
    }
}

/// Puts back the meta a user deleted or garbled, if the board's totals are still there;
/// true if it wrote it.
fn restore_meta(ctx: &Context, db: c_int, base: &[u8], meta: Meta) -> bool {
    if slot_in_transit(ctx, base) {
        return false;
    }
    let zset_here = Key::open_bytes(ctx, base, false).is_some_and(|k| k.kind() == KeyKind::Zset);
    let name = meta_key(base);
    let Some(key) = Key::open_bytes(ctx, &name, true) else {
        return false;
    };
    // Put back a missing meta, or the fields of one a user broke; a valid meta (even a
    // forged one: the quarantine handles it) stays as it is.
    let broken = match key.kind() {
        KeyKind::Empty => true,
        KeyKind::Hash => stored::read(&key).is_none(),
        _ => false,
    };
    // A board lives on in its sorted set, or, never incremented yet, in its meta alone: a
    // garbled meta of such a board tally still knows (no removal ran since) is put back
    // too. A deleted one is not: nothing is left of that board.
    let empty_board = key.kind() == KeyKind::Hash && known_meta(db, base).is_some();
    if !(zset_here || empty_board) || !broken {
        return false;
    }
    let mut effects = Effects::new();
    stored::write_all(&key, &name, &meta, &mut effects);
    effects.emit(ctx);
    let marked = is_marked_edited(&key);
    drop(key);
    remember(db, base, meta);
    if let Some(due) = meta.next_due() {
        expiry::schedule(ctx, &name, due);
    }
    // The edit that broke the meta quarantined the board, but its `MarkEdited` job (queued
    // first) found no valid meta to record that in: record it now, or a restart or a
    // failover would forget the quarantine.
    if is_quarantined(db, base) && !marked {
        mark_edited(ctx, base, true);
    }
    true
}

/// Sets (or, once repaired, clears) the meta's [`RANK_EDITED_FIELD`], and replicates that.
/// Leaves the rest of the meta as it is (a meta in the four-number layout stays so until
/// the next write of its range).
pub(super) fn mark_edited(ctx: &Context, base: &[u8], edited: bool) {
    let name = meta_key(base);
    let Some(key) = Key::open_bytes(ctx, &name, true) else {
        return;
    };
    // Only a leaderboard's meta: a user's own hash that merely has such a name stays as is.
    if stored::read(&key).is_none() {
        return;
    }
    let field = RANK_EDITED_FIELD.as_bytes();
    let mut effects = Effects::new();
    if edited {
        key.hset(field, b"1");
        effects.command(c"HSET").arg(&name).arg(field).arg(b"1");
    } else if key.hdel(field) {
        effects.command(c"HDEL").arg(&name).arg(field);
    }
    effects.emit(ctx);
}

/// True if the meta hash `key` carries [`RANK_EDITED_FIELD`] (a quarantine recorded before
/// a restart or a failover).
pub(super) fn is_marked_edited(key: &Key) -> bool {
    key.hget(RANK_EDITED_FIELD.as_bytes()).is_some()
}
