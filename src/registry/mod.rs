//! Command families (one folder each) and what the layer around them needs: the
//! [`Family`] registry (each family's commands, marker word, expiry visit, keyspace-event
//! hook, state), and the hooks the expiry timer and the server events call.
//!
//! May not touch: raw module calls (those live in `store`, `reply`, `cmdinfo`,
//! `replicate` and `server`).

use std::ffi::CStr;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{Context, NotifyEvent};

use crate::expiry::{Visit, Visitor};
pub use crate::family::Family;
use crate::host::events::Hooks;
use crate::host::store::{Key, KeyKind};

pub const FAMILIES: [Family; 4] = [
    crate::counter::commands::FAMILY,
    crate::stats::commands::FAMILY,
    crate::rank::commands::FAMILY,
    crate::throttle::commands::FAMILY,
];

/// The family whose word starts `marker` (the word, then nothing or a space).
pub fn family_of(marker: &[u8]) -> Option<&'static Family> {
    FAMILIES.iter().find(|f| {
        f.marker_word.is_some_and(|word| {
            marker.starts_with(word.as_bytes()) && marker.get(word.len()).is_none_or(|&b| b == b' ')
        })
    })
}

/// The `_tally` marker of a hash key, if it has one.
pub fn marker_of(key: &Key) -> Option<Vec<u8>> {
    match key.kind() {
        KeyKind::Hash => key.hget(crate::layout::MARKER_FIELD.as_bytes()),
        _ => None,
    }
}

/// Keyspace events on the keys tally tracks, for every family: read caches of the key are dropped, keys that
/// arrive get an expiry visit soon and keys that go leave the schedule, and leaderboards
/// follow their main key and their parts. Opens no key (an open here can expire one
/// lazily, whose event would then be lost).
pub fn on_keyspace_event(ctx: &Context, class: NotifyEvent, event: &str, key: &[u8]) {
    if is_tally_event(event) {
        // tally's own writes keep its caches and schedule in step themselves.
        return;
    }
    crate::expiry::on_keyspace_event(ctx, class, event, key);
    for family in &FAMILIES {
        (family.on_keyspace_event)(ctx, class, event, key);
    }
}

/// The keyspace events tally fires for its own write commands (`tscounter.incrby`, ...).
pub fn is_tally_event(event: &str) -> bool {
    FAMILIES
        .iter()
        .any(|family| event.starts_with(family.event_prefix))
}

/// The object a derived key belongs to, if any family's objects span several keys.
fn owner_of(name: &[u8]) -> Option<&[u8]> {
    FAMILIES
        .iter()
        .find_map(|family| (family.owner_of_part)(name))
}

/// What tally does on server events.
pub const HOOKS: Hooks = Hooks {
    keyspace_event: on_keyspace_event,
    owner_of,
    // Only leaderboards have derived keys.
    part_byte: crate::rank::model::PART_BYTE,
    flushed,
    swapped,
    loading,
    info: info_fields,
};

/// Flushes, SWAPDB and loading replace data behind tally's back: each family drops what
/// it knows of the affected databases, and the schedule follows; after a load or SWAPDB a
/// fresh scan finds the tally objects again.
fn flushed(db: c_int) {
    FAMILIES.iter().for_each(|family| (family.flushed)(db));
    crate::expiry::forget_db(db);
}

fn swapped(a: c_int, b: c_int) {
    FAMILIES.iter().for_each(|family| (family.swapped)(a, b));
    crate::expiry::swap_dbs(a, b);
    crate::expiry::request_scan();
}

fn loading(ended: bool) {
    FAMILIES.iter().for_each(|family| (family.loading)());
    crate::expiry::forget_db(-1);
    if ended {
        crate::expiry::request_scan();
    }
}

fn info_fields() -> Vec<(&'static CStr, i64)> {
    let (stats, tracked, backlog, scanning) = crate::expiry::stats();
    let (filter_keys, filter_bytes) = crate::host::events::tracked_keys();
    let mut fields = vec![
        (c"tracked_objects", tracked as i64),
        (c"timer_ticks", stats.timer_ticks as i64),
        (c"keys_visited", stats.keys_visited as i64),
        (c"slots_expired", stats.slots_expired as i64),
        (c"last_tick_us", stats.last_tick_us as i64),
        (c"max_tick_us", stats.max_tick_us as i64),
        (c"expiry_backlog", backlog as i64),
        (c"scan_in_progress", i64::from(scanning)),
        (c"cache_bytes", crate::family::cache_budget::bytes() as i64),
        (c"state_bytes", state_bytes() as i64),
        (
            c"cache_max_memory",
            crate::host::config::cache_max_memory() as i64,
        ),
        (c"event_filter_keys", filter_keys as i64),
        (c"event_filter_bytes", filter_bytes as i64),
    ];
    for family in &FAMILIES {
        fields.extend((family.info)());
    }
    fields
}

/// Estimated bytes of every family's bookkeeping (see [`Family::state_bytes`]).
fn state_bytes() -> usize {
    FAMILIES.iter().map(|family| (family.state_bytes)()).sum()
}

/// What the expiry timer calls: the families' visits, behind one dispatch.
pub const EXPIRY_VISITOR: Visitor = Visitor {
    visit: expire_key,
    is_object: is_tally_object,
    release: crate::rank::commands::release,
};

/// True if `name` holds an object some family expires (used by the start-up scan).
fn is_tally_object(ctx: &Context, name: &[u8]) -> bool {
    Key::open_bytes_untouched(ctx, name)
        .as_ref()
        .and_then(marker_of)
        .is_some_and(|marker| family_of(&marker).is_some())
}

/// Visits a scheduled key for the expiry timer: the family that owns it trims it.
fn expire_key(ctx: &Context, name: &[u8], now: i64, deadline_us: u64) -> Visit {
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
        match family_of(&marker) {
            Some(family) => (family.expire)(ctx, key, name, &marker, now, deadline_us),
            None => Visit::Done,
        }
    }));
    outcome.unwrap_or(Visit::Done)
}
