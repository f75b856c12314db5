//! TSRANK.*: sliding-window leaderboards on native keys (layout: `crate::rank::model`).
//!
//! Every command parses and checks all of its arguments and ACL permissions before the
//! first write. Writes go through the key API and are replicated only as
//! `crate::host::replicate::Effects` with absolute values (`HSET`, `ZADD`, `ZREM`, `HDEL`, `DEL`,
//! `UNLINK`, `RENAME`). Reads on a primary are exact even while an expired slot is still
//! being subtracted (see `crate::rank::model`).
//!
//! Files, by concern, each importing only files listed after it (each says what it owns
//! and may not touch):
//! * this one: the family's registration and TSRANK.CREATE;
//! * `standings`: AROUND, RANK (its TIES form; the plain form is `read`'s), MSCORE;
//! * `incrby`: TSRANK.INCRBY; `rem`: TSRANK.REM; `read`: TOP, SCORE, RANK, INFO, HISTORY;
//! * `visit`: the expiry timer's visit of a board: the resumable subtraction (drain) of
//!   the slots that left the window, or the visit `repair` or `next` makes;
//! * `board`: opening a board for a read;
//! * `repair`: a quarantined board's totals from its slot hashes, at once before a write,
//!   in steps on the keys (a rebuild), in steps in memory (for reads);
//! * `lifecycle`: the life of a board made of several keys: the keyspace events on its keys
//!   (DEL/RENAME/EXPIRE of `key`, parts lost to expiry or eviction, native edits and the
//!   quarantine they cause) queue jobs, which move or remove its parts whole;
//! * `replica`: a replica's next totals, following its primary's effects;
//! * `next`: the totals without a large oldest slot, ready before it leaves, for the reads
//!   meanwhile;
//! * `meta_hash`: the meta hash's `_tally` and `_slots` fields (both layouts), the verified
//!   copy a command may use instead, and the `_edited` mark of a quarantine;
//! * `slots`: reading a board's slot hashes (a member's count, pending and live slots);
//! * `transit`: the cluster's rules: a hash tag in the name, is the board's slot moving;
//! * `memory`: what the family keeps in memory, each concern's part (`crate::rank::model`)
//!   borrowed alone.
//!
//! May not touch (this file): other families' keys; raw module calls.
//!
//! Resharding (cluster): MIGRATE moves a board's keys in batches, so for a while they sit
//! on two nodes. A command that finds a key of the board missing (main key without meta,
//! meta-less new board, a slot hash that meta's `lo ..= hi` says may exist) asks whether
//! the slot is MIGRATING or IMPORTING here, and if so answers TRYAGAIN without writing
//! (`transit::Transit`). A new slot hash outside `lo ..= hi` exists nowhere and is created freely:
//! the common write path never asks. The expiry timer leaves such a board alone until the
//! move is over, and a `del` of the main key by MIGRATE does not delete the derived keys.

mod board;
mod incrby;
mod key_board;
mod lifecycle;
mod memory;
mod meta_hash;
mod next;
mod read;
mod rem;
mod repair;
mod replica;
mod slots;
mod standings;
mod transit;
mod visit;

use std::os::raw::c_int;

use redis_module::{Context, NotifyEvent, RedisString};

use crate::args::{set_once, Args};
use crate::cmddocs::{integer, string, Doc, KEY};
use crate::error::{Error, Result};
use crate::host::cmdinfo::{command, first_key, Command, INSERT};
use crate::host::config;
use crate::host::replicate::Effects;
use crate::host::reply::Reply;
use crate::host::server::selected_db;
use crate::host::store::acl::Acl;
use crate::host::store::{notify, Key, KeyKind};
use crate::rank::model::{meta_key, validate_capacity, validate_settings, Meta};

pub use lifecycle::on_keyspace_event;
pub use memory::memory_bytes;
pub use visit::{expire, release};

use lifecycle::flush_jobs;
use memory::MetaOrigin;
use transit::{check_cluster, Transit};

/// The board a derived key (`<base>|meta`, `<base>|slot|<n>`) belongs to. Runs for every
/// keyspace event of the server on a key tally does not track: most names are turned
/// away by their last bytes (`crate::rank::model::may_be_part`).
fn owner_of_part(name: &[u8]) -> Option<&[u8]> {
    crate::rank::model::base_of_part(name)
}

