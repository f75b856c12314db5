//! The lifecycle of a board made of several keys (`crate::rank::model` layout), told by the
//! keyspace events on its keys and carried out by jobs.
//!
//! Events, from anyone but tally's own leaderboard commands, are understood from the known
//! metas in `memory` (never by opening a key: an open inside the notification callback can
//! lazily expire a key and lose events), and queue jobs (writing keys is not allowed
//! there):
//!
//! * DEL, UNLINK, EXPIRE and RENAME of the main key carry the derived keys along;
//! * the loss of a part to expiry or eviction removes the board whole;
//! * a native edit of a part (`HSET`/`HDEL` on a slot hash or the meta, `ZADD` on the
//!   totals, `RENAME` of a part, ...) puts the board in quarantine, recorded in the meta
//!   (`_edited`, see `meta_hash`): the timer never acts on a quarantined board (the edit may be
//!   a forgery by a user who may not touch the totals key); reads compute its totals from
//!   the slot hashes and the next write, whose caller's ACL covers every key, rebuilds the
//!   totals (`repair`);
//! * a meta deleted or garbled by a user is put back, and so is one found broken with no
//!   event told (a field past its TTL, not reclaimed yet: [`broken_meta_found`]).
//!
//! Jobs run from a post-notification job (Redis 7.2+, Valkey) or a 1 ms timer (Redis 7.0),
//! and first thing in every leaderboard write. Outside a command they wait while
//! replication traffic must be avoided (`CLIENT PAUSE WRITE`, failover): replicating then
//! aborts Redis. Until a job has run, reads resolve names through the queue
//! (`crate::rank::model::JobQueue`: [`resolve_base`], [`pending_restore`]). A job moves or
//! removes a board's parts whole, never their content.
//!
//! Owns: the reading of events, when the queue runs, and whole parts (listing, deleting,
//! moving them, putting back a meta). May not touch: the totals or slot counts, the meta's
//! fields other than through `meta_hash`; replicates only through [`Effects`].

use std::os::raw::c_int;
use std::time::Duration;

use redis_module::{Context, NotifyEvent, Status};

use crate::error::{Error, Result};
use crate::expiry;
use crate::host::replicate::Effects;
use crate::host::server::{is_acting_primary, replica_traffic_paused, selected_db, DbGuard};
use crate::host::store::acl::Acl;
use crate::host::store::{Key, KeyKind};
use crate::rank::model::{base_of_meta, base_of_part, meta_key, slot_key, Job, Meta, Resolution};

use super::memory::{self, MetaOrigin};
use super::meta_hash::{self, is_marked_edited, mark_edited};
use super::replica;
use super::transit::{check_cluster, slot_in_transit, Transit};

// ------------------------------------------------------------------------------ events

