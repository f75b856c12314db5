//! A counter's hash as the pure counter logic sees it: [`HashSlots`], a [`SlotStore`] that
//! reads through the key's mirror when there is one and records every write as an effect,
//! and [`with_slots`], which finds or builds that mirror.
//!
//! Owns: the counter's slot fields in its hash. May not touch: raw module calls, command
//! parsing.

use std::cell::Cell;

use redis_module::Context;

use super::caches::caches;
use super::mirror::{self, Build, Mirror, HASHTABLE_MIN_FIELDS};
use crate::args::parse_i64;
use crate::counter::{parse_slot_field, push_slot_field, Counter, OrderedSlots, SlotStore};
use crate::layout;
use crate::replicate::HashEffects;
use crate::server::{now_ms, selected_db};
use crate::store::{Key, KeyKind, RStr};

/// Number of non-slot fields in a counter's hash (`_tally`, `_state`).
pub(super) const META_FIELDS: usize = 2;

/// A slot's field name as a module string (for the key API and the effects).
pub(super) struct SlotName {
    slot: (i64, i64),
    rstr: RStr,
}

/// The counter's slots as stored in its hash, recording every write as an effect and
/// keeping the key's mirror (if it has one) in step.
pub(super) struct HashSlots<'a> {
    key: &'a Key,
    pub(super) effects: HashEffects,
    pub(super) mirror: Option<&'a mut Mirror>,
    /// True while the key does not exist: reads need not ask the hash (most writes to a
    /// large population of counters create them).
    missing: bool,
    /// Field names already made (borrowed from the family's caches for the command): an
    /// increment reads, then writes, the same fields, and the next increment of any
    /// counter at the same time uses the same names.
    names: Vec<SlotName>,
    /// Where in `names` the next name asked for is looked for first.
    next_name: usize,
    /// Slot fields looked up in the hash so far (added to the family's count at the end).
    lookups: u64,
}

/// Field names kept (an increment touches one field per resolution).
const MAX_CACHED_NAMES: usize = crate::counter::MAX_RESOLUTIONS;

thread_local! {
    /// Slot field names made by the last command (an increment touches one per
    /// resolution, and the next increment at the same time uses the same names).
    static SLOT_NAMES: Cell<Vec<SlotName>> = const { Cell::new(Vec::new()) };
}

impl Drop for HashSlots<'_> {
    fn drop(&mut self) {
        // Only names this command took from the cache (or made) go back: a read that made
        // none leaves the cache as it was.
        let names = (self.names.capacity() > 0).then(|| std::mem::take(&mut self.names));
        if let Some(names) = names {
            SLOT_NAMES.set(names);
        }
        if self.lookups > 0 {
            caches(|caches| {
                let total = caches.hash_lookups.get().wrapping_add(self.lookups);
                caches.hash_lookups.set(total);
            });
        }
    }
}

impl<'a> HashSlots<'a> {
    fn new(key: &'a Key, mirror: Option<&'a mut Mirror>) -> Self {
        HashSlots {
            key,
            effects: HashEffects::default(),
            mirror,
            missing: key.kind() == KeyKind::Empty,
            // Taken from the cache at the first name asked for (most reads ask none).
            names: Vec::new(),
            next_name: 0,
            lookups: 0,
        }
    }

    /// The field name of a slot, made once.
    fn field(&mut self, res_ms: i64, index: i64) -> Option<&SlotName> {
        let at = self.field_at(res_ms, index)?;
        self.names.get(at)
    }

    /// Where the field name of a slot is in `names` (made there if needed).
    #[inline]
    fn field_at(&mut self, res_ms: i64, index: i64) -> Option<usize> {
        // A write asks for the names of its slots in the order of the last write (the
        // cached names): the one after the last found is tried first (the usual write
        // finds every name there: kept inline, the rest is not).
        let next = self.next_name;
        if self
            .names
            .get(next)
            .is_some_and(|name| name.slot == (res_ms, index))
        {
            self.next_name = next + 1;
            return Some(next);
        }
        self.field_at_searched(res_ms, index)
    }

    /// [`HashSlots::field_at`] past the hint: searched, or made.
    #[cold]
    fn field_at_searched(&mut self, res_ms: i64, index: i64) -> Option<usize> {
        self.take_cached_names();
        let slot = (res_ms, index);
        let found = self.names.iter().position(|name| name.slot == slot);
        let at = match found {
            Some(at) => at,
            None => {
                // Only the few fields of one increment are worth keeping: a long probe run
                // (trimming) must not make every lookup a linear search of all it probed.
                if self.names.len() >= MAX_CACHED_NAMES {
                    self.names.clear();
                }
                let mut text = Vec::with_capacity(24);
                push_slot_field(&mut text, res_ms, index);
                let rstr = RStr::new(&text)?;
                self.names.push(SlotName { slot, rstr });
                self.names.len() - 1
            }
        };
        self.next_name = at + 1;
        Some(at)
    }

