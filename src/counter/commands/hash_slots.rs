//! A counter's hash as the pure counter logic sees it: [`HashSlots`], a [`SlotStore`] that
//! reads through the key's mirror when there is one (found or built when a command opens
//! it) and records every write as an effect.
//!
//! Owns: the counter's slot fields in its hash. May not touch: raw module calls, command
//! parsing.

use std::cell::{Cell, RefMut};

use redis_module::Context;

use super::counter_memory::memory;
use crate::counter::model::mirrors::{
    Mirror, MirrorAt, Mirrors, HASHTABLE_MIN_FIELDS, MAX_SLOTS_PER_MIRROR,
};
use crate::counter::model::packed::{self, RUN};
use crate::counter::model::packed_slots::{self, may_be_packed, RawFields};
use crate::counter::model::{push_slot_field, Counter, OrderedSlots, SlotStore};
use crate::host::replicate::HashEffects;
use crate::host::server::{now_ms, selected_db};
use crate::host::store::{Key, KeyKind, RStr};
use crate::layout;

/// Number of non-slot fields in a counter's hash (`_tally`, `_state`).
pub(super) const META_FIELDS: usize = 2;

/// When a missing mirror is built from the hash.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Build {
    /// Reads: a large counter read once is likely read again.
    Always,
    /// Writes: only once the key has been written often lately (`RecentWrites`).
    IfHot,
    Never,
}

/// A slot's field name as a module string (for the key API and the effects).
pub(super) struct SlotName {
    slot: (i64, i64),
    rstr: RStr,
}

/// The counter's slots as stored in its hash, recording every write as an effect and
/// keeping the key's mirror (if it has one) in step. Made by [`HashSlots::open`] at the
/// start of a command and dropped before its reply: it holds the family's mirrors in
/// between, and its drop records the hash's new field count in the mirror and counts
/// the mirror's bytes again.
pub(super) struct HashSlots<'a> {
    key: &'a Key,
    pub(super) effects: HashEffects,
    /// The family's mirrors, held for the command (`None`: another command holds them,
    /// which only a command run inside this one could).
    mirrors: Option<RefMut<'static, Mirrors>>,
    /// The key's mirror among them, if it has one.
    held: Option<Held>,
    /// True while the key does not exist: reads need not ask the hash (most writes to a
    /// large population of counters create them).
    missing: bool,
    /// Field names already made (taken from the names the last command made): an
    /// increment reads, then writes, the same fields, and the next increment of any
    /// counter at the same time uses the same names.
    names: Vec<SlotName>,
    /// Where in `names` the next name asked for is looked for first.
    next_name: usize,
    /// Slot fields looked up in the hash so far (added to the family's count at the end).
    lookups: u64,
    /// The server's clock when first needed: which runs may be packed (see
    /// `packed_slots`), the same for the whole command.
    now: Option<i64>,
}

/// The hash field by field, for a slot whose run may be packed (`packed_slots`): reads and
/// writes of the key, each write recorded as an effect.
struct Raw<'s, 'k> {
    key: &'k Key,
    effects: &'s mut HashEffects,
    lookups: &'s mut u64,
}

impl RawFields for Raw<'_, '_> {
    fn read(&mut self, name: &[u8]) -> Option<Vec<u8>> {
        *self.lookups += 1;
        self.key.hget(name)
    }

    fn write(&mut self, name: &[u8], value: &[u8]) {
        *self.lookups += 1;
        self.key.hset(name, value);
        self.effects.set(name, value);
    }

    fn delete(&mut self, name: &[u8]) -> bool {
        *self.lookups += 1;
        let existed = self.key.hdel(name);
        if existed {
            self.effects.del(name);
        }
        existed
    }
}

/// The key's mirror as a command holds it.
#[derive(Clone, Copy)]
struct Held {
    at: MirrorAt,
    /// Its slots when the command opened it.
    slots_before: usize,
    /// Built by this command.
    built: bool,
    /// False once a write to the hash failed: the mirror no longer matches it (it goes
    /// at its next use) and this command stops using it.
    in_step: bool,
}

