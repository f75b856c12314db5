//! Keyspace events on a board's keys, from anyone but tally's own leaderboard commands: a
//! leaderboard is one object made of several keys (`crate::rank` layout), and these events
//! tell what happened to it. Understood from the known metas in `state` (never by opening
//! a key: an open inside the notification callback can lazily expire a key and lose
//! events), they queue `jobs`:
//!
//! * DEL, UNLINK, EXPIRE and RENAME of the main key carry the derived keys along;
//! * the loss of a part to expiry or eviction removes the board whole;
//! * a native edit of a part (`HSET`/`HDEL` on a slot hash or the meta, `ZADD` on the
//!   totals, `RENAME` of a part, ...) puts the board in quarantine: the timer never acts on
//!   a quarantined board (the edit may be a forgery by a user who may not touch the totals
//!   key); reads compute its totals from the slot hashes and the next write, whose caller's
//!   ACL covers every key, rebuilds the totals (`repair`);
//! * a meta deleted by a user is put back.
//!
//! Owns: the reading of events. May not touch: keys (jobs do the work).

use std::os::raw::c_int;

use redis_module::{Context, NotifyEvent};

use crate::rank::{base_of_meta, base_of_part, Job, Resolution};
use crate::server::{is_acting_primary, selected_db};

use super::jobs::{push_job, resolve, resolve_base};
use super::replica;
use super::state;

/// Keyspace events (every class tally subscribes to) on any key, except tally's own
/// (`crate::commands::on_keyspace_event` drops those first). Never opens a key.
pub fn on_keyspace_event(ctx: &Context, class: NotifyEvent, event: &str, key: &[u8]) {
    // Whoever touched a meta hash (a user, the primary's effects on a replica, tally's own
    // RENAME), its meta must be read again before INCRBY trusts it.
    let db = selected_db(ctx);
    let acting = is_acting_primary(ctx);
    let own = state::with(|s| {
        if let Some(base) = base_of_meta(key) {
            s.unverify(db, base);
        }
        // On a primary, next totals follow tally's own writes only.
        if acting && s.has_nexts() {
            s.drop_next(db, base_of_part(key).unwrap_or(key));
        }
        s.own_calls > 0
    });
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
            state::with(|s| s.rename_from = Some((db, key.to_vec())));
            return;
        }
        "rename_to" => {
            let from = state::with(|s| s.rename_from.take());
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
    resolve_base(db, name).is_some_and(|base| state::with(|s| s.known_meta(db, &base)).is_some())
}

/// An event on `base|meta` or `base|slot|<index>`.
fn on_part_event(ctx: &Context, db: c_int, base: &[u8], is_meta: bool, event: &str) {
    let known = state::with(|s| s.known_meta(db, base));
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

/// Quarantine after a native edit, recorded in memory and (by a job) in the meta hash.
fn quarantine_edited(ctx: &Context, db: c_int, base: &[u8]) {
    // Totals computed from the keys as they were are no longer true (the first read of a
    // large board asks the timer for new ones).
    // A rebuild in steps (see `rebuild`) stops: the edit may be a forgery, and only a
    // write whose caller may write every part starts it again.
    let newly = state::with(|s| {
        s.drop_view(db, base);
        s.cancel_rebuild(db, base);
        s.quarantine(db, base)
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
