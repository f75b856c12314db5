//! Command families (one file each) and what they share: the handler wrapper that turns
//! results into replies and catches any panic, and the dispatch used by the expiry timer.

pub mod counter;
pub mod mirror;
pub mod rank;
pub mod stats;

use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{Context, NotifyEvent, RedisResult, RedisString, RedisValue};

use crate::error::{Error, Result};
use crate::expiry::Visit;
use crate::reply::{send_error, Reply};
use crate::store::{Key, KeyKind};

/// Runs a command body: checks the minimum argument count, sends its reply or error, and
/// turns a panic (a bug) into an error reply instead of aborting the server.
pub fn run(
    ctx: &Context,
    args: Vec<RedisString>,
    min_args: usize,
    body: fn(&Context, &RedisString, &[&[u8]]) -> Result<Reply>,
) -> RedisResult {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let name = args
            .first()
            .map(|a| a.to_string_lossy())
            .unwrap_or_default();
        let Some(key) = args.get(1).filter(|_| args.len() >= min_args) else {
            return Err(Error::Arity(name));
        };
        let rest: Vec<&[u8]> = args.iter().skip(2).map(|a| a.as_slice()).collect();
        body(ctx, key, &rest)
    }));
    match outcome {
        Ok(Ok(reply)) => reply.send(ctx),
        Ok(Err(error)) => send_error(ctx, &error.to_string()),
        Err(_) => send_error(
            ctx,
            "ERR internal error in tally (the command was not applied)",
        ),
    }
    Ok(RedisValue::NoReply)
}

/// The `_tally` marker of a hash key, if it has one.
pub fn marker_of(key: &Key) -> Option<Vec<u8>> {
    match key.kind() {
        KeyKind::Hash => key.hget(crate::counter::MARKER_FIELD.as_bytes()),
        _ => None,
    }
}

/// True if a `_tally` marker value starts with the family word `family`.
pub fn has_family(marker: &[u8], family: &str) -> bool {
    marker.starts_with(family.as_bytes()) && marker.get(family.len()).is_none_or(|&b| b == b' ')
}

/// Keyspace events, for every family: read caches of the key are dropped, keys that
/// arrive get an expiry visit soon and keys that go leave the schedule, and leaderboards
/// follow their main key and their parts. Opens no key (an open here can expire one
/// lazily, whose event would then be lost).
pub fn on_keyspace_event(ctx: &Context, class: NotifyEvent, event: &str, key: &[u8]) {
    mirror::forget(crate::expiry::selected_db(ctx), key);
    crate::expiry::on_keyspace_event(ctx, class, event, key);
    rank::on_keyspace_event(ctx, class, event, key);
}

/// Tally deleted `name` itself (no keyspace event tells anyone): drop its read cache and
/// its expiry schedule entry.
pub fn forget_deleted(ctx: &Context, name: &[u8]) {
    mirror::forget(crate::expiry::selected_db(ctx), name);
    crate::expiry::unschedule(ctx, name);
}

/// `MEMORY USAGE` of a key, in bytes (0 if unavailable).
pub fn memory_usage(ctx: &Context, name: &[u8]) -> i64 {
    match ctx.call("MEMORY", &[&b"USAGE"[..], name][..]) {
        Ok(RedisValue::Integer(n)) => n,
        _ => 0,
    }
}

/// True if `name` holds an object some family expires (used by the start-up scan).
pub fn is_tally_object(ctx: &Context, name: &[u8]) -> bool {
    Key::open_bytes_untouched(ctx, name)
        .as_ref()
        .and_then(marker_of)
        .is_some()
}

/// Visits a scheduled key for the expiry timer: the family that owns it trims it.
pub fn expire_key(ctx: &Context, name: &[u8], now: i64, deadline_us: u64) -> Visit {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // Read the marker without touching the key's LRU/LFU; families open for writing
        // only when they have something to change (a write open invalidates WATCH).
        let Some(key) = Key::open_bytes_untouched(ctx, name) else {
            return Visit::Done;
        };
        let Some(marker) = marker_of(&key) else {
            crate::expiry::unschedule(ctx, name);
            return Visit::Done;
        };
        if crate::counter::Counter::is_counter_marker(&marker) {
            counter::expire(ctx, key, name, now, deadline_us)
        } else if has_family(&marker, stats::FAMILY) {
            stats::expire(ctx, &key, name, &marker, now, deadline_us)
        } else if has_family(&marker, rank::FAMILY) {
            drop(key);
            rank::expire(ctx, name, &marker, now, deadline_us)
        } else {
            Visit::Done
        }
    }));
    outcome.unwrap_or(Visit::Done)
}
