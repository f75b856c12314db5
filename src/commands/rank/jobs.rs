//! The jobs that follow keyspace events on a board's keys (queued by `events`, where writing
//! keys is not allowed): DEL, UNLINK, EXPIRE and RENAME of the main key carry the derived
//! keys along; the loss of a part to expiry or eviction removes the board whole; a meta
//! deleted by a user is put back; a native edit is recorded in the meta.
//!
//! Jobs run from a post-notification job (Redis 7.2+, Valkey) or a 1 ms timer (Redis 7.0),
//! and first thing in every leaderboard write. Outside a command they wait while
//! replication traffic must be avoided (`CLIENT PAUSE WRITE`, failover): replicating then
//! aborts Redis. Until a job has run, reads resolve names through the queue
//! ([`resolve_base`], [`pending_restore`]).
//!
//! Owns: when the queue (`crate::rank::JobQueue`) runs. May not touch: keys other than
//! through `parts`.

use std::os::raw::c_int;
use std::time::Duration;

use redis_module::{Context, Status};

use crate::rank::{Job, Meta, Resolution};
use crate::server::{is_acting_primary, replica_traffic_paused, DbGuard};

use super::parts::{delete_parts, mark_edited, remove_whole, rename_parts, restore_meta};
use super::state;
use super::transit::slot_in_transit;

/// How long a job waits for a client pause to end before looking again.
const PAUSED_RETRY_MS: u64 = 20;

pub(super) fn has_jobs() -> bool {
    state::with(|s| !s.jobs.is_empty())
}

/// What the queued jobs make of the board at `name` (see `crate::rank::JobQueue::resolve`).
pub(super) fn resolve(db: c_int, name: &[u8]) -> Resolution {
    state::with(|s| s.jobs.resolve(db, name))
}

/// Where the derived keys of `name` are right now: `name` itself, the old name of a rename
/// whose job has not run yet, or `None` if they belong to a deleted board.
pub(super) fn resolve_base(db: c_int, name: &[u8]) -> Option<Vec<u8>> {
    state::with(|s| s.jobs.resolve_base(db, name))
}

/// The meta a queued job is about to put back at `base|meta` (a user deleted, renamed
/// away or garbled it), if any. Until that job runs (on Redis 7.0 from a timer, and on
/// every server not before a client pause ends), reads answer from it.
pub(super) fn pending_restore(db: c_int, base: &[u8]) -> Option<Meta> {
    state::with(|s| s.jobs.pending_restore(db, base))
}

/// Queues `job` and asks the server to run the queue right after the current command or
/// event.
pub(super) fn push_job(ctx: &Context, job: Job) {
    state::with(|s| s.jobs.push(job));
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
    let armed = state::with(|s| std::mem::replace(&mut s.job_timer_armed, true));
    if !armed {
        ctx.create_timer(Duration::from_millis(delay_ms), jobs_timer, ());
    }
}

fn jobs_timer(ctx: &Context, _: ()) {
    state::with(|s| s.job_timer_armed = false);
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
        state::with(|s| s.jobs.clear());
        return;
    }
    if !in_command && replica_traffic_paused() {
        arm_job_timer(ctx, PAUSED_RETRY_MS);
        return;
    }
    let jobs = state::with(|s| s.jobs.take());
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