/// The family's commands, in registration order, each written beside its handler.
pub const COMMANDS: &[Command] = &[
    CREATE,
    incrby::INCRBY,
    read::TOP,
    read::SCORE,
    standings::RANK,
    standings::MSCORE,
    standings::AROUND,
    read::INFO,
    read::HISTORY,
    rem::REM,
];

/// This family, for the layer around the families.
pub const FAMILY: crate::family::Family = crate::family::Family {
    marker_word: Some(crate::layout::RANK),
    expire,
    owner_of_part,
    on_keyspace_event,
    // `forget` does nothing: tally never deletes a board's keys behind its own bookkeeping.
    flushed: |db| memory::with(|s| s.forget_db(db)),
    swapped: |a, b| memory::with(|s| s.swap_dbs(|d| swap_db(d, a, b))),
    loading: || memory::with(|s| s.forget_db(-1)),
    info: || {
        vec![
            (c"cache_mismatches", memory::mismatches() as i64),
            (c"rank_memory_bytes", memory_bytes() as i64),
        ]
    },
    // What the family holds in memory is bookkeeping tally needs (known metas, the
    // quarantine, jobs), not a cache it may drop: reported as `rank_memory_bytes` and in
    // the module's `state_bytes`.
    state_bytes: memory_bytes,
    ..crate::family::Family::new(COMMANDS, "tsrank.")
};

/// Database `d`'s number after SWAPDB `a` `b`.
fn swap_db(d: c_int, a: c_int, b: c_int) -> c_int {
    match d {
        d if d == a => b,
        d if d == b => a,
        d => d,
    }
}

pub const CREATE: Command = command! {
    c"tsrank.create" => create, -2, c"write deny-oom", &[first_key(INSERT)], c"write", &CREATE_DOC
};

const CREATE_DOC: Doc = Doc {
    summary: c"Create a sliding-window leaderboard",
    complexity: c"O(1)",
    args: &[
        KEY,
        string(c"window_dur").token(c"WINDOW").optional(),
        string(c"slot_dur").token(c"SLOT").optional(),
        integer(c"k").token(c"CAPACITY").optional(),
    ],
};

/// TSRANK.CREATE key [WINDOW dur] [SLOT dur] [CAPACITY k]
pub fn create(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let mut args = Args::new(rest);
    let (mut window, mut slot, mut capacity) = (None, None, None);
    while !args.is_done() {
        match args.next_keyword()?.as_str() {
            "WINDOW" => set_once(&mut window, args.next_duration()?)?,
            "SLOT" => set_once(&mut slot, args.next_duration()?)?,
            "CAPACITY" => set_once(&mut capacity, args.next_i64()?)?,
            _ => return Err(Error::Syntax),
        }
    }
    let window = window.unwrap_or_else(|| config::RANK_WINDOW.ms());
    let slot = slot.unwrap_or_else(|| config::RANK_SLOT.ms());
    validate_settings(window, slot)?;
    if let Some(capacity) = capacity {
        validate_capacity(capacity)?;
    }
    let flags = ctx.get_flags();
    check_cluster(&flags, name.as_slice())?;
    let acl = Acl::of(ctx)?;
    let meta_name = meta_key(name.as_slice());
    // Touch both keys first: a lazy expiry queues a lifecycle job, run before writing.
    drop(Key::open(ctx, name, false));
    drop(acl.open(ctx, &meta_name, false)?);
    flush_jobs(ctx);
    let meta_hash = acl.open(ctx, &meta_name, true)?;
    let zset = Key::open(ctx, name, true);
    if zset.kind() != KeyKind::Empty || meta_hash.kind() != KeyKind::Empty {
        return Err(Error::KeyExists);
    }
    // During a reshard the meta hash may exist on the other node.
    Transit::new(ctx, &flags, name.as_slice()).missing()?;
    let meta = Meta::with_capacity(window, slot, capacity.unwrap_or(0));
    let mut effects = Effects::new();
    meta_hash::write_all(&meta_hash, &meta_name, &meta, &mut effects);
    effects.emit(ctx);
    let db = selected_db(ctx);
    memory::known(|k| k.note(db, name.as_slice(), meta, MetaOrigin::Written));
    notify(ctx, NotifyEvent::ZSET, c"tsrank.create", name);
    Ok(Reply::Ok)
}