    /// The names kept by the last command, taken for this one (once).
    fn take_cached_names(&mut self) {
        if self.names.capacity() == 0 {
            self.names = SLOT_NAMES.take();
        }
    }

    /// [`SlotStore::get`] of each slot in turn (the mirror, a missing key, no batch).
    fn get_each(&mut self, slots: &[(i64, i64)], out: &mut [Option<i64>]) {
        for (&(res_ms, index), out) in slots.iter().zip(out) {
            *out = self.get(res_ms, index);
        }
    }

    /// The parsed counter kept with the mirror, taken out (a write puts it back with
    /// [`HashSlots::keep_counter`] when it saves).
    pub(super) fn take_counter(&mut self) -> Option<Counter> {
        self.mirror.as_deref_mut()?.counter.take()
    }

    /// Keeps a counter read from valid stored fields with the mirror, for the next command.
    pub(super) fn remember_counter(&mut self, counter: &Counter) {
        if let Some(mirror) = self.mirror.as_deref_mut() {
            if mirror.counter.is_none() {
                mirror.counter = Some(counter.clone());
            }
        }
    }

    /// Keeps `counter` (valid for the hash as it is now) with the mirror for the next
    /// command: moved in when the mirror holds none (a write took it out), else copied.
    pub(super) fn keep_counter(&mut self, counter: &mut Counter) {
        if let Some(mirror) = self.mirror.as_deref_mut() {
            match &mut mirror.counter {
                Some(kept) => kept.clone_from(counter),
                none => *none = Some(std::mem::replace(counter, Counter::new(Vec::new()))),
            }
        }
    }

    /// Records the hash's field count in the mirror once the command's writes are done.
    /// Writes `slots` to the hash only, recording the effects: the names first (made in
    /// `names` without clearing it midway); each value string is recorded as an effect (it
    /// goes on to the replicated HSET), then the hash is written from the recorded pairs in
    /// one batch. Returns the slots written and how many.
    fn write_fields(
        &mut self,
        slots: &[(i64, i64, i64)],
    ) -> ([(i64, i64, i64); MAX_CACHED_NAMES], usize) {
        self.take_cached_names();
        if self.names.len() + slots.len() > MAX_CACHED_NAMES {
            self.names.clear();
        }
        let first = self.effects.len();
        let mut written = [(0i64, 0i64, 0i64); MAX_CACHED_NAMES];
        let mut len = 0;
        for &slot in slots {
            let (res_ms, index, count) = slot;
            let Some(name_at) = self.field_at(res_ms, index) else {
                continue;
            };
            let (Some(name), Some(value), Some(w)) = (
                self.names.get(name_at),
                RStr::from_i64(count),
                written.get_mut(len),
            ) else {
                continue;
            };
            self.effects.set_strings(&name.rstr, value);
            *w = slot;
            len += 1;
        }
        self.key.hset_many(self.effects.sets_since(first));
        self.lookups += len as u64;
        self.missing = false;
        (written, len)
    }

    /// A hot counter's usual increment (see [`Counter::add_to_stored`]): made on the
    /// mirror in place, then written to the hash; the bookkeeping does not change. `None`
    /// (nothing changed) when it needs the general path.
    pub(super) fn add_in_place(&mut self, now: i64, ts: i64, increment: i64) -> Option<i64> {
        let mirror = self.mirror.as_deref_mut()?;
        let counter = mirror.counter.as_ref()?;
        let mut writes = [(0, 0, 0); crate::counter::MAX_RESOLUTIONS];
        let (len, reply) =
            counter.add_to_stored(&mut mirror.slots, now, ts, increment, &mut writes)?;
        let (_, written) = self.write_fields(writes.get(..len).unwrap_or_default());
        if written != len {
            // A field could not be written (out of memory): the mirror holds a count the
            // hash does not, so it must go (no hash has this many fields).
            if let Some(mirror) = self.mirror.take() {
                mirror.fields = usize::MAX;
            }
        }
        Some(reply)
    }

    /// The next trim of the mirrored counter, if any.
    pub(super) fn mirrored_due(&self) -> Option<i64> {
        self.mirror.as_deref()?.counter.as_ref()?.next_due()
    }

    fn sync_mirror(&mut self) {
        if let Some(mirror) = self.mirror.as_deref_mut() {
            mirror.fields = self.key.len();
        }
    }
}

