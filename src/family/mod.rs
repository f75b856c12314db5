//! What the layer around the families (`crate::registry`) needs of each family: the
//! [`Family`] entry a family's folder declares; and what a family needs of the others,
//! through the table the registry installs at load ([`all`]): the read caches' one budget
//! (`cache_budget`) and forgetting a key tally deleted itself ([`forget_deleted`]). Below
//! every family, so no family imports the registry that lists it.
//!
//! May not touch: keys (it only names the hooks).

pub mod cache_budget;

use std::ffi::CStr;
use std::os::raw::c_int;
use std::sync::OnceLock;

use redis_module::{Context, NotifyEvent};

use crate::expiry::Visit;
use crate::host::cmdinfo::Command;
use crate::host::store::Key;

/// What the layer around the families needs of each. Every family has commands and fires
/// its own keyspace events; the other parts are optional: [`Family::new`] leaves each one
/// doing nothing, and a family sets those it has (`..Family::new(COMMANDS, "stats.")`).
/// Adding a family is its folder and one entry in `crate::registry::FAMILIES`.
pub struct Family {
    /// Its commands, one line each (see [`Command`]): registration, `COMMAND INFO`, key
    /// specs and ACL categories are generated from them.
    pub commands: &'static [Command],
    /// The prefix of the keyspace events its write commands fire (`tscounter.`): tally's
    /// own writes keep caches and schedule in step themselves, so these are ignored.
    pub event_prefix: &'static str,
    /// The word that starts the `_tally` marker of its objects' hashes, for families whose
    /// objects tally trims (`None`: its keys are not hashes, and the server expires them).
    pub marker_word: Option<&'static str>,
    /// Trims the object at `name` (opened read-only and untouched in `key`, whose marker
    /// is `marker`) at `now`, within the deadline; opens for writing only with work to do.
    pub expire: ExpireVisit,
    /// The name of the object a derived key (`<base>|meta`) belongs to, for families whose
    /// objects span several keys. Runs for keyspace events on keys tally does not track
    /// whose name contains `crate::rank::model::PART_BYTE`, which every derived name contains.
    pub owner_of_part: for<'a> fn(&'a [u8]) -> Option<&'a [u8]>,
    /// Called for every keyspace event on a key tally tracks (any family); opens no key.
    pub on_keyspace_event: fn(ctx: &Context, class: NotifyEvent, event: &str, key: &[u8]),
    /// Tally deleted `name` in database `db` itself (no keyspace event tells anyone): the
    /// family drops what it keeps in memory of that key.
    pub forget: fn(db: c_int, name: &[u8]),
    /// Database `db` was flushed (-1: all of them).
    pub flushed: fn(db: c_int),
    /// Databases `a` and `b` were swapped.
    pub swapped: fn(a: c_int, b: c_int),
    /// The server starts loading a dataset: everything in memory may be stale.
    pub loading: fn(),
    /// The family's fields in `INFO tally` (names without the `tally_` prefix).
    pub info: fn() -> Vec<(&'static CStr, i64)>,
    /// Estimated bytes its read caches hold (counted against `tally.cache-max-memory`).
    pub cache_bytes: fn() -> usize,
    /// Estimated bytes of the bookkeeping it keeps in memory and may not drop (the
    /// leaderboards' known metas, quarantine and jobs): reported, never evicted.
    pub state_bytes: fn() -> usize,
}

impl Family {
    /// A family of `commands` whose events start with `event_prefix`, with every optional
    /// part doing nothing: no marker, no expiry visit, no derived keys, nothing in memory.
    pub const fn new(commands: &'static [Command], event_prefix: &'static str) -> Family {
        Family {
            commands,
            event_prefix,
            marker_word: None,
            expire: |_, _, _, _, _, _| Visit::Done,
            owner_of_part: |_| None,
            on_keyspace_event: |_, _, _, _| {},
            forget: |_, _| {},
            flushed: |_| {},
            swapped: |_, _| {},
            loading: || {},
            info: Vec::new,
            cache_bytes: || 0,
            state_bytes: || 0,
        }
    }
}

/// `(ctx, key, name, marker, now, deadline_us)`: see [`Family::expire`].
pub type ExpireVisit = fn(&Context, Key, &[u8], &[u8], i64, u64) -> Visit;

/// The families, as the registry lists them; installed once, when the module loads.
static INSTALLED: OnceLock<&'static [Family]> = OnceLock::new();

/// Installs the registry's table; called once, first thing in the module's `init`.
pub fn install(families: &'static [Family]) {
    // A second call (the module loaded twice in one process) keeps the first table, which
    // is the same one.
    let _ = INSTALLED.set(families);
}

/// Every family (empty before [`install`]).
pub fn all() -> &'static [Family] {
    INSTALLED.get().copied().unwrap_or(&[])
}

/// Tally deleted `name` itself (no keyspace event tells anyone): every family drops what
/// it keeps of the key, and the key leaves the event filter and the expiry schedule.
pub fn forget_deleted(ctx: &Context, name: &[u8]) {
    let db = crate::host::server::selected_db(ctx);
    crate::host::events::untrack(db, name);
    all().iter().for_each(|family| (family.forget)(db, name));
    crate::expiry::unschedule(ctx, name);
}
