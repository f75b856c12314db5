//! A write to a counter, from its key opened for writing to its effects replicated: the
//! hot increment made in place on the key's mirror ([`increment`]), or the general path
//! ([`change`]): load the counter, change its slots with the pure logic, save its
//! bookkeeping.
//!
//! Owns: the order of a counter write's steps. May not touch: raw module calls, command
//! parsing.

use redis_module::{Context, RedisString};

use super::hash_slots::{Build, HashSlots};
use super::load_save::{load, save, Loaded};
use crate::counter::model::{Counter, Track, MAX_RESOLUTIONS};
use crate::error::Result;
use crate::expiry;
use crate::host::store::{Key, KeyKind};

/// A written key's name as bytes and, when there is one, as the command's module string
/// (replicated without a copy).
pub(super) type Names<'n> = (&'n [u8], Option<&'n RedisString>);

/// Adds `increment` at `ts` to the counter at `key` (created with the default resolutions
/// if missing), as INCRBY does; the reply is the count of the finest slot.
pub(super) fn increment(
    ctx: &Context,
    key: &Key,
    names: Names,
    now: i64,
    ts: i64,
    increment: i64,
) -> Result<i64> {
    let mut slots = open(ctx, key, names.0);
    // A hot counter's usual increment, on its mirror in place: the bookkeeping stays as
    // it is.
    if let Some(reply) = slots.add_in_place(now, ts, increment) {
        emit(ctx, names, &mut slots);
        if let Some(due) = slots.mirrored_due() {
            expiry::schedule(ctx, names.0, due);
        }
        return Ok(reply);
    }
    let mut stored = Stored::load(&mut slots, key, now)?;
    let reply = stored.counter.incrby(&mut slots, now, ts, increment)?;
    stored.finish(ctx, key, names, slots, increment != 0);
    Ok(reply)
}

/// A write to the counter at `key` (created with the default resolutions if missing):
/// `change` computes over its slots and says whether it changed them; then the
/// bookkeeping is saved, the effects replicated and the next trim scheduled.
pub(super) fn change<T>(
    ctx: &Context,
    key: &Key,
    names: Names,
    now: i64,
    change: impl FnOnce(&mut Counter, &mut HashSlots) -> Result<(T, bool)>,
) -> Result<T> {
    let mut slots = open(ctx, key, names.0);
    let mut stored = Stored::load(&mut slots, key, now)?;
    let (reply, changed) = change(&mut stored.counter, &mut slots)?;
    stored.finish(ctx, key, names, slots, changed);
    Ok(reply)
}

/// The slots of a key opened for writing: a new key has nothing to mirror; any other
/// type than a hash answers WRONGTYPE when it is loaded.
fn open<'k>(ctx: &Context, key: &'k Key, name: &[u8]) -> HashSlots<'k> {
    let build = match key.kind() {
        KeyKind::Hash => Build::IfHot,
        _ => Build::Never,
    };
    HashSlots::open(ctx, key, name, build)
}

/// Replicates the effects recorded so far.
fn emit(ctx: &Context, (name_bytes, name): Names, slots: &mut HashSlots) {
    match name {
        Some(name) => slots.effects.emit_to(ctx, name),
        None => slots.effects.emit(ctx, name_bytes),
    }
}

/// The counter being written and its bookkeeping as stored.
struct Stored {
    counter: Counter,
    /// The stored tracks, copied on the stack (this is every write)...
    tracks: [Track; MAX_RESOLUTIONS],
    /// ...and how many: `None` when they are to be written whatever happens (a new key,
    /// a rebuilt `_state`).
    len: Option<usize>,
    is_new: bool,
}

impl Stored {
    /// The counter at `key`: the parsed copy kept with its mirror (taken out, put back
    /// when it is saved) or else read from the hash; a new one for a missing key.
    fn load(slots: &mut HashSlots, key: &Key, now: i64) -> Result<Stored> {
        let loaded = match slots.take_counter() {
            Some(counter) => Some(Loaded {
                counter,
                state_rebuilt: false,
            }),
            None => load(key, now, usize::MAX)?,
        };
        let mut tracks = [Track::default(); MAX_RESOLUTIONS];
        Ok(match loaded {
            Some(Loaded {
                counter,
                state_rebuilt,
            }) => {
                let len = tracks
                    .get_mut(..counter.tracks.len())
                    .filter(|_| !state_rebuilt)
                    .map(|old| {
                        old.copy_from_slice(&counter.tracks);
                        old.len()
                    });
                Stored {
                    counter,
                    tracks,
                    len,
                    is_new: false,
                }
            }
            None => Stored {
                counter: Counter::new(super::family_config::COUNTER_RESOLUTIONS.get()),
                tracks,
                len: None,
                is_new: true,
            },
        })
    }

    /// Saves the counter after `change` (if it `changed` anything), then lets the slots
    /// go and forgets a key the write deleted.
    fn finish(
        mut self,
        ctx: &Context,
        key: &Key,
        names: Names,
        mut slots: HashSlots,
        changed: bool,
    ) {
        let old_tracks = self.len.and_then(|len| self.tracks.get(..len));
        if !changed {
            // Nothing written (a refused LIMIT, an increment of 0): the counter taken from
            // the mirror goes back as it was.
            if old_tracks == Some(self.counter.tracks.as_slice()) {
                slots.keep_counter(&mut self.counter);
            }
            return;
        }
        let deleted = save(
            ctx,
            key,
            names,
            &mut self.counter,
            old_tracks,
            self.is_new,
            &mut slots,
        );
        // No keyspace event fires for a key tally deletes: what is kept of it goes here,
        // once the slots (and the mirrors they hold) are let go.
        drop(slots);
        if deleted {
            crate::family::forget_deleted(ctx, names.0);
        }
    }
}