impl SlotStore for HashSlots<'_> {
    fn get(&mut self, res_ms: i64, index: i64) -> Option<i64> {
        if let Some(mirror) = self.mirror.as_deref() {
            return mirror.slots.get(&(res_ms, index)).copied();
        }
        if self.missing {
            return None;
        }
        // A value that is not an integer (a user's HSET) is a stored slot holding nothing:
        // a write overwrites it without counting a new slot.
        self.lookups += 1;
        let key = self.key;
        key.hget_i64_str(&self.field(res_ms, index)?.rstr)
            .map(|count| count.unwrap_or(0))
    }

    fn put(&mut self, res_ms: i64, index: i64, count: i64) {
        let key = self.key;
        let Some(name) = self
            .field_at(res_ms, index)
            .and_then(|at| self.names.get(at))
        else {
            return;
        };
        // The value string made for the hash goes on to the replicated HSET.
        if let Some(value) = RStr::from_i64(count) {
            self.lookups += 1;
            key.hset_str_value(&name.rstr, &value);
            self.effects.set_strings(&name.rstr, value);
        }
        self.missing = false;
        if let Some(mirror) = self.mirror.as_deref_mut() {
            mirror.slots.insert((res_ms, index), count);
        }
    }

    fn get_many(&mut self, slots: &[(i64, i64)], out: &mut [Option<i64>]) {
        if let Some(mirror) = self.mirror.as_deref() {
            return mirror.slots.get_many(slots, out);
        }
        if self.missing {
            return self.get_each(slots, out);
        }
        // The names first (made in `names` without clearing it midway), then one batch of
        // hash reads. A value that is not an integer is a stored slot holding nothing.
        self.take_cached_names();
        if self.names.len() + slots.len() > MAX_CACHED_NAMES {
            self.names.clear();
        }
        let mut at = [usize::MAX; MAX_CACHED_NAMES];
        for (&(res_ms, index), at) in slots.iter().zip(at.iter_mut()) {
            *at = self.field_at(res_ms, index).unwrap_or(usize::MAX);
        }
        let at = at.get(..slots.len()).unwrap_or_default();
        if at.iter().any(|&at| at >= self.names.len()) {
            // A name could not be made: slot by slot, as `get` does.
            return self.get_each(slots, out);
        }
        self.lookups += at.len() as u64;
        let names = &self.names;
        let fields = at
            .iter()
            .filter_map(|&at| names.get(at).map(|name| &name.rstr));
        self.key.hget_many(fields, |i, value| {
            if let Some(out) = out.get_mut(i) {
                *out = value.map(|v| crate::args::parse_i64(v.as_bytes()).unwrap_or(0));
            }
        });
    }

    fn put_many(&mut self, slots: &[(i64, i64, i64)]) {
        let (written, len) = self.write_fields(slots);
        // The mirror follows the hash: only the slots written there.
        if let Some(mirror) = self.mirror.as_deref_mut() {
            mirror
                .slots
                .insert_many(written.get(..len).unwrap_or_default());
        }
    }

    fn remove(&mut self, res_ms: i64, index: i64) -> bool {
        if let Some(mirror) = self.mirror.as_deref_mut() {
            // The mirror knows the slot is absent: no need to probe the hash.
            if mirror.slots.remove(&(res_ms, index)).is_none() {
                return false;
            }
        }
        let mut text = Vec::with_capacity(24);
        push_slot_field(&mut text, res_ms, index);
        // One module string for the hash and the replicated HDEL.
        let Some(field) = RStr::new(&text) else {
            return false;
        };
        self.lookups += 1;
        let existed = self.key.hdel_str(&field);
        if existed {
            self.effects.del_string(field);
        }
        existed
    }

    fn stored_slots(&mut self) -> usize {
        match self.mirror.as_deref() {
            Some(mirror) => mirror.slots.len(),
            None => self.key.len().saturating_sub(META_FIELDS),
        }
    }

    fn each_slot(&mut self, f: &mut dyn FnMut(i64, i64, i64)) {
        if let Some(mirror) = self.mirror.as_deref() {
            for ((res_ms, index), count) in mirror.slots.iter() {
                f(res_ms, index, count);
            }
            return;
        }
        self.key.hscan(|field, value| {
            if let Some((res_ms, index)) = parse_slot_field(field) {
                f(res_ms, index, parse_i64(value).unwrap_or(0));
            }
        });
    }

    fn ordered_slots(&mut self, res_ms: i64, lo: i64, hi: i64, out: &mut Vec<(i64, i64)>) {
        if lo > hi {
            return;
        }
        if let Some(mirror) = self.mirror.as_deref() {
            out.extend(mirror.slots.range(res_ms, lo, hi));
            return;
        }
        let mut index = lo;
        while index <= hi {
            if let Some(count) = self.get(res_ms, index) {
                out.push((index, count));
            }
            index += 1;
        }
    }

    fn range_sum(&mut self, res_ms: i64, lo: i64, hi: i64) -> Option<i128> {
        let mirror = self.mirror.as_deref_mut()?;
        Some(mirror.slots.range_sum(res_ms, lo, hi))
    }

    fn probes_are_cheap(&mut self, probes: i64) -> bool {
        self.mirror.is_some() || probes <= self.stored_slots() as i64
    }

    fn walk_is_cheaper(&mut self, probes: i64) -> bool {
        if self.mirror.is_some() {
            return false;
        }
        let stored = self.stored_slots();
        if stored <= LISTPACK_MAX_FIELDS {
            // Each probe of a listpack scans it from its start; the walk scans it once
            // (making a string per field).
            probes > LISTPACK_PROBES_PER_WALK
        } else {
            probes > stored as i64 / 2
        }
    }
}

