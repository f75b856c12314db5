//! Loading a counter from its hash (its `_tally` settings and `_state` bookkeeping, or the
//! copy kept with its mirror), rebuilding lost bookkeeping, and saving it after a change.
//!
//! Owns: the counter's `_tally` and `_state` fields. May not touch: raw module calls,
//! command parsing.

use std::cell::Cell;

use redis_module::{Context, RedisString};

use super::counter_memory::memory;
use super::hash_slots::{Build, HashSlots};
use crate::counter::model::packed_slots;
use crate::counter::model::{Counter, Resolution, SlotStore, Track, STATE_FIELD};
use crate::error::{Error, Result};
use crate::expiry;
use crate::host::server::{now_ms, selected_db};
use crate::host::store::{Key, KeyKind, RStr};
use crate::layout::{self, MARKER_FIELD};

/// A counter as read from its hash.
pub(super) struct Loaded {
    pub(super) counter: Counter,
    /// The stored `_state` was missing or unusable and the bookkeeping was rebuilt: it must
    /// be written back.
    pub(super) state_rebuilt: bool,
}

/// Rebuilds bookkeeping from the hash when it cannot be trusted at all. With more stored
/// fields than `scan_limit`, a conservative guess replaces the walk: nothing older than the
/// kept range, and up to `samples` slots per resolution; trimming heals that guess (see
/// `Counter::trim_within`).
pub(super) fn rebuild(
    key: &Key,
    resolutions: Vec<Resolution>,
    now: i64,
    scan_limit: usize,
) -> Counter {
    let mut counter = Counter::new(resolutions);
    if key.len() <= scan_limit {
        key.hscan(|field, value| {
            packed_slots::each_in_field(field, value, now, &mut |res_ms, index, _| {
                counter.note_stored_slot(res_ms, index);
            });
        });
    } else {
        let stored = key.len() as i64;
        for (r, t) in counter.resolutions.iter().zip(counter.tracks.iter_mut()) {
            t.lo = crate::window::first_kept(now, r.ms, r.samples);
            t.n = stored;
        }
    }
    counter.finish_rebuild();
    counter
}

/// The counter stored at `key`: `None` for a missing key, WRONGTYPE for anything but a
/// hash with a counter's `_tally` marker. Whatever else a user did to the hash, the
/// counter stays readable: a missing or unusable `_state` is rebuilt from the slot fields
/// (one walk of the hash, when it has at most `scan_limit` fields).
pub(super) fn load(key: &Key, now: i64, scan_limit: usize) -> Result<Option<Loaded>> {
    match key.kind() {
        KeyKind::Empty => Ok(None),
        KeyKind::Hash => {
            // Both fields with one hash read: the marker first, then the state.
            let memory = memory();
            let (marker_field, state_field) = memory
                .field_names()
                .ok_or(Error::Internal("the server made no field name"))?;
            let (mut resolutions, mut parsed) = (None, None);
            key.hget_many([marker_field, state_field], |i, value| match (i, value) {
                (0, Some(marker)) if layout::is_family(marker.as_bytes(), layout::COUNTER) => {
                    resolutions = memory.parse_marker(marker.as_bytes());
                }
                (1, Some(state)) => {
                    parsed = resolutions
                        .as_deref()
                        .and_then(|r| memory.parse_state(r, state.as_bytes()));
                }
                _ => {}
            });
            let resolutions = resolutions.ok_or(Error::WrongType)?;
            Ok(Some(match parsed {
                Some((reference, tracks)) => Loaded {
                    counter: Counter {
                        resolutions,
                        tracks,
                        reference,
                    },
                    state_rebuilt: false,
                },
                None => Loaded {
                    counter: rebuild(key, resolutions, now, scan_limit),
                    state_rebuilt: true,
                },
            }))
        }
        _ => Err(Error::WrongType),
    }
}

