//! Where a slot lives once its run may be packed, as the slot stores read and write it: in
//! its own field (`<res>:<index>`), inside its run's packed field (`<res>:p<first>`, see
//! [`super::packed`]), or, after a user's edit, in both, when reads add the two.
//!
//! Which runs may be packed: every run older than the two newest of its resolution (the
//! one holding the slot of `now` and the one before it), see [`may_be_packed`]. Slots of
//! the two newest runs are always fields of their own: the usual increment (the current
//! slot) never looks for a packed field, and a packed field a user writes over one of
//! those runs is not read until its run is old enough.
//!
//! A packed field that is not a valid run of [`RUN`] slots starting at its name's first
//! index (a user's `HSET` of other bytes) holds nothing: reads count it as empty, and the
//! next write or removal of a slot in its run replaces it (a write) or deletes it (a
//! removal, as trimming makes when the run leaves). It never makes a command fail.
//!
//! Writes keep each slot in one form: a write into a run that may be packed goes into the
//! run's packed field, made if the run has none (with every slot field of the run folded
//! in), and deletes the slot's own field if one is left (a user's edit). So a backfill of old
//! slots (an import of a year of minutes with `AT`) keeps the hash as compact as the
//! timer would, instead of making a field per slot first. Only a run whose total would
//! leave i64 is unpacked again, a field per slot.
//!
//! Owns: the routing of one slot between its two forms. May not touch: Redis (pure; the
//! command layer gives it the hash through [`RawFields`]).

use super::fields::{parse_slot_field, push_slot_field};
use super::packed::{self, Edit, RUN};
use super::Extent;
use crate::args::{parse_i64, push_i64};
use crate::window::{slot_index, slot_start};

/// A counter's hash, field by field (the command layer's key, recording effects; a map in
/// the unit tests).
pub trait RawFields {
    fn read(&mut self, name: &[u8]) -> Option<Vec<u8>>;
    fn write(&mut self, name: &[u8], value: &[u8]);
    /// True if the field existed.
    fn delete(&mut self, name: &[u8]) -> bool;
}

/// True if the run holding slot `index` of resolution `res_ms` is older, at `now`, than
/// the two newest runs of the resolution: only such a run may be packed.
#[inline]
pub fn may_be_packed(res_ms: i64, index: i64, now: i64) -> bool {
    // A slot starting less than RUN slots before `now` lies in one of the two newest runs:
    // the usual case, decided without a division.
    let run_span = RUN.saturating_mul(res_ms);
    if index.saturating_mul(res_ms) > now.saturating_sub(run_span) {
        return false;
    }
    let (Some(first), Some(now_first)) = (
        packed::run_first(index),
        packed::run_first(slot_index(now, res_ms)),
    ) else {
        return false;
    };
    first <= now_first.saturating_sub(2 * RUN)
}

/// The non-zero slots of a packed field of the run starting at `first`, oldest first;
/// `None` when the value is not a valid run of [`RUN`] slots there (it then holds nothing).
pub fn run_slots(first: i64, value: &[u8]) -> Option<Vec<(i64, i64)>> {
    if first.rem_euclid(RUN) != 0 || packed::header(value).ok()?.run != RUN {
        return None;
    }
    packed::decode(first, value).ok()
}

/// The count slot `index` holds in a packed field of the run starting at `first` (0 when
/// the field holds nothing there, or is not valid).
fn count_in(first: i64, value: &[u8], index: i64) -> i64 {
    run_slots(first, value)
        .and_then(|slots| {
            let at = slots.binary_search_by_key(&index, |&(i, _)| i).ok()?;
            slots.get(at).map(|&(_, count)| count)
        })
        .unwrap_or(0)
}

fn slot_name(res_ms: i64, index: i64) -> Vec<u8> {
    let mut name = Vec::with_capacity(24);
    push_slot_field(&mut name, res_ms, index);
    name
}