/// Keyspace events (every class tally subscribes to) on any key, except tally's own
/// (`crate::registry::on_keyspace_event` drops those first). Never opens a key.
pub fn on_keyspace_event(ctx: &Context, class: NotifyEvent, event: &str, key: &[u8]) {
    // Whoever touched a meta hash (a user, the primary's effects on a replica, tally's own
    // RENAME), its meta must be read again before INCRBY trusts it.
    let db = selected_db(ctx);
    let acting = is_acting_primary(ctx);
    if let Some(base) = base_of_meta(key) {
        memory::known(|k| k.unverify(db, base));
    }
    // A slot order (boards with `CAPACITY`) holds what tally wrote: any other change to
    // the board's keys, or a move of them, and it is read again from the slot (by the
    // next write for a small slot, by the timer in steps for a large one).
    memory::orders(|o| o.forget(db, base_of_part(key).unwrap_or(key)));
    // On a primary, next totals follow tally's own writes only.
    if acting {
        memory::nexts(|n| {
            if n.any() {
                n.drop(db, base_of_part(key).unwrap_or(key));
            }
        });
    }
    let own = memory::lifecycle(|l| l.own_calls > 0);
    // Replicas and loads receive the primary's effects: they must not act themselves. A
    // replica's next totals follow those effects member by member (`replica`).
    if !acting {
        if !own {
            replica::on_event(ctx, db, event, key);
        }
        return;
    }
    if own {
        return;
    }
    if let Some(base) = base_of_part(key) {
        on_part_event(ctx, db, base, base_of_meta(key).is_some(), event);
        return;
    }
    let job = match event {
        "rename_from" => {
            memory::lifecycle(|l| l.rename_from = Some((db, key.to_vec())));
            return;
        }
        "rename_to" => {
            let from = memory::lifecycle(|l| {
                l.jobs.overwritten(db, key);
                l.rename_from.take()
            });
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

/// True if `name` is a board tally knows (at its name, or at the old name of a rename
/// still queued).
fn is_board(db: c_int, name: &[u8]) -> bool {
    resolve_base(db, name).is_some_and(|base| memory::known(|k| k.get(db, &base)).is_some())
}

/// An event on `base|meta` or `base|slot|<index>`.
fn on_part_event(ctx: &Context, db: c_int, base: &[u8], is_meta: bool, event: &str) {
    let known = memory::known(|k| k.get(db, base));
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
            // back from what tally knows, so the board keeps answering.
            if let (true, Some(meta)) = (is_meta, known) {
                put_back_meta(ctx, db, base, meta);
            }
        }
    }
}

/// The meta hash `meta_hash` of the board at `base` (one tally knows) was found not to hold a valid
/// meta though no event told of an edit, or the job putting it back has run already: a
/// field of it whose TTL has passed and that the server has not reclaimed yet (the
/// server's hash field reads treat such a field as absent, and no event fires until it is
/// reclaimed, lazily by a native command or by active expiry). That is the edit the
/// `hexpired` event of its reclaiming would report, and it is handled as that event is
/// ([`on_part_event`]): the board goes in quarantine and its meta is put back (as after an
/// `HDEL` of the field). Returns the meta the queued job puts back, which a read answers
/// from meanwhile (`None`: tally does not know the board, acts on no keys here, as on a
/// replica, or the meta may be on the other node of a reshard: the caller answers as
/// before).
pub(super) fn broken_meta_found(
    ctx: &Context,
    db: c_int,
    base: &[u8],
    meta_hash: &Key,
) -> Option<Meta> {
    if let Some(meta) = pending_restore(db, base) {
        return Some(meta);
    }
    // Only a hash is put back (`restore_meta`): a meta overwritten by another type stays.
    if meta_hash.kind() != KeyKind::Hash {
        return None;
    }
    let meta = memory::known(|k| k.get(db, base))?;
    if !is_acting_primary(ctx) || slot_in_transit(ctx, base) {
        return None;
    }
    quarantine_edited(ctx, db, base);
    put_back_meta(ctx, db, base, meta);
    Some(meta)
}

/// Queues the job that puts back `meta`, the meta hash of the board at `base` as tally
/// knows it.
fn put_back_meta(ctx: &Context, db: c_int, base: &[u8], meta: Meta) {
    push_job(
        ctx,
        Job::RestoreMeta {
            db,
            base: base.to_vec(),
            meta,
        },
    );
}

/// Quarantine after a native edit, recorded in memory and (by a job) in the meta hash.
fn quarantine_edited(ctx: &Context, db: c_int, base: &[u8]) {
    // Totals computed from the keys as they were are no longer true (the first read of a
    // large board asks the timer for new ones).
    // A rebuild in steps (see `repair`) stops: the edit may be a forgery, and only a
    // write whose caller may write every part starts it again.
    let newly = memory::quarantine(|q| {
        q.drop_view(db, base);
        q.cancel_rebuild(db, base);
        q.insert(db, base)
    });
    if newly {
        push_job(
            ctx,
            Job::MarkEdited {
                db,
                base: base.to_vec(),
            },
        );
    }
}

// --------------------------------------------------------------------------- the queue

/// How long a job waits for a client pause to end before looking again.
const PAUSED_RETRY_MS: u64 = 20;

pub(super) fn has_jobs() -> bool {
    memory::lifecycle(|l| !l.jobs.is_empty())
}

/// What the queued jobs make of the board at `name` (see `crate::rank::model::JobQueue::resolve`).
pub(super) fn resolve(db: c_int, name: &[u8]) -> Resolution {
    memory::lifecycle(|l| l.jobs.resolve(db, name))
}

/// Where the derived keys of `name` are right now: `name` itself, the old name of a rename
/// whose job has not run yet, or `None` if they belong to a deleted board.
pub(super) fn resolve_base(db: c_int, name: &[u8]) -> Option<Vec<u8>> {
    memory::lifecycle(|l| l.jobs.resolve_base(db, name))
}

/// The meta a queued job is about to put back at `base|meta` (a user deleted, renamed
/// away or garbled it), if any. Until that job runs (on Redis 7.0 from a timer, and on
/// every server not before a client pause ends), reads answer from it.
pub(super) fn pending_restore(db: c_int, base: &[u8]) -> Option<Meta> {
    memory::lifecycle(|l| l.jobs.pending_restore(db, base))
}

/// Queues `job` and asks the server to run the queue right after the current command or
/// event.
pub(super) fn push_job(ctx: &Context, job: Job) {
    memory::lifecycle(|l| l.jobs.push(job));
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
    let armed = memory::lifecycle(|l| std::mem::replace(&mut l.job_timer_armed, true));
    if !armed {
        ctx.create_timer(Duration::from_millis(delay_ms), jobs_timer, ());
    }
}

fn jobs_timer(ctx: &Context, _: ()) {
    memory::lifecycle(|l| l.job_timer_armed = false);
    run_jobs(ctx, false);
}

/// Runs queued jobs before a leaderboard write, so the write never lands on stale keys.
/// A command may replicate even during a pause (inside MULTI/EXEC with the pause).
pub(super) fn flush_jobs(ctx: &Context) {
    if has_jobs() {
        run_jobs(ctx, true);
    }
}

/// How many times a write opens a board whose keys expire while being opened.
const OPEN_ATTEMPTS: usize = 3;

/// The opening of the board `name` for a write (INCRBY, REM): checks its name against the
/// cluster and takes the caller's ACL, then calls `open(acl, transit)`, which opens and
/// checks the board's keys, until an attempt opens them with no lifecycle job queued.
/// Opening a key can expire it lazily (or a part of the board) and queue a job that would
/// undo the write: such an attempt (`open` answers `Ok(None)`) writes nothing, lets the
/// jobs run and starts over on the keys as they are now.
pub(super) fn open_for_write<T>(
    ctx: &Context,
    name: &[u8],
    mut open: impl FnMut(&Acl, &Transit) -> Result<Option<T>>,
) -> Result<T> {
    let flags = ctx.get_flags();
    check_cluster(&flags, name)?;
    let acl = Acl::of(ctx)?;
    let transit = Transit::new(ctx, &flags, name);
    for _ in 0..OPEN_ATTEMPTS {
        flush_jobs(ctx);
        if let Some(opened) = open(&acl, &transit)? {
            return Ok(opened);
        }
    }
    Err(Error::TryAgain(
        "the leaderboard's keys keep expiring while it is opened".into(),
    ))
}

/// Runs every queued job, in order. Outside a command, waits while a pause is in force.
fn run_jobs(ctx: &Context, in_command: bool) {
    if !has_jobs() {
        return;
    }
    if !is_acting_primary(ctx) {
        memory::lifecycle(|l| l.jobs.clear());
        return;
    }
    if !in_command && replica_traffic_paused() {
        arm_job_timer(ctx, PAUSED_RETRY_MS);
        return;
    }
    let jobs = memory::lifecycle(|l| l.jobs.take());
    let db_guard = DbGuard::new(ctx);
    for job in jobs {
        if !db_guard.select(job.db()) {
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

// ------------------------------------------------------------------------- whole parts

/// Runs a command as tally itself (its keyspace events are not a user's edits).
fn own_call(ctx: &Context, command: &str, args: &[&[u8]]) {
    memory::lifecycle(|l| l.own_calls += 1);
    let _ = ctx.call(command, args);
    memory::lifecycle(|l| l.own_calls = l.own_calls.saturating_sub(1));
}

/// Existing parts of the board at `base`: meta first (if present), then slot hashes.
/// A hash at `base|meta` that is not a valid meta is the board's meta a user garbled
/// when tally knows the board (it would put it back): it goes (or moves) with the board,
/// rather than stay behind as a name that answers WRONGTYPE.
fn parts(ctx: &Context, db: c_int, base: &[u8]) -> Vec<Vec<u8>> {
    let stored = meta_hash::read_at(ctx, base);
    let known = memory::known(|k| k.get(db, base));
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

pub(super) fn delete_parts(ctx: &Context, db: c_int, base: &[u8]) {
    unlink(ctx, &parts(ctx, db, base));
    expiry::unschedule(ctx, &meta_key(base));
    memory::with(|s| s.forget_board(db, base));
}

pub(super) fn remove_whole(ctx: &Context, db: c_int, base: &[u8]) {
    let mut names = parts(ctx, db, base);
    if Key::open_bytes(ctx, base, false).is_some_and(|k| k.kind() == KeyKind::Zset) {
        names.push(base.to_vec());
    }
    unlink(ctx, &names);
    expiry::unschedule(ctx, &meta_key(base));
    memory::with(|s| s.forget_board(db, base));
}

/// Moves the parts of `from` to `to`. A target name already holding a key that is not a
/// part of this board (someone else's `to|meta`, say) is never overwritten: the renamed
/// board is removed whole instead.
pub(super) fn rename_parts(ctx: &Context, db: c_int, from: &[u8], to: &[u8]) {
    let names = parts(ctx, db, from);
    let meta = meta_hash::read_at(ctx, from).or_else(|| memory::known(|k| k.get(db, from)));
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
        memory::with(|s| s.forget_board(db, from));
        return;
    }
    // Slot hashes first, meta last: until the meta moves, `from` still owns the slots.
    let mut effects = Effects::new();
    for (name, target) in names.iter().zip(&targets).rev() {
        own_call(ctx, "RENAME", &[name.as_slice(), target.as_slice()]);
        effects.command(c"RENAME").arg(name).arg(target);
    }
    effects.emit(ctx);
    let quarantined = memory::quarantine(|q| q.contains(db, from));
    expiry::unschedule(ctx, &meta_key(from));
    memory::with(|s| s.forget_board(db, from));
    if let Some(meta) = meta {
        memory::known(|k| k.note(db, to, meta, MetaOrigin::Written));
        if quarantined {
            memory::quarantine(|q| q.insert(db, to));
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
pub(super) fn restore_meta(ctx: &Context, db: c_int, base: &[u8], meta: Meta) -> bool {
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
        KeyKind::Hash => meta_hash::read(&key).is_none(),
        _ => false,
    };
    // A board lives on in its sorted set, or, never incremented yet, in its meta alone: a
    // garbled meta of such a board tally still knows (no removal ran since) is put back
    // too. A deleted one is not: nothing is left of that board.
    let empty_board = key.kind() == KeyKind::Hash && memory::known(|k| k.get(db, base)).is_some();
    if !(zset_here || empty_board) || !broken {
        return false;
    }
    let mut effects = Effects::new();
    meta_hash::write_all(&key, &name, &meta, &mut effects);
    effects.emit(ctx);
    let marked = is_marked_edited(&key);
    drop(key);
    memory::known(|k| k.note(db, base, meta, MetaOrigin::Written));
    let quarantined = memory::quarantine(|q| q.contains(db, base));
    if let Some(due) = meta.next_due() {
        expiry::schedule(ctx, &name, due);
    }
    // The edit that broke the meta quarantined the board, but its `MarkEdited` job (queued
    // first) found no valid meta to record that in: record it now, or a restart or a
    // failover would forget the quarantine.
    if quarantined && !marked {
        mark_edited(ctx, base, true);
    }
    true
}
