//! The meta of a leaderboard: its hash as stored (`key|meta`, layout in `crate::rank::model`):
//! reading `_tally` and `_slots` (or the older four-number `_tally`), writing them back in
//! the current layout, recorded as effects; and the *verified* copy a command may use
//! instead of reading the hash ([`verified`], see `crate::rank::model::KnownMetas`).
//!
//! Owns: the `_tally`, `_slots`, `_edited` and `_error <index>` fields of meta hashes (`_edited` records a
//! quarantine, so it survives a restart or a failover). May not touch: other keys or
//! fields, replication other than through the caller's [`Effects`] (or, for `_edited`,
//! its own).

use std::os::raw::c_int;

use redis_module::Context;

use crate::error::{Error, Result};
use crate::host::config;
use crate::host::replicate::Effects;
use crate::host::store::{Key, KeyKind, RStr};
use crate::layout::{MARKER_FIELD, RANK_EDITED_FIELD, RANK_SLOTS_FIELD};
use crate::rank::model::{error_field, meta_key, parse_error, Meta, MetaLayout};

use super::memory;

/// The board's verified meta (see `crate::rank::model::KnownMetas`), for a command that may use it without reading
/// the meta hash `meta_name`: none while the board is quarantined. With `check-caches` the
/// stored meta is read and compared, and a stale copy is an error (counted, and the copy
/// dropped).
pub(super) fn verified(
    ctx: &Context,
    db: c_int,
    base: &[u8],
    meta_name: &[u8],
) -> Result<Option<Meta>> {
    let Some(meta) = memory::verified_meta(db, base) else {
        return Ok(None);
    };
    if config::check_caches() {
        let stored = Key::open_bytes(ctx, meta_name, false)
            .filter(|key| !key.has_ttl())
            .and_then(|key| read(&key));
        if stored != Some((meta, MetaLayout::Current)) {
            memory::known(|k| k.note_mismatch(db, base));
            ctx.log_warning("tally: a verified leaderboard meta differs from the stored one");
            return Err(Error::TryAgain(
                "tally's copy of this leaderboard's meta was stale (check-caches)".into(),
            ));
        }
    }
    Ok(Some(meta))
}

/// The meta stored at `base|meta`, if it is a valid leaderboard meta.
pub(super) fn read_at(ctx: &Context, base: &[u8]) -> Option<Meta> {
    let key = Key::open_bytes(ctx, &meta_key(base), false)?;
    read(&key).map(|(meta, _)| meta)
}

/// True if neither `_tally` nor `_slots` of the meta hash `meta` (named `name`) has a TTL
/// of its own (hash field expiry, Redis 7.4+ and Valkey 9; a server without it has none).
/// Where the key itself answers (Redis 8) it covers every field of the meta, so a TTL on
/// any of them counts (the board is then only read, never trusted from the cache).
pub(super) fn fields_never_expire(ctx: &Context, meta: &Key, name: &[u8]) -> bool {
    !meta.fields_have_ttls(
        ctx,
        name,
        &[MARKER_FIELD.as_bytes(), RANK_SLOTS_FIELD.as_bytes()],
    )
}

/// The leaderboard meta held by `key` and the layout it is stored in; `None` if `key` is
/// not a hash holding a valid meta.
pub(super) fn read(key: &Key) -> Option<(Meta, MetaLayout)> {
    if key.kind() != KeyKind::Hash {
        return None;
    }
    let marker_field = RStr::new(MARKER_FIELD.as_bytes())?;
    let slots_field = RStr::new(RANK_SLOTS_FIELD.as_bytes())?;
    key.hget_with(&marker_field, |marker| {
        key.hget_with(&slots_field, |slots| Meta::from_fields(marker, Some(slots)))
            .unwrap_or_else(|| Meta::from_fields(marker, None))
    })
    .flatten()
}

/// The meta of a leaderboard from its meta hash: `None` if the key is missing, WRONGTYPE
/// if it is something else (another type, a hash without a valid meta).
pub(super) fn load(key: &Key) -> Result<Option<(Meta, MetaLayout)>> {
    match key.kind() {
        KeyKind::Empty => Ok(None),
        KeyKind::Hash => read(key).map(Some).ok_or(Error::WrongType),
        _ => Err(Error::WrongType),
    }
}

/// Writes the whole meta in the current layout (a new board, a meta put back) and
/// records the write.
pub(super) fn write_all(key: &Key, name: &[u8], meta: &Meta, effects: &mut Effects) {
    let (marker, slots) = (meta.marker(), meta.slots_value());
    key.hset(MARKER_FIELD.as_bytes(), marker.as_bytes());
    key.hset(RANK_SLOTS_FIELD.as_bytes(), slots.as_bytes());
    effects
        .command(c"HSET")
        .arg(name)
        .arg(MARKER_FIELD.as_bytes())
        .arg(marker.as_bytes())
        .arg(RANK_SLOTS_FIELD.as_bytes())
        .arg(slots.as_bytes());
}

/// Writes the slot range of a meta read in `layout` and records the write. `_tally` never
/// changes after CREATE, except once: a meta still in the four-number layout is rewritten
/// whole (both fields in one `HSET`, so a replica or AOF never sees a mix).
pub(super) fn write_range(
    key: &Key,
    name: &[u8],
    meta: &Meta,
    layout: MetaLayout,
    effects: &mut Effects,
) {
    if layout == MetaLayout::FourNumberMarker {
        write_all(key, name, meta, effects);
        return;
    }
    let slots = meta.slots_value();
    key.hset(RANK_SLOTS_FIELD.as_bytes(), slots.as_bytes());
    effects
        .command(c"HSET")
        .arg(name)
        .arg(RANK_SLOTS_FIELD.as_bytes())
        .arg(slots.as_bytes());
}

/// The error of slot `index` (a board with `CAPACITY`) as the meta hash `key` holds it: 0
/// without a field (see `crate::rank::model::capacity`).
pub(super) fn read_error(key: &Key, index: i64) -> i64 {
    key.hget(&error_field(index))
        .map_or(0, |value| parse_error(&value))
}

/// Sets the error of slot `index` in the meta hash `key` (named `name`), and records it.
pub(super) fn write_error(key: &Key, name: &[u8], index: i64, error: i64, effects: &mut Effects) {
    let (field, value) = (error_field(index), error.to_string());
    key.hset(&field, value.as_bytes());
    (effects.command(c"HSET").arg(name))
        .arg(&field)
        .arg(value.as_bytes());
}

/// Removes the error fields of the slots `indexes` (a board with `CAPACITY`, see
/// `crate::rank::model::capacity`) that exist, and records the removal.
pub(super) fn drop_errors(
    key: &Key,
    name: &[u8],
    indexes: std::ops::Range<i64>,
    effects: &mut Effects,
) {
    let mut started = false;
    for index in indexes {
        let field = error_field(index);
        if key.hdel(&field) {
            if !started {
                effects.command(c"HDEL").arg(name);
                started = true;
            }
            effects.arg(&field);
        }
    }
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
    if read(&key).is_none() {
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