/// The count of slot `index` of a run that may be packed: its own field (a value that is
/// not an integer counts 0 but is stored) plus its count in the run's packed field.
/// `None` when neither form stores it.
pub fn get(fields: &mut dyn RawFields, res_ms: i64, index: i64) -> Option<i64> {
    let own = fields
        .read(&slot_name(res_ms, index))
        .map(|value| parse_i64(&value).unwrap_or(0));
    let packed = packed::run_first(index)
        .and_then(|first| {
            let value = fields.read(&packed::packed_field(res_ms, first))?;
            Some(count_in(first, &value, index))
        })
        .filter(|&count| count != 0);
    match (own, packed) {
        (None, None) => None,
        // Both forms only after a user's edit; a sum beyond i64 stays at its bound.
        (own, packed) => Some(own.unwrap_or(0).saturating_add(packed.unwrap_or(0))),
    }
}

/// Stores `count` (not 0) as the count of slot `index` of a run that may be packed: in the
/// run's packed field, made when the run has none (or replacing one that is not valid).
/// When the run's total would leave i64 the run is unpacked: each of its slots a field of
/// its own. Either way the slot ends in one form.
pub fn put(fields: &mut dyn RawFields, res_ms: i64, index: i64, count: i64) {
    let own = slot_name(res_ms, index);
    let own_value = |count: i64| {
        let mut value = Vec::with_capacity(20);
        push_i64(&mut value, count);
        value
    };
    let Some(first) = packed::run_first(index) else {
        return fields.write(&own, &own_value(count));
    };
    let name = packed::packed_field(res_ms, first);
    let mut value = fields.read(&name);
    if value
        .as_deref()
        .is_none_or(|v| run_slots(first, v).is_none())
    {
        // The run's first packed field: the slots it holds as fields of their own (not
        // packed by the timer yet, or a user's edit) go into it first, so a sealed run is
        // only ever its packed field (what a window's sum reads, `sealed_sum`).
        if seal(fields, res_ms, first) {
            value = fields.read(&name);
        }
    }
    let edit = match value.as_deref().filter(|v| run_slots(first, v).is_some()) {
        Some(value) => packed::set(first, value, index, count),
        None => packed::encode(first, RUN, &[(index, count)]).map(|value| Edit {
            count,
            value: Some(value),
        }),
    };
    match edit {
        Ok(Edit { value, .. }) => {
            match value {
                Some(value) => fields.write(&name, &value),
                None => {
                    fields.delete(&name);
                }
            }
            fields.delete(&own);
        }
        // The run's total would leave i64: the slot leaves the run and is a field of its
        // own (its count in the run set to 0 first, so it is still in one form).
        // The run's total would leave i64: the whole run goes back to a field per slot (a
        // run with no packed field is read slot by slot, so sums stay exact).
        Err(_) => {
            let slots = value
                .as_deref()
                .and_then(|value| run_slots(first, value))
                .unwrap_or_default();
            for (at, at_count) in slots {
                if at != index {
                    fields.write(&slot_name(res_ms, at), &own_value(at_count));
                }
            }
            if value.is_some() {
                fields.delete(&name);
            }
            fields.write(&own, &own_value(count));
        }
    }
}

/// Removes slot `index` of a run that may be packed, in both forms; true if either stored
/// it. A packed field that is not valid is deleted (it held nothing).
pub fn remove(fields: &mut dyn RawFields, res_ms: i64, index: i64) -> bool {
    let mut existed = fields.delete(&slot_name(res_ms, index));
    let Some(first) = packed::run_first(index) else {
        return existed;
    };
    let name = packed::packed_field(res_ms, first);
    let Some(value) = fields.read(&name) else {
        return existed;
    };
    if run_slots(first, &value).is_none() {
        fields.delete(&name);
        return existed;
    }
    if count_in(first, &value, index) != 0 {
        existed = true;
        match packed::set(first, &value, index, 0) {
            Ok(Edit { value: Some(v), .. }) => fields.write(&name, &v),
            Ok(Edit { value: None, .. }) => {
                fields.delete(&name);
            }
            // Setting a slot to 0 only fails when the rest of the run's total leaves i64:
            // the whole run goes rather than keeping a slot that was removed.
            Err(_) => {
                fields.delete(&name);
            }
        }
    }
    existed
}