/// True if `key` holds a hash with a counter's `_tally` marker: the only hashes whose
/// slots are mirrored.
pub(super) fn is_counter(key: &Key) -> bool {
    caches(|caches| {
        caches
            .field_names
            .as_ref()
            .is_some_and(|(marker_field, _)| {
                key.hget_with(marker_field, |marker| {
                    layout::is_family(marker, layout::COUNTER)
                })
                .unwrap_or(false)
            })
    })
}

/// Hashes of at most this many fields are taken to be listpacks (the servers' default
/// `hash-max-listpack-entries`), whose every field lookup scans the hash.
const LISTPACK_MAX_FIELDS: usize = 128;

/// Probes of a listpack's slots that cost about one walk of it: a probe scans up to the
/// whole listpack without allocating, the walk scans it once but makes a module string for
/// every field. On Redis 7.0, listpacks of 20, 60 and 120 slot-like fields: `HGETALL` took
/// 6, 7.5 and 14 times an `HDEL` of a missing field.
const LISTPACK_PROBES_PER_WALK: i64 = 8;

/// Counters with fewer slot fields than this are not mirrored for reads: probing a short
/// listpack is about as cheap as a mirror, and small counters are the many. A hot counter
/// (written again and again) is mirrored whatever its size: its writes then read nothing
/// from the hash.
const MIRROR_MIN_SLOTS: usize = 16;

/// Most fields a mirror build asks the server about one by one (`HPTTL`, on a server with
/// field TTLs but no call that answers for the whole key): the question costs about 3 µs
/// per field on Valkey, on top of the walk the build makes anyway.
const TTL_QUESTION_MAX_FIELDS: usize = 1024;

/// Runs `f` over the counter's slots, through its mirror when there is one. Reads
/// (`Build::Always`) create the mirror of a large counter; writes (`Build::IfHot`) of a
/// hot one.
pub(super) fn with_slots<T>(
    ctx: &Context,
    key: &Key,
    name: &[u8],
    build: Build,
    f: impl FnOnce(&mut HashSlots) -> T,
) -> T {
    let fields = key.len();
    // Only a counter's hash is worth a walk: a user's hash (a WRONGTYPE reply to come) of
    // any size is never mirrored.
    let mut load = |mirror: &mut Mirror| {
        // A hash with field TTLs is never mirrored: its expired slots count in its
        // length until the server reclaims them, so a mirror could not tell it changed.
        // Where the server must be asked field by field (Valkey), a hash of more fields
        // than a quick question covers counts as having some: its reads go to the hash.
        if !is_counter(key) || key.has_field_ttls(ctx, name, TTL_QUESTION_MAX_FIELDS) {
            return false;
        }
        let mut slots = Vec::with_capacity(fields);
        key.hscan(|field, value| {
            if let Some(slot) = parse_slot_field(field) {
                slots.push((slot, parse_i64(value).unwrap_or(0)));
            }
        });
        mirror.slots = OrderedSlots::from_unordered(slots);
        true
    };
    // A counter too large for the cache is read from its hash (bounded by one walk per
    // command) rather than evicting every other mirror.
    let min_fields = match build {
        Build::IfHot => 1,
        _ => MIRROR_MIN_SLOTS + META_FIELDS,
    };
    let worth_mirroring =
        (min_fields..=mirror::MAX_SLOTS_PER_MIRROR + META_FIELDS).contains(&fields);
    let writing = build == Build::IfHot;
    let build = if worth_mirroring { build } else { Build::Never };
    caches(|caches| {
        caches.with_mirror(
            (selected_db(ctx), name, fields),
            build,
            &mut load,
            |mut mirror| {
                if let (true, Some(m)) = (
                    writing && fields >= HASHTABLE_MIN_FIELDS,
                    mirror.as_deref_mut(),
                ) {
                    if m.writes.wants_hashtable(now_ms) {
                        key.use_hashtable_encoding();
                    }
                }
                let mut slots = HashSlots::new(key, mirror);
                let result = f(&mut slots);
                slots.sync_mirror();
                result
            },
        )
    })
}