/// Field names kept (an increment touches one field per resolution).
const MAX_CACHED_NAMES: usize = crate::counter::model::MAX_RESOLUTIONS;

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
            memory().count_lookups(self.lookups);
        }
        if let (Some(held), Some(mirrors)) = (self.held, self.mirrors.as_deref_mut()) {
            if held.in_step {
                if let Some(mirror) = mirrors.get_mut(held.at) {
                    mirror.fields = self.key.len();
                }
            }
            mirrors.settle(held.at, held.slots_before, held.built, budget);
        }
    }
}

impl<'a> HashSlots<'a> {
    /// The slots of the counter at `key` (named `name`), through its mirror when there is
    /// a valid one; a missing one is built from the hash first as `build` says.
    pub(super) fn open(ctx: &Context, key: &'a Key, name: &[u8], build: Build) -> Self {
        let mut slots = HashSlots {
            key,
            effects: HashEffects::default(),
            mirrors: memory().mirrors(),
            held: None,
            missing: key.kind() == KeyKind::Empty,
            // Taken from the cache at the first name asked for (most reads ask none).
            names: Vec::new(),
            next_name: 0,
            lookups: 0,
            now: None,
        };
        let Some(mirrors) = slots.mirrors.as_deref_mut() else {
            return slots;
        };
        let (db, fields) = (selected_db(ctx), key.len());
        // The common case, one lookup: a valid mirror.
        let (at, built) = match mirrors.find(db, name, fields) {
            Some(at) => (at, false),
            None => match build_mirror(ctx, key, (db, name, fields), build, mirrors) {
                Some(at) => (at, true),
                None => return slots,
            },
        };
        let Some(mirror) = mirrors.get_mut(at) else {
            return slots;
        };
        if build == Build::IfHot
            && fields >= HASHTABLE_MIN_FIELDS
            && mirror.writes.wants_hashtable(now_ms)
        {
            key.use_hashtable_encoding();
        }
        slots.held = Some(Held {
            at,
            slots_before: mirror.slots.len(),
            built,
            in_step: true,
        });
        slots
    }

    /// The server's clock, read once per command.
    #[inline]
    fn now(&mut self) -> i64 {
        *self.now.get_or_insert_with(now_ms)
    }

    /// True if slot `index` of `res_ms` lies in a run that may be packed: it is then read
    /// and written through `packed_slots`.
    #[inline]
    fn in_old_run(&mut self, res_ms: i64, index: i64) -> bool {
        let now = self.now();
        may_be_packed(res_ms, index, now)
    }

    /// Calls `f(index, count)` for the slot fields of resolution `res_ms` in `unpacked`
    /// (`(from, to)` spans of sealed runs without a packed field, sorted). Such runs are
    /// usually empty (a sparse counter): probed while that costs less than one walk of the
    /// hash, found by the walk otherwise (in no order).
    fn each_unpacked_slot(
        &mut self,
        res_ms: i64,
        unpacked: &[(i64, i64)],
        f: &mut dyn FnMut(i64, i64),
    ) {
        let probes = unpacked
            .iter()
            .fold(0i64, |n, &(from, to)| n.saturating_add(to - from + 1));
        if probes <= self.key.len() as i64 {
            packed_slots::probed(&mut self.raw(), res_ms, unpacked, f);
            return;
        }
        self.key.hscan(|field, value| {
            if let Some((ms, index)) = crate::counter::model::parse_slot_field(field) {
                if ms == res_ms && in_spans(unpacked, index) {
                    f(index, crate::args::parse_i64(value).unwrap_or(0));
                }
            }
        });
    }

    /// The hash field by field (see [`Raw`]).
    fn raw(&mut self) -> Raw<'_, 'a> {
        Raw {
            key: self.key,
            effects: &mut self.effects,
            lookups: &mut self.lookups,
        }
    }

    /// The key's mirror, if it has one in step with the hash.
    #[inline]
    fn mirror(&mut self) -> Option<&mut Mirror> {
        let held = self.held.filter(|held| held.in_step)?;
        self.mirrors.as_deref_mut()?.get_mut(held.at)
    }