/// Appends the stored slots `lo ..= hi` of resolution `res_ms` (all in one run that may be
/// packed) to `out`, oldest first, each form added to the other.
pub fn ordered_in_run(
    fields: &mut dyn RawFields,
    res_ms: i64,
    lo: i64,
    hi: i64,
    out: &mut Vec<(i64, i64)>,
) {
    let packed = packed::run_first(lo)
        .and_then(|first| {
            let value = fields.read(&packed::packed_field(res_ms, first))?;
            run_slots(first, &value)
        })
        .unwrap_or_default();
    let mut packed = packed
        .into_iter()
        .filter(|&(index, _)| (lo..=hi).contains(&index))
        .peekable();
    let mut index = lo;
    while index <= hi {
        let own = fields
            .read(&slot_name(res_ms, index))
            .map(|value| parse_i64(&value).unwrap_or(0));
        let in_run = packed.next_if(|&(i, _)| i == index).map(|(_, count)| count);
        match (own, in_run) {
            (None, None) => {}
            (own, in_run) => {
                out.push((index, own.unwrap_or(0).saturating_add(in_run.unwrap_or(0))))
            }
        }
        index += 1;
    }
}

/// The sum of slots `lo ..= hi` of resolution `res_ms`, all in runs the timer has sealed:
/// each run's packed field alone (a whole run from its header's total, an edge run by
/// decoding part of it), one field read per run. In a sealed run the packed field is the
/// only form tally writes, so a slot field there is a user's edit and a sum does not read
/// it. A run without a valid packed field (empty, or a user's `HDEL` or `HSET` of other
/// bytes) is returned in `unpacked` as `(from, to)`: its slot fields, if any, are found by
/// the caller (probes, or one walk of the hash when that is cheaper).
pub fn sealed_sum(
    fields: &mut dyn RawFields,
    res_ms: i64,
    lo: i64,
    hi: i64,
    unpacked: &mut Vec<(i64, i64)>,
) -> i128 {
    let mut sum = 0i128;
    let Some(mut first) = packed::run_first(lo) else {
        return sum;
    };
    while first <= hi {
        let Some(last) = first.checked_add(RUN - 1) else {
            break;
        };
        let (from, to) = (lo.max(first), hi.min(last));
        let value = fields.read(&packed::packed_field(res_ms, first));
        match value.and_then(|value| {
            packed::header(&value)
                .ok()
                .filter(|h| h.run == RUN)
                .and_then(|_| packed::range_sum(first, &value, from, to).ok())
        }) {
            Some(part) => sum += part,
            None => unpacked.push((from, to)),
        }
        first = last.saturating_add(1);
        if last == i64::MAX {
            break;
        }
    }
    sum
}

/// Appends the slots `lo ..= hi` of resolution `res_ms`, all in runs the timer has sealed,
/// to `out`, oldest first, from each run's packed field alone (as [`sealed_sum`] sums
/// them). A run without a valid packed field is left to the caller in `unpacked`, as
/// `(from, to)`; its slot fields belong between the runs around it.
pub fn sealed_slots(
    fields: &mut dyn RawFields,
    res_ms: i64,
    lo: i64,
    hi: i64,
    out: &mut Vec<(i64, i64)>,
    unpacked: &mut Vec<(i64, i64)>,
) {
    let Some(mut first) = packed::run_first(lo) else {
        return;
    };
    while first <= hi {
        let Some(last) = first.checked_add(RUN - 1) else {
            break;
        };
        let (from, to) = (lo.max(first), hi.min(last));
        match fields
            .read(&packed::packed_field(res_ms, first))
            .and_then(|value| run_slots(first, &value))
        {
            Some(slots) => out.extend(
                slots
                    .into_iter()
                    .filter(|&(index, _)| (from..=to).contains(&index)),
            ),
            None => unpacked.push((from, to)),
        }
        first = last.saturating_add(1);
        if last == i64::MAX {
            break;
        }
    }
}