/// Runs the read `f` over the counter at `name` (`None` for a missing key): through its
/// mirror and the parsed counter kept with it when both are valid (one cache lookup,
/// nothing read from the hash), else from the hash (building a mirror of a large counter,
/// and keeping the parsed counter with it for the next read).
pub(super) fn read_counter<T>(
    ctx: &Context,
    key: &Key,
    name: &[u8],
    now: i64,
    f: impl FnOnce(&Counter, &mut dyn SlotStore) -> Result<T>,
) -> Result<Option<T>> {
    match key.kind() {
        KeyKind::Empty => return Ok(None),
        KeyKind::Hash => {}
        _ => return Err(Error::WrongType),
    }
    let mut slots = HashSlots::open(ctx, key, name, Build::Always);
    // The usual read: a valid mirror with its parsed counter answers by itself (`f` only
    // reads, so the mirror's copy of the slots serves as the store).
    if let Some((counter, mirrored)) = slots.kept_counter_and_slots() {
        return f(counter, mirrored).map(Some);
    }
    let Some(loaded) = load(key, now, usize::MAX)? else {
        return Ok(None);
    };
    if !loaded.state_rebuilt {
        slots.remember_counter(&loaded.counter);
    }
    f(&loaded.counter, &mut slots).map(Some)
}

/// [`load`] for a read, through a copy of the parsed counter kept with a valid mirror
/// when there is one.
pub(super) fn load_for_command(
    ctx: &Context,
    key: &Key,
    name: &[u8],
    now: i64,
) -> Result<Option<Loaded>> {
    if key.kind() == KeyKind::Hash {
        let kept = memory().mirrors().and_then(|mut mirrors| {
            let at = mirrors.find(selected_db(ctx), name, key.len())?;
            mirrors.get_mut(at)?.counter.clone()
        });
        if let Some(counter) = kept {
            return Ok(Some(Loaded {
                counter,
                state_rebuilt: false,
            }));
        }
    }
    load(key, now, usize::MAX)
}

thread_local! {
    /// The buffer [`save`] makes a `_state`'s text in, kept from one save to the next
    /// (taken while in use): the many writes to counters not cached in memory each make
    /// one, and an allocation per write measured 0.4% of such a write's instructions.
    static STATE_TEXT: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Writes the counter's bookkeeping after a change, deletes the key when no slot is left,
/// replicates the effects and schedules the next trim. `old_tracks` is the bookkeeping as
/// stored (`None`: the stored `_state` is unusable and must be rewritten). Returns true if
/// the key was deleted: the caller then calls `forget_deleted` (no keyspace event fires).
/// The key's name comes as bytes and, when there is one, as the command's module string
/// (replicated without a copy).
pub(super) fn save(
    ctx: &Context,
    key: &Key,
    (name, name_str): (&[u8], Option<&RedisString>),
    counter: &mut Counter,
    old_tracks: Option<&[Track]>,
    is_new: bool,
    slots: &mut HashSlots,
) -> bool {
    let effects = &mut slots.effects;
    let stored = counter.stored_slots();
    let deleted = stored == 0 && !is_new;
    if deleted {
        key.delete();
        effects.delete_key();
    } else if stored > 0 {
        if is_new {
            let marker = counter.marker();
            key.hset(MARKER_FIELD.as_bytes(), marker.as_bytes());
            effects.set(MARKER_FIELD, marker);
        }
        if is_new || old_tracks != Some(counter.tracks.as_slice()) {
            let mut state = STATE_TEXT.take();
            counter.write_state(now_ms(), &mut state);
            match (memory().field_names(), RStr::new(&state)) {
                (Some((_, state_field)), Some(value)) => {
                    key.hset_str_value(state_field, &value);
                    effects.set_strings(state_field, value);
                }
                _ => {
                    key.hset(STATE_FIELD.as_bytes(), &state);
                    effects.set(STATE_FIELD, &state[..]);
                }
            }
            STATE_TEXT.set(state);
        }
    }
    let due = counter.next_due();
    if !slots.effects.is_empty() {
        match name_str {
            Some(name) => slots.effects.emit_to(ctx, name),
            None => slots.effects.emit(ctx, name),
        }
    }
    if stored > 0 {
        slots.keep_counter(counter);
    }
    if let Some(due) = due {
        expiry::schedule(ctx, name, due);
    }
    deleted
}