    fn has_mirror(&self) -> bool {
        self.held.is_some_and(|held| held.in_step)
    }

    /// The parsed counter kept with the mirror and the mirror's slots, for a read: they
    /// answer it without the hash.
    pub(super) fn kept_counter_and_slots(&mut self) -> Option<(&Counter, &mut OrderedSlots)> {
        let Mirror {
            counter: Some(counter),
            slots,
            ..
        } = self.mirror()?
        else {
            return None;
        };
        Some((counter, slots))
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
        self.mirror()?.counter.take()
    }

    /// Keeps a counter read from valid stored fields with the mirror, for the next command.
    pub(super) fn remember_counter(&mut self, counter: &Counter) {
        if let Some(mirror) = self.mirror() {
            if mirror.counter.is_none() {
                mirror.counter = Some(counter.clone());
            }
        }
    }

    /// Keeps `counter` (valid for the hash as it is now) with the mirror for the next
    /// command: moved in when the mirror holds none (a write took it out), else copied.
    pub(super) fn keep_counter(&mut self, counter: &mut Counter) {
        if let Some(mirror) = self.mirror() {
            match &mut mirror.counter {
                Some(kept) => kept.clone_from(counter),
                none => *none = Some(std::mem::replace(counter, Counter::new(Vec::new()))),
            }
        }
    }

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
        let mirror = self.mirror()?;
        let counter = mirror.counter.as_ref()?;
        // Only into the newest runs, which are never packed: `ts` less than RUN slots of
        // the finest resolution (so of every resolution) before `now`.
        let finest = counter.resolutions.first()?.ms;
        if now.saturating_sub(ts) >= RUN.saturating_mul(finest) {
            return None;
        }
        let mut writes = [(0, 0, 0); crate::counter::model::MAX_RESOLUTIONS];
        let (len, reply) =
            counter.add_to_stored(&mut mirror.slots, now, ts, increment, &mut writes)?;
        let (_, written) = self.write_fields(writes.get(..len).unwrap_or_default());
        if written != len {
            // A field could not be written (out of memory): the mirror holds a count the
            // hash does not, so it must go (no hash has this many fields).
            if let Some(mirror) = self.mirror() {
                mirror.fields = usize::MAX;
            }
            if let Some(held) = &mut self.held {
                held.in_step = false;
            }
        }
        Some(reply)
    }

    /// The next trim of the mirrored counter, if any.
    pub(super) fn mirrored_due(&mut self) -> Option<i64> {
        self.mirror()?.counter.as_ref()?.next_due()
    }
}