/// Calls `f(index, count)` for the slot fields of resolution `res_ms` in `spans` (`(from,
/// to)`, oldest first), probed one by one, oldest first.
pub fn probed(
    fields: &mut dyn RawFields,
    res_ms: i64,
    spans: &[(i64, i64)],
    f: &mut dyn FnMut(i64, i64),
) {
    for &(from, to) in spans {
        let mut index = from;
        while index <= to {
            if let Some(value) = fields.read(&slot_name(res_ms, index)) {
                f(index, parse_i64(&value).unwrap_or(0));
            }
            index += 1;
        }
    }
}

/// Packs the run of resolution `res_ms` starting at `first` (a multiple of [`RUN`]): the
/// slots' own fields are added into the run's packed field (made, or replacing one that is
/// not valid) and deleted. A field that is not an integer holds nothing and goes too. When
/// the run's total would leave i64 the run is unpacked instead (see [`unpack`]). True if
/// the hash changed.
pub fn seal(fields: &mut dyn RawFields, res_ms: i64, first: i64) -> bool {
    if first.rem_euclid(RUN) != 0 || first.checked_add(RUN - 1).is_none() {
        return false;
    }
    let mut own = Vec::new();
    for index in first..first + RUN {
        let name = slot_name(res_ms, index);
        if let Some(value) = fields.read(&name) {
            own.push((index, parse_i64(&value).unwrap_or(0), name));
        }
    }
    if own.is_empty() {
        return false;
    }
    let name = packed::packed_field(res_ms, first);
    let mut counts = fields
        .read(&name)
        .and_then(|value| run_slots(first, &value))
        .unwrap_or_default();
    let packed_before = counts.clone();
    for &(index, count, _) in &own {
        match counts.binary_search_by_key(&index, |&(i, _)| i) {
            Ok(at) => match counts
                .get_mut(at)
                .and_then(|slot| slot.1.checked_add(count))
            {
                Some(sum) => {
                    if let Some(slot) = counts.get_mut(at) {
                        slot.1 = sum;
                    }
                }
                None => return unpack(fields, res_ms, first, &packed_before),
            },
            Err(at) => counts.insert(at, (index, count)),
        }
    }
    counts.retain(|&(_, count)| count != 0);
    if counts.is_empty() {
        fields.delete(&name);
    } else {
        match packed::encode(first, RUN, &counts) {
            Ok(value) => fields.write(&name, &value),
            Err(_) => return unpack(fields, res_ms, first, &packed_before),
        }
    }
    for (_, _, own_name) in own {
        fields.delete(&own_name);
    }
    true
}

/// A run whose total leaves i64 cannot be packed: its packed field's slots become fields
/// of their own (a slot that already has one, a user's edit, keeps that one) and the packed
/// field goes, so the run is read slot by slot, exactly. True (the hash changed).
fn unpack(fields: &mut dyn RawFields, res_ms: i64, first: i64, packed: &[(i64, i64)]) -> bool {
    for &(index, count) in packed {
        let name = slot_name(res_ms, index);
        if fields.read(&name).is_none() {
            let mut value = Vec::with_capacity(20);
            push_i64(&mut value, count);
            fields.write(&name, &value);
        }
    }
    fields.delete(&packed::packed_field(res_ms, first));
    true
}

/// Calls `f(res_ms, index, count)` for the slots one field of a counter's hash stores at
/// `now`: a slot field's one slot, a packed field's non-zero slots (none when it is not
/// valid, or its run is among the two newest). Other fields store none. A slot stored in
/// both forms is given twice (see [`merge_duplicates`]).
pub fn each_in_field(name: &[u8], value: &[u8], now: i64, f: &mut dyn FnMut(i64, i64, i64)) {
    if let Some((res_ms, index)) = parse_slot_field(name) {
        return f(res_ms, index, parse_i64(value).unwrap_or(0));
    }
    let Some((res_ms, first)) = packed::parse_packed_field(name) else {
        return;
    };
    if !may_be_packed(res_ms, first, now) {
        return;
    }
    for (index, count) in run_slots(first, value).unwrap_or_default() {
        f(res_ms, index, count);
    }
}

