//! The keys of a board as a whole, for the lifecycle jobs (`jobs`): listing its parts,
//! deleting, moving or removing them together, putting back a meta a user deleted or
//! garbled, and recording a quarantine in the meta (`_edited`).
//!
//! Owns: whole parts (they move or go, never their content) and the `_edited` field. May
//! not touch: the totals or slot counts, the `_tally` and `_slots` fields other than
//! through `meta`; replicates only through [`Effects`].

use std::os::raw::c_int;

use redis_module::Context;

use crate::expiry;
use crate::layout::RANK_EDITED_FIELD;
use crate::rank::{meta_key, slot_key, Meta};
use crate::replicate::Effects;
use crate::store::{Key, KeyKind};

use super::meta;
use super::state::{self, Seen};
use super::transit::slot_in_transit;

/// Runs a command as tally itself (its keyspace events are not a user's edits).
fn own_call(ctx: &Context, command: &str, args: &[&[u8]]) {
    state::with(|s| s.own_calls += 1);
    let _ = ctx.call(command, args);
    state::with(|s| s.own_calls = s.own_calls.saturating_sub(1));
}

/// Existing parts of the board at `base`: meta first (if present), then slot hashes.
/// A hash at `base|meta` that is not a valid meta is the board's meta a user garbled
/// when tally knows the board (it would put it back): it goes (or moves) with the board,
/// rather than stay behind as a name that answers WRONGTYPE.
fn parts(ctx: &Context, db: c_int, base: &[u8]) -> Vec<Vec<u8>> {
    let stored = meta::read_at(ctx, base);
    let known = state::with(|s| s.known_meta(db, base));
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
    state::with(|s| s.forget_board(db, base));
}

pub(super) fn remove_whole(ctx: &Context, db: c_int, base: &[u8]) {
    let mut names = parts(ctx, db, base);
    if Key::open_bytes(ctx, base, false).is_some_and(|k| k.kind() == KeyKind::Zset) {
        names.push(base.to_vec());
    }
    unlink(ctx, &names);
    expiry::unschedule(ctx, &meta_key(base));
    state::with(|s| s.forget_board(db, base));
}

/// Moves the parts of `from` to `to`. A target name already holding a key that is not a
/// part of this board (someone else's `to|meta`, say) is never overwritten: the renamed
/// board is removed whole instead.
pub(super) fn rename_parts(ctx: &Context, db: c_int, from: &[u8], to: &[u8]) {
    let names = parts(ctx, db, from);
    let meta = meta::read_at(ctx, from).or_else(|| state::with(|s| s.known_meta(db, from)));
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
        state::with(|s| s.forget_board(db, from));
        return;
    }
    // Slot hashes first, meta last: until the meta moves, `from` still owns the slots.
    let mut effects = Effects::new();
    for (name, target) in names.iter().zip(&targets).rev() {
        own_call(ctx, "RENAME", &[name.as_slice(), target.as_slice()]);
        effects.command(c"RENAME").arg(name).arg(target);
    }
    effects.emit(ctx);
    let quarantined = state::with(|s| s.is_quarantined(db, from));
    expiry::unschedule(ctx, &meta_key(from));
    state::with(|s| s.forget_board(db, from));
    if let Some(meta) = meta {
        state::with(|s| {
            s.note_meta(db, to, meta, Seen::Written);
            if quarantined {
                s.quarantine(db, to);
            }
        });
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
        KeyKind::Hash => meta::read(&key).is_none(),
        _ => false,
    };
    // A board lives on in its sorted set, or, never incremented yet, in its meta alone: a
    // garbled meta of such a board tally still knows (no removal ran since) is put back
    // too. A deleted one is not: nothing is left of that board.
    let empty_board =
        key.kind() == KeyKind::Hash && state::with(|s| s.known_meta(db, base)).is_some();
    if !(zset_here || empty_board) || !broken {
        return false;
    }
    let mut effects = Effects::new();
    meta::write_all(&key, &name, &meta, &mut effects);
    effects.emit(ctx);
    let marked = is_marked_edited(&key);
    drop(key);
    let quarantined = state::with(|s| {
        s.note_meta(db, base, meta, Seen::Written);
        s.is_quarantined(db, base)
    });
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

/// Sets (or, once repaired, clears) the meta's [`RANK_EDITED_FIELD`], and replicates that.
/// Leaves the rest of the meta as it is (a meta in the four-number layout stays so until
/// the next write of its range).
pub(super) fn mark_edited(ctx: &Context, base: &[u8], edited: bool) {
    let name = meta_key(base);
    let Some(key) = Key::open_bytes(ctx, &name, true) else {
        return;
    };
    // Only a leaderboard's meta: a user's own hash that merely has such a name stays as is.
    if meta::read(&key).is_none() {
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