impl SlotStore for HashSlots<'_> {
    fn get(&mut self, res_ms: i64, index: i64) -> Option<i64> {
        if let Some(mirror) = self.mirror() {
            return mirror.slots.get(&(res_ms, index)).copied();
        }
        if self.missing {
            return None;
        }
        if self.in_old_run(res_ms, index) {
            return packed_slots::get(&mut self.raw(), res_ms, index);
        }
        // A value that is not an integer (a user's HSET) is a stored slot holding nothing:
        // a write overwrites it without counting a new slot.
        self.lookups += 1;
        let key = self.key;
        key.hget_i64_str(&self.field(res_ms, index)?.rstr)
            .map(|count| count.unwrap_or(0))
    }

    fn put(&mut self, res_ms: i64, index: i64, count: i64) {
        if self.in_old_run(res_ms, index) {
            packed_slots::put(&mut self.raw(), res_ms, index, count);
            self.missing = false;
            if let Some(mirror) = self.mirror() {
                mirror.slots.insert((res_ms, index), count);
            }
            return;
        }
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
        if let Some(mirror) = self.mirror() {
            mirror.slots.insert((res_ms, index), count);
        }
    }

    fn get_many(&mut self, slots: &[(i64, i64)], out: &mut [Option<i64>]) {
        if let Some(mirror) = self.mirror() {
            return mirror.slots.get_many(slots, out);
        }
        if self.missing || slots.iter().any(|&(r, i)| self.in_old_run(r, i)) {
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
        if slots.iter().any(|&(r, i, _)| self.in_old_run(r, i)) {
            for &(res_ms, index, count) in slots {
                self.put(res_ms, index, count);
            }
            return;
        }
        let (written, len) = self.write_fields(slots);
        // The mirror follows the hash: only the slots written there.
        if let Some(mirror) = self.mirror() {
            mirror
                .slots
                .insert_many(written.get(..len).unwrap_or_default());
        }
    }

    fn remove(&mut self, res_ms: i64, index: i64) -> bool {
        if let Some(mirror) = self.mirror() {
            // The mirror knows the slot is absent: no need to probe the hash.
            if mirror.slots.remove(&(res_ms, index)).is_none() {
                return false;
            }
        }
        if self.in_old_run(res_ms, index) {
            return packed_slots::remove(&mut self.raw(), res_ms, index);
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
        match self.mirror() {
            Some(mirror) => mirror.slots.len(),
            None => self.key.len().saturating_sub(META_FIELDS),
        }
    }

    fn each_slot(&mut self, f: &mut dyn FnMut(i64, i64, i64)) {
        if let Some(mirror) = self.mirror() {
            for ((res_ms, index), count) in mirror.slots.iter() {
                f(res_ms, index, count);
            }
            return;
        }
        let now = self.now();
        self.key
            .hscan(|field, value| packed_slots::each_in_field(field, value, now, f));
    }

    fn ordered_slots(&mut self, res_ms: i64, lo: i64, hi: i64, out: &mut Vec<(i64, i64)>) {
        if lo > hi {
            return;
        }
        if let Some(mirror) = self.mirror() {
            out.extend(mirror.slots.range(res_ms, lo, hi));
            return;
        }
        let mut index = lo;
        while index <= hi {
            if !self.missing && self.in_old_run(res_ms, index) {
                // One run at a time: its packed field read once, its slots' own fields
                // probed as before.
                let end = packed::run_first(index)
                    .and_then(|first| first.checked_add(RUN - 1))
                    .map_or(hi, |end| end.min(hi));
                packed_slots::ordered_in_run(&mut self.raw(), res_ms, index, end, out);
                index = end.saturating_add(1);
                if end == i64::MAX {
                    break;
                }
                continue;
            }
            if let Some(count) = self.get(res_ms, index) {
                out.push((index, count));
            }
            index += 1;
        }
    }

    fn seal_run(&mut self, res_ms: i64, first: i64) -> bool {
        // The mirror holds every slot by its count, whichever form: it stays as it is.
        let packed = packed_slots::seal(&mut self.raw(), res_ms, first);
        if packed {
            self.missing = false;
        }
        packed
    }

    fn sealed_sum(&mut self, res_ms: i64, lo: i64, hi: i64) -> Option<i128> {
        if self.has_mirror() {
            return None;
        }
        if self.missing {
            return Some(0);
        }
        let mut unpacked = Vec::new();
        let mut sum = packed_slots::sealed_sum(&mut self.raw(), res_ms, lo, hi, &mut unpacked);
        self.each_unpacked_slot(res_ms, &unpacked, &mut |_, count| sum += i128::from(count));
        Some(sum)
    }

    fn sealed_slots(&mut self, res_ms: i64, lo: i64, hi: i64, out: &mut Vec<(i64, i64)>) -> bool {
        if self.has_mirror() {
            return false;
        }
        if self.missing {
            return true;
        }
        let mut unpacked = Vec::new();
        let from = out.len();
        packed_slots::sealed_slots(&mut self.raw(), res_ms, lo, hi, out, &mut unpacked);
        if !unpacked.is_empty() {
            self.each_unpacked_slot(res_ms, &unpacked, &mut |index, count| {
                out.push((index, count))
            });
            if let Some(added) = out.get_mut(from..) {
                added.sort_unstable();
            }
        }
        true
    }

    fn range_sum(&mut self, res_ms: i64, lo: i64, hi: i64) -> Option<i128> {
        let mirror = self.mirror()?;
        Some(mirror.slots.range_sum(res_ms, lo, hi))
    }

    fn probes_are_cheap(&mut self, probes: i64) -> bool {
        self.has_mirror() || probes <= self.stored_slots() as i64
    }

    fn walk_is_cheaper(&mut self, probes: i64) -> bool {
        if self.has_mirror() {
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
fn is_counter(key: &Key) -> bool {
    memory().field_names().is_some_and(|(marker_field, _)| {
        key.hget_with(marker_field, |marker| {
            layout::is_family(marker, layout::COUNTER)
        })
        .unwrap_or(false)
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

/// Builds the mirror of the counter at `key` (`name` in `db`, a hash of `fields` fields)
/// when `build` says it is wanted and the read caches' budget has room for it.
fn build_mirror(
    ctx: &Context,
    key: &Key,
    (db, name, fields): (i32, &[u8], usize),
    build: Build,
    mirrors: &mut Mirrors,
) -> Option<MirrorAt> {
    // A counter too large for the cache is read from its hash (bounded by one walk per
    // command) rather than evicting every other mirror. A hot counter (written again and
    // again) is mirrored whatever its size, a read one only from `MIRROR_MIN_SLOTS`.
    let min_fields = match build {
        Build::IfHot => 1,
        _ => MIRROR_MIN_SLOTS + META_FIELDS,
    };
    let worth_mirroring = (min_fields..=MAX_SLOTS_PER_MIRROR + META_FIELDS).contains(&fields);
    let wanted = worth_mirroring
        && match build {
            Build::Always => true,
            Build::IfHot => memory().is_hot(db, name),
            Build::Never => false,
        };
    // The budget is asked here, where a mirror may be made (and by every write to a key
    // without one, new keys included): never while memory is tight. With no mirror held
    // there is nothing to give back, and no build: nothing to ask.
    if !wanted && mirrors.bytes() == 0 {
        return None;
    }
    let budget = budget();
    if !mirrors.make_room(budget, fields) || !wanted {
        return None;
    }
    // Only a counter's hash is worth a walk: a user's hash (a WRONGTYPE reply to come) of
    // any size is never mirrored. A hash with field TTLs is never mirrored either: its
    // expired slots count in its length until the server reclaims them, so a mirror could
    // not tell it changed. Where the server must be asked field by field (Valkey), a hash
    // of more fields than a quick question covers counts as having some: its reads go to
    // the hash.
    if !is_counter(key) || key.has_field_ttls(ctx, name, TTL_QUESTION_MAX_FIELDS) {
        return None;
    }
    // Packed runs are mirrored slot by slot; a counter whose slots would pass what one
    // mirror holds is read from its hash. Its `_state` tells, before any walk (a hot
    // counter with a long history would otherwise walk its hash and decode every packed
    // run on each write, to find it too large again).
    let state_slots = memory()
        .field_names()
        .and_then(|(_, state_field)| key.hget_with(state_field, Counter::state_slots))
        .flatten();
    if state_slots.is_some_and(|n| n > MAX_SLOTS_PER_MIRROR as i64) {
        return None;
    }
    let mut slots = Vec::with_capacity(fields);
    let now = now_ms();
    let mut too_many = false;
    key.hscan(|field, value| {
        if too_many {
            return;
        }
        packed_slots::each_in_field(field, value, now, &mut |res_ms, index, count| {
            slots.push(((res_ms, index), count));
        });
        too_many = slots.len() > MAX_SLOTS_PER_MIRROR;
    });
    if too_many {
        return None;
    }
    slots.sort_unstable();
    packed_slots::merge_duplicates(&mut slots);
    let mut mirror = Mirror::of_fields(fields);
    mirror.slots = OrderedSlots::from_unordered(slots);
    mirrors.insert(db, name, mirror, budget)
}

/// What the mirrors may hold now: the counters' share of the read caches' budget.
fn budget() -> usize {
    crate::family::cache_budget::budget_of(crate::layout::COUNTER)
}

/// True if `index` lies in one of `spans` (`(from, to)`, sorted, not overlapping).
fn in_spans(spans: &[(i64, i64)], index: i64) -> bool {
    spans
        .binary_search_by(|&(from, to)| {
            if to < index {
                std::cmp::Ordering::Less
            } else if from > index {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}