/// INFO's count of the stored slots from one walk of a counter's hash, without decoding
/// every packed field: a packed field counts the `stored` of its header, only the oldest
/// and the newest packed field of each resolution are decoded (for `first` and `last`),
/// and a slot field inside a packed run is checked against that run (a slot in both forms
/// counts once). Feed it every field with [`InfoWalk::field`], then [`InfoWalk::finish`].
#[derive(Default)]
pub struct InfoWalk {
    own: Vec<(i64, i64)>,
    /// `(res_ms, first, stored)` of each packed field read.
    packed: Vec<(i64, i64, i64)>,
}

impl InfoWalk {
    pub fn field(&mut self, name: &[u8], value: &[u8], now: i64) {
        if let Some(slot) = parse_slot_field(name) {
            return self.own.push(slot);
        }
        let Some((res_ms, first)) = packed::parse_packed_field(name) else {
            return;
        };
        if first.rem_euclid(RUN) != 0 || !may_be_packed(res_ms, first, now) {
            return;
        }
        if let Ok(h) = packed::header(value) {
            if h.run == RUN && h.stored > 0 {
                self.packed.push((res_ms, first, h.stored));
            }
        }
    }

    /// The extent, reading the few packed fields it decodes with `read`.
    pub fn finish(mut self, read: &mut dyn FnMut(&[u8]) -> Option<Vec<u8>>) -> Extent {
        let mut decoded = |res_ms: i64, first: i64| {
            read(&packed::packed_field(res_ms, first))
                .and_then(|value| run_slots(first, &value))
                .unwrap_or_default()
        };
        self.own.sort_unstable();
        self.own.dedup();
        self.packed.sort_unstable();
        let mut extent = Extent::default();
        for &(res_ms, index) in &self.own {
            let in_run = packed::run_first(index).is_some_and(|first| {
                self.packed
                    .binary_search_by(|&(r, f, _)| (r, f).cmp(&(res_ms, first)))
                    .is_ok()
                    && decoded(res_ms, first).iter().any(|&(i, _)| i == index)
            });
            if !in_run {
                extent.add_slot(res_ms, index);
            }
        }
        // Each resolution's packed fields are consecutive, oldest first.
        let mut at = 0;
        while let Some(&(res_ms, oldest, _)) = self.packed.get(at) {
            let runs = self.packed.get(at..).unwrap_or_default();
            let len = runs
                .iter()
                .take_while(|&&(r, _, _)| r == res_ms)
                .count()
                .max(1);
            let runs = runs.get(..len).unwrap_or_default();
            let newest = runs.last().map_or(oldest, |&(_, f, _)| f);
            let stored: i64 = runs.iter().map(|&(_, _, n)| n).sum();
            let ends = [
                decoded(res_ms, oldest).first().map(|&(i, _)| i),
                decoded(res_ms, newest).last().map(|&(i, _)| i),
            ];
            for index in ends.into_iter().flatten() {
                extent.include(slot_start(index, res_ms));
            }
            extent.slots = extent.slots.saturating_add(stored);
            at += len;
        }
        extent
    }
}

/// True if the field is a packed field (whatever its value).
pub fn is_packed_field(name: &[u8]) -> bool {
    packed::parse_packed_field(name).is_some()
}

/// Sums adjacent entries of the same slot in a sorted list (a slot stored in both forms).
pub fn merge_duplicates<K: PartialEq + Copy>(slots: &mut Vec<(K, i64)>) {
    slots.dedup_by(|later, kept| {
        if later.0 == kept.0 {
            kept.1 = kept.1.saturating_add(later.1);
            true
        } else {
            false
        }
    });
}

#[cfg(test)]
mod tests;
