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
//! Owns: the queue and when it runs. May not touch: keys other than through `parts`.

use std::os::raw::c_int;
use std::time::Duration;

use redis_module::{Context, Status};

use crate::rank::Meta;
use crate::server::{is_acting_primary, replica_traffic_paused, DbGuard};

use super::parts::{delete_parts, mark_edited, remove_whole, rename_parts, restore_meta};
use super::state;
use super::transit::slot_in_transit;

/// How long a job waits for a client pause to end before looking again.
const PAUSED_RETRY_MS: u64 = 20;

/// Work on a board's keys that a keyspace event asked for.
pub(super) enum Job {
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
    /// (`_edited`), so it survives a restart or a failover.
    MarkEdited { db: c_int, base: Vec<u8> },
}

impl Job {
    pub(super) fn db(&self) -> c_int {
        match self {
            Job::Delete { db, .. }
            | Job::Rename { db, .. }
            | Job::RemoveWhole { db, .. }
            | Job::RestoreMeta { db, .. }
            | Job::MarkEdited { db, .. } => *db,
        }
    }

    /// SWAPDB: the job follows its database.
    pub(super) fn swap_db(&mut self, swap: impl Fn(c_int) -> c_int) {
        match self {
            Job::Delete { db, .. }
            | Job::Rename { db, .. }
            | Job::RemoveWhole { db, .. }
            | Job::RestoreMeta { db, .. }
            | Job::MarkEdited { db, .. } => *db = swap(*db),
        }
    }
}

pub(super) fn has_jobs() -> bool {
    state::with(|s| !s.jobs.is_empty())
}

/// What the queued jobs make of the board at `name`.
pub(super) enum Resolution {
    /// Its derived keys are at this base: `name` itself, or the old name of a rename whose
    /// job has not run yet.
    At(Vec<u8>),
    /// A queued job removes it: whole (a part expired or was evicted; the sorted set at
    /// `name` is that board's and goes too), or its parts after a DEL of its sorted set.
    Removed { whole: bool },
}

pub(super) fn resolve(db: c_int, name: &[u8]) -> Resolution {
    state::with(|s| {
        let mut current = name.to_vec();
        for job in s.jobs.iter().rev() {
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
    state::with(|s| {
        s.jobs.iter().rev().find_map(|job| match job {
            Job::RestoreMeta {
                db: d,
                base: b,
                meta,
            } if *d == db && b == base => Some(*meta),
            _ => None,
        })
    })
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
    let jobs = state::with(|s| std::mem::take(&mut s.jobs));
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
