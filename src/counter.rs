//! Pure multi-resolution counter logic (TSCOUNTER). No Redis imports: the algorithm works
//! against the small [`SlotStore`] trait, implemented over a native hash by the command
//! layer and over a `BTreeMap` in the unit tests.
//!
//! Layout of one counter in its hash:
//! * `_tally`: `counter <res>:<samples> ...`, the settings (finest resolution first);
//! * `_state`: `<ref> <d>:<n> ...`, per resolution the count `n` of stored slots and a
//!   lower bound `lo` of their slot indexes, written as `d = slot_index(ref) - lo` from a
//!   reference time `ref` (ms) so the field stays short: a hash keeps the compact listpack
//!   encoding only while every value is at most 64 bytes. Invariant: every stored slot of
//!   a resolution lies in `lo .. lo + samples`. It lets trimming find old slots without
//!   scanning the hash: at most `samples` probes, and usually one;
//! * `<res>:<slot index>`: the count of one slot, e.g. `1m:29396160` for the minute that
//!   starts at 29396160 × 60000 ms. Only non-zero counts are stored. The index, not the
//!   start in ms, keeps fields short: a sparse ring counter fits in under 400 bytes.

use crate::args::{format_duration, parse_duration, parse_i64, push_duration};
use crate::error::{Error, Result};
use crate::window::{first_kept, leaves_at, slot_index, slot_start, slots_covering};

/// The hash field holding the family marker and settings, common to every tally hash.
pub const MARKER_FIELD: &str = "_tally";
/// The hash field holding the per-resolution bookkeeping.
pub const STATE_FIELD: &str = "_state";
/// Family word that starts the marker value of a counter.
pub const FAMILY: &str = "counter";

pub const MAX_RESOLUTIONS: usize = 16;
pub const MAX_SAMPLES: i64 = 100_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolution {
    pub ms: i64,
    pub samples: i64,
}

impl Resolution {
    /// Time span kept by this resolution.
    pub fn span(&self) -> i64 {
        self.ms.saturating_mul(self.samples)
    }
}

/// Parses `res:samples` tokens (`1s:120`); sorts them finest first.
pub fn parse_resolutions<T: AsRef<[u8]>>(tokens: &[T]) -> Result<Vec<Resolution>> {
    if tokens.is_empty() || tokens.len() > MAX_RESOLUTIONS {
        return Err(Error::Invalid(format!(
            "a counter has 1 to {MAX_RESOLUTIONS} resolutions"
        )));
    }
    let mut out: Vec<Resolution> = Vec::with_capacity(tokens.len());
    for token in tokens {
        let token = token.as_ref();
        // Any bad token (duration, samples, duplicate) is a bad resolution, reported with
        // the contract's text for bad durations and resolutions.
        let invalid = || Error::InvalidDuration(String::from_utf8_lossy(token).into_owned());
        let colon = token.iter().position(|&b| b == b':').ok_or_else(invalid)?;
        let (res, samples) = (&token[..colon], &token[colon + 1..]);
        let ms = parse_duration(res)?;
        let samples = parse_i64(samples).map_err(|_| invalid())?;
        if !(1..=MAX_SAMPLES).contains(&samples) || out.iter().any(|r| r.ms == ms) {
            return Err(invalid());
        }
        out.push(Resolution { ms, samples });
    }
    out.sort_by_key(|r| r.ms);
    Ok(out)
}

/// Parses a whitespace-separated resolution list (config value, stored settings).
pub fn parse_resolution_text(text: &str) -> Result<Vec<Resolution>> {
    let tokens: Vec<&str> = text.split_ascii_whitespace().collect();
    parse_resolutions(&tokens)
}

pub fn format_resolutions(resolutions: &[Resolution]) -> String {
    resolutions
        .iter()
        .map(|r| format!("{}:{}", format_duration(r.ms), r.samples))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Name of the hash field holding slot `index` of the resolution `res_ms`.
pub fn slot_field(res_ms: i64, index: i64) -> String {
    use std::fmt::Write;
    let mut field = String::with_capacity(24);
    push_duration(&mut field, res_ms);
    let _ = write!(field, ":{index}");
    field
}

/// Inverse of [`slot_field`]: `(res_ms, slot index)`, or `None` for any other field.
pub fn parse_slot_field(field: &[u8]) -> Option<(i64, i64)> {
    let colon = field.iter().position(|&b| b == b':')?;
    let res_ms = parse_duration(&field[..colon]).ok()?;
    let index = parse_i64(&field[colon + 1..]).ok()?;
    Some((res_ms, index))
}

/// Where a counter's slot counts live. Implemented over a native hash by the command layer.
///
/// A slot field whose value is not an integer (a user's `HSET`) is a stored slot holding 0:
/// `get` answers `Some(0)`, `each_slot` and `ordered_slots` list it with count 0, and a write
/// overwrites it without counting a new slot.
pub trait SlotStore {
    fn get(&mut self, res_ms: i64, index: i64) -> Option<i64>;
    fn put(&mut self, res_ms: i64, index: i64, count: i64);
    /// Removes a slot; true if it was stored.
    fn remove(&mut self, res_ms: i64, index: i64) -> bool;
    /// Number of stored slots, all resolutions together.
    fn stored_slots(&mut self) -> usize;
    /// Calls `f(res_ms, index, count)` for every stored slot, in no particular order.
    fn each_slot(&mut self, f: &mut dyn FnMut(i64, i64, i64));
    /// Appends the stored slots `lo ..= hi` of one resolution to `out`, oldest first. Stores
    /// that can do better than one probe per slot (an ordered in-memory copy) override it.
    fn ordered_slots(&mut self, res_ms: i64, lo: i64, hi: i64, out: &mut Vec<(i64, i64)>) {
        let mut index = lo;
        while index <= hi {
            if let Some(count) = self.get(res_ms, index) {
                out.push((index, count));
            }
            index += 1;
        }
    }
    /// True if probing slots one by one costs no more than walking every stored slot.
    fn probes_are_cheap(&mut self, probes: i64) -> bool {
        probes <= self.stored_slots() as i64
    }
}

/// Stored slots of several `(res_ms, lo, hi)` spans, each oldest first: by probing when
/// that is cheaper than a walk of the store, else by one walk of the whole store. Either
/// way the work is bounded by the spans or by the stored data, never by their product.
pub fn collect_ordered(
    store: &mut dyn SlotStore,
    spans: &[(i64, i64, i64)],
) -> Vec<Vec<(i64, i64)>> {
    let mut out: Vec<Vec<(i64, i64)>> = vec![Vec::new(); spans.len()];
    let probes = spans.iter().fold(0i64, |total, &(_, lo, hi)| {
        total.saturating_add(hi.saturating_sub(lo).saturating_add(1).max(0))
    });
    if store.probes_are_cheap(probes) {
        for (slots, &(res_ms, lo, hi)) in out.iter_mut().zip(spans) {
            store.ordered_slots(res_ms, lo, hi, slots);
        }
    } else {
        store.each_slot(&mut |res_ms, index, count| {
            let at = spans
                .iter()
                .position(|&(r, lo, hi)| r == res_ms && (lo..=hi).contains(&index));
            if let Some(slots) = at.and_then(|at| out.get_mut(at)) {
                slots.push((index, count));
            }
        });
        out.iter_mut().for_each(|slots| slots.sort_unstable());
    }
    out
}

/// Per-resolution bookkeeping, see the module comment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Track {
    pub lo: i64,
    pub n: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counter {
    pub resolutions: Vec<Resolution>,
    pub tracks: Vec<Track>,
    /// Reference time of the stored state (see the module comment).
    pub reference: i64,
}

/// Largest `|slot_index(ref) - lo|` written before the reference is moved to a newer time.
const MAX_STATE_OFFSET: i64 = 999;

/// How often (in probes) a bounded trim asks its budget whether it may go on.
const PROBES_PER_BUDGET_CHECK: u32 = 32;

/// What one [`Counter::trim_within`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trimmed {
    /// Slots removed.
    pub removed: usize,
    /// False if the budget ran out first; the bookkeeping records how far it got, so the
    /// next call resumes there.
    pub finished: bool,
}

/// One resolution's part of an increment, computed before anything is written.
struct SlotChange {
    res: usize,
    index: i64,
    existed: bool,
    new: i64,
}

impl Counter {
    pub fn new(resolutions: Vec<Resolution>) -> Self {
        let tracks = vec![Track::default(); resolutions.len()];
        Counter {
            resolutions,
            tracks,
            reference: 0,
        }
    }

    /// The marker field's value.
    pub fn marker(&self) -> String {
        format!("{FAMILY} {}", format_resolutions(&self.resolutions))
    }

    /// The state field's value at time `now`. The reference time moves to `now` only when
    /// an offset would grow long, so an unchanged state keeps the same text.
    pub fn state(&mut self, now: i64) -> String {
        let offsets_fit = |reference: i64| {
            self.resolutions.iter().zip(&self.tracks).all(|(r, t)| {
                t.n == 0 || (slot_index(reference, r.ms) - t.lo).abs() <= MAX_STATE_OFFSET
            })
        };
        if !offsets_fit(self.reference) {
            self.reference = now;
        }
        use std::fmt::Write;
        let mut text = String::with_capacity(16 + 8 * self.tracks.len());
        let _ = write!(text, "{}", self.reference);
        for (r, t) in self.resolutions.iter().zip(&self.tracks) {
            let offset = if t.n == 0 {
                0
            } else {
                slot_index(self.reference, r.ms) - t.lo
            };
            let _ = write!(text, " {offset}:{}", t.n);
        }
        text
    }

    /// True if the marker belongs to this family (whatever its settings).
    pub fn is_counter_marker(marker: &[u8]) -> bool {
        marker.starts_with(FAMILY.as_bytes()) && marker.get(FAMILY.len()).is_none_or(|&b| b == b' ')
    }

    /// Rebuilds a counter from its stored fields; `None` if they are not a valid counter.
    pub fn from_stored(marker: &[u8], state: Option<&[u8]>) -> Option<Counter> {
        Counter::with_state(Counter::parse_marker(marker)?, state)
    }

    /// The resolutions named by a marker value (`counter 1s:120 ...`).
    pub fn parse_marker(marker: &[u8]) -> Option<Vec<Resolution>> {
        let text = std::str::from_utf8(marker).ok()?;
        let settings = text.strip_prefix(FAMILY)?.strip_prefix(' ')?;
        parse_resolution_text(settings).ok()
    }

    /// A counter with these resolutions and the stored state field (if any).
    pub fn with_state(resolutions: Vec<Resolution>, state: Option<&[u8]>) -> Option<Counter> {
        let mut counter = Counter::new(resolutions);
        if let Some(state) = state {
            let mut items = std::str::from_utf8(state).ok()?.split_ascii_whitespace();
            let reference = parse_i64(items.next()?.as_bytes()).ok()?;
            let parsed: Option<Vec<Track>> = items
                .zip(&counter.resolutions)
                .map(|(item, r)| {
                    let (offset, n) = item.split_once(':')?;
                    let offset = parse_i64(offset.as_bytes()).ok()?;
                    let track = Track {
                        lo: slot_index(reference, r.ms).checked_sub(offset)?,
                        n: parse_i64(n.as_bytes()).ok()?,
                    };
                    // More stored slots than a resolution keeps is not a counter's state.
                    (0..=r.samples).contains(&track.n).then_some(track)
                })
                .collect();
            counter.reference = reference;
            if state
                .split(|&b| b == b' ')
                .filter(|t| !t.is_empty())
                .count()
                != counter.tracks.len() + 1
            {
                return None;
            }
            counter.tracks = parsed?;
        }
        Some(counter)
    }

    pub fn stored_slots(&self) -> i64 {
        self.tracks
            .iter()
            .fold(0i64, |sum, t| sum.saturating_add(t.n))
    }

    /// Removes the slots that are no longer kept at `now`. Returns how many were removed.
    pub fn trim(&mut self, store: &mut dyn SlotStore, now: i64) -> usize {
        self.trim_within(store, now, &mut || true).removed
    }

    /// Adds a slot found in the store to the bookkeeping (rebuilding it from the stored
    /// fields after `_state` was lost). Call [`Counter::finish_rebuild`] afterwards.
    pub fn note_stored_slot(&mut self, res_ms: i64, index: i64) {
        let at = self.resolutions.iter().position(|r| r.ms == res_ms);
        if let Some(track) = at.and_then(|at| self.tracks.get_mut(at)) {
            track.lo = if track.n == 0 {
                index
            } else {
                track.lo.min(index)
            };
            track.n = track.n.saturating_add(1);
        }
    }

    /// Ends a rebuild: a resolution never holds more than `samples` slots in its bookkeeping
    /// (stored fields beyond that were not written by tally and are trimmed away later).
    pub fn finish_rebuild(&mut self) {
        for (r, t) in self.resolutions.iter().zip(self.tracks.iter_mut()) {
            t.n = t.n.min(r.samples);
        }
    }

    /// True if a trim at `now` would change anything: a slot has left, or the bookkeeping
    /// counts more slots than the store holds and a track's lower bound is not a stored
    /// slot (see [`Counter::trim_within`]). Only reads the store.
    pub fn has_trim_work(&self, store: &mut dyn SlotStore, now: i64) -> bool {
        let overcounted = self.stored_slots() > store.stored_slots() as i64;
        self.resolutions.iter().zip(&self.tracks).any(|(r, t)| {
            t.n > 0
                && (t.lo < first_kept(now, r.ms, r.samples)
                    || (overcounted && store.get(r.ms, t.lo).is_none()))
        })
    }

    /// Removes the slots that are no longer kept at `now`, asking `may_continue` every few
    /// probes whether the budget allows more. Resumable: the bookkeeping always records how
    /// far it got. It also heals bookkeeping that a user's `HDEL` made wrong:
    /// * every stored slot of a resolution lies in `lo .. lo + samples`: once trimming has
    ///   passed that whole range, no slot is left whatever `n` says;
    /// * when `n` counts more slots than the store holds, `lo` moves on past positions that
    ///   hold nothing (so the next visit is due when a real slot leaves, not every slot).
    pub fn trim_within(
        &mut self,
        store: &mut dyn SlotStore,
        now: i64,
        may_continue: &mut dyn FnMut() -> bool,
    ) -> Trimmed {
        let mut removed = 0;
        let overcounted = self.stored_slots() > store.stored_slots() as i64;
        let mut probes: u32 = 0;
        let mut budget_left = || {
            probes = probes.wrapping_add(1);
            !probes.is_multiple_of(PROBES_PER_BUDGET_CHECK) || may_continue()
        };
        for (res, track) in self.resolutions.iter().zip(self.tracks.iter_mut()) {
            if track.n == 0 {
                continue;
            }
            let first = first_kept(now, res.ms, res.samples);
            let end = track.lo.saturating_add(res.samples);
            // Slots that have left: lo .. min(first, end).
            while track.lo < first.min(end) && track.n > 0 {
                if !budget_left() {
                    return Trimmed {
                        removed,
                        finished: false,
                    };
                }
                if store.remove(res.ms, track.lo) {
                    track.n -= 1;
                    removed += 1;
                }
                track.lo += 1;
            }
            if track.n == 0 {
                continue;
            }
            track.lo = track.lo.max(first);
            if overcounted {
                // Tally writes no slot after the one containing `now`: past it, nothing
                // the bookkeeping counts can be left. (A bound that does not move with
                // `lo`, so a resumed search still ends.)
                let limit = end.min(slot_index(now, res.ms).saturating_add(1));
                while track.lo < limit && store.get(res.ms, track.lo).is_none() {
                    if !budget_left() {
                        track.n = track.n.min(end - track.lo);
                        return Trimmed {
                            removed,
                            finished: false,
                        };
                    }
                    track.lo += 1;
                }
                if track.lo >= limit {
                    track.n = 0;
                }
            }
            // At most one stored slot per position left in lo .. end.
            track.n = track.n.min(end.saturating_sub(track.lo)).max(0);
        }
        Trimmed {
            removed,
            finished: true,
        }
    }

    /// Adds `increment` at time `ts` (already clamped to `now`) to every resolution that
    /// keeps `ts`. Returns the new count of the finest such slot. All checks happen before
    /// the first write, so an error leaves the store untouched.
    pub fn incrby(
        &mut self,
        store: &mut dyn SlotStore,
        now: i64,
        ts: i64,
        increment: i64,
    ) -> Result<i64> {
        let mut changes = Vec::with_capacity(self.resolutions.len());
        for (res_i, res) in self.resolutions.iter().enumerate() {
            let index = slot_index(ts, res.ms);
            if index < first_kept(now, res.ms, res.samples) {
                continue;
            }
            let old = store.get(res.ms, index);
            let new = old
                .unwrap_or(0)
                .checked_add(increment)
                .ok_or(Error::Overflow)?;
            changes.push(SlotChange {
                res: res_i,
                index,
                existed: old.is_some(),
                new,
            });
        }
        let reply = changes
            .first()
            .map(|c| c.new)
            .ok_or(Error::OutsideKeptRange)?;
        if increment == 0 {
            return Ok(reply);
        }
        self.trim(store, now);
        for change in changes {
            let Some((res, track)) = self
                .resolutions
                .get(change.res)
                .zip(self.tracks.get_mut(change.res))
            else {
                continue;
            };
            if change.new == 0 {
                if store.remove(res.ms, change.index) {
                    track.n = (track.n - 1).max(0);
                }
            } else {
                store.put(res.ms, change.index, change.new);
                if !change.existed {
                    track.lo = if track.n == 0 {
                        change.index
                    } else {
                        track.lo.min(change.index)
                    };
                    track.n += 1;
                }
            }
        }
        Ok(reply)
    }

    /// The finest resolution whose kept span covers `window`.
    pub fn resolution_for(&self, window: i64) -> Result<Resolution> {
        self.resolutions
            .iter()
            .copied()
            .find(|r| r.span() >= window)
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "window '{}' is longer than any resolution keeps",
                    format_duration(window)
                ))
            })
    }

    /// Sums of each window ending with the slot that contains `t` (`t <= now`), counting
    /// only slots still kept at `now`.
    pub fn sum(
        &self,
        store: &mut dyn SlotStore,
        now: i64,
        t: i64,
        windows: &[i64],
    ) -> Result<Vec<i64>> {
        // Each window becomes a slot-index range of one resolution.
        let mut ranges = Vec::with_capacity(windows.len());
        for &window in windows {
            let res = self.resolution_for(window)?;
            let hi = slot_index(t, res.ms);
            let lo =
                (hi - slots_covering(window, res.ms) + 1).max(first_kept(now, res.ms, res.samples));
            ranges.push((res.ms, lo, hi));
        }
        // Every window of one resolution ends with the same slot, so the widest of them
        // covers the others: one ordered list of its stored slots and their prefix sums
        // answer every window with two binary searches.
        let mut spans: Vec<(i64, i64, i64)> = Vec::new();
        for &(res_ms, lo, hi) in ranges.iter().filter(|&&(_, lo, hi)| lo <= hi) {
            match spans.iter_mut().find(|span| span.0 == res_ms) {
                Some(span) => {
                    span.1 = span.1.min(lo);
                    span.2 = span.2.max(hi);
                }
                None => spans.push((res_ms, lo, hi)),
            }
        }
        let slots = collect_ordered(store, &spans);
        let prefixes: Vec<Vec<i128>> = slots
            .iter()
            .map(|slots| {
                let mut prefix = Vec::with_capacity(slots.len() + 1);
                let mut total = 0i128;
                prefix.push(total);
                for &(_, count) in slots {
                    total += i128::from(count);
                    prefix.push(total);
                }
                prefix
            })
            .collect();
        let mut sums = vec![0i128; ranges.len()];
        for (sum, &(res_ms, lo, hi)) in sums.iter_mut().zip(&ranges) {
            let Some(at) = spans.iter().position(|span| span.0 == res_ms) else {
                continue;
            };
            let (Some(slots), Some(prefix)) = (slots.get(at), prefixes.get(at)) else {
                continue;
            };
            if lo > hi {
                continue;
            }
            let from = slots.partition_point(|&(index, _)| index < lo);
            let to = slots.partition_point(|&(index, _)| index <= hi);
            if let (Some(a), Some(b)) = (prefix.get(from), prefix.get(to)) {
                *sum = b - a;
            }
        }
        sums.into_iter()
            .map(|s| i64::try_from(s).map_err(|_| Error::Overflow))
            .collect()
    }

    /// `(slot start, count)` of resolution `res_ms` for the slots from the one containing
    /// `from` to the one containing `to`, clamped to what is kept at `now`; oldest first.
    /// With `empty`, slots without a count are listed with 0.
    pub fn range(
        &self,
        store: &mut dyn SlotStore,
        now: i64,
        res_ms: i64,
        from: Option<i64>,
        to: Option<i64>,
        empty: bool,
    ) -> Result<Vec<(i64, i64)>> {
        let res = self
            .resolutions
            .iter()
            .copied()
            .find(|r| r.ms == res_ms)
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "the counter has no resolution '{}'",
                    format_duration(res_ms)
                ))
            })?;
        let kept_lo = first_kept(now, res.ms, res.samples);
        let kept_hi = slot_index(now, res.ms);
        let lo = from.map_or(kept_lo, |f| slot_index(f, res.ms).max(kept_lo));
        let hi = to.map_or(kept_hi, |t| slot_index(t, res.ms).min(kept_hi));
        if lo > hi {
            return Ok(Vec::new());
        }
        let counts: Vec<(i64, i64)> = collect_ordered(store, &[(res.ms, lo, hi)])
            .into_iter()
            .flatten()
            .filter(|&(_, count)| count != 0)
            .collect();
        let start = |index: i64| slot_start(index, res.ms);
        if !empty {
            return Ok(counts.into_iter().map(|(i, c)| (start(i), c)).collect());
        }
        let mut stored = counts.into_iter().peekable();
        Ok((lo..=hi)
            .map(|index| {
                let count = stored.next_if(|&(i, _)| i == index).map_or(0, |(_, c)| c);
                (start(index), count)
            })
            .collect())
    }

    /// When the oldest stored slot stops being kept: the next time trimming has work.
    pub fn next_due(&self) -> Option<i64> {
        self.resolutions
            .iter()
            .zip(&self.tracks)
            .filter(|(_, t)| t.n > 0)
            .map(|(r, t)| leaves_at(t.lo, r.ms, r.samples))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Rng;
    use std::collections::BTreeMap;

    #[derive(Default)]
    struct MapStore(BTreeMap<(i64, i64), i64>);

    impl SlotStore for MapStore {
        fn get(&mut self, res_ms: i64, index: i64) -> Option<i64> {
            self.0.get(&(res_ms, index)).copied()
        }
        fn put(&mut self, res_ms: i64, index: i64, count: i64) {
            assert_ne!(count, 0, "zero counts are never stored");
            self.0.insert((res_ms, index), count);
        }
        fn remove(&mut self, res_ms: i64, index: i64) -> bool {
            self.0.remove(&(res_ms, index)).is_some()
        }
        fn stored_slots(&mut self) -> usize {
            self.0.len()
        }
        fn each_slot(&mut self, f: &mut dyn FnMut(i64, i64, i64)) {
            // Reverse order, to prove callers do not rely on any order.
            for (&(r, i), &c) in self.0.iter().rev() {
                f(r, i, c);
            }
        }
    }

    fn res(text: &str) -> Vec<Resolution> {
        parse_resolution_text(text).unwrap()
    }

    /// Reference model: remembers, per resolution, the increments each slot received when
    /// it was kept at write time; a read counts the slots kept at read time.
    #[derive(Default)]
    struct Model(BTreeMap<(i64, i64), i64>);

    impl Model {
        fn incr(&mut self, rs: &[Resolution], now: i64, ts: i64, by: i64) -> Option<i64> {
            let mut reply = None;
            for r in rs {
                let i = slot_index(ts, r.ms);
                if i >= first_kept(now, r.ms, r.samples) {
                    let v = self.0.entry((r.ms, i)).or_default();
                    *v += by;
                    reply.get_or_insert(*v);
                }
            }
            reply
        }
        fn kept(&self, r: &Resolution, now: i64, i: i64) -> i64 {
            if i >= first_kept(now, r.ms, r.samples) {
                self.0.get(&(r.ms, i)).copied().unwrap_or(0)
            } else {
                0
            }
        }
    }

    #[test]
    fn resolution_lists_parse_sort_and_refuse() {
        let rs = res("1m:60 1s:120");
        assert_eq!(
            rs,
            vec![
                Resolution {
                    ms: 1000,
                    samples: 120
                },
                Resolution {
                    ms: 60_000,
                    samples: 60
                }
            ]
        );
        assert_eq!(format_resolutions(&rs), "1s:120 1m:60");
        assert_eq!(
            parse_resolution_text("1s:1 1000:5"),
            Err(Error::InvalidDuration("1000:5".into()))
        );
        assert_eq!(
            parse_resolution_text("1x:5"),
            Err(Error::InvalidDuration("1x".into()))
        );
        assert_eq!(
            parse_resolution_text("1s"),
            Err(Error::InvalidDuration("1s".into()))
        );
        assert_eq!(
            parse_resolution_text("1s:a"),
            Err(Error::InvalidDuration("1s:a".into()))
        );
        assert!(parse_resolution_text("1s:0").is_err());
        assert!(parse_resolution_text("1s:100001").is_err());
        assert!(parse_resolution_text("").is_err());
        let seventeen: Vec<String> = (1..=17).map(|i| format!("{i}s:1")).collect();
        assert!(parse_resolutions(&seventeen).is_err());
    }

    #[test]
    fn fields_round_trip() {
        assert_eq!(slot_field(60_000, 3), "1m:3");
        assert_eq!(parse_slot_field(b"1m:3"), Some((60_000, 3)));
        assert_eq!(parse_slot_field(b"1m:x"), None);
        assert_eq!(parse_slot_field(b"1x:3"), None);
        assert_eq!(parse_slot_field(b"_tally"), None);
        assert_eq!(parse_slot_field(b"1m:"), None);
    }

    #[test]
    fn stored_form_round_trips_and_rejects_garbage() {
        let mut c = Counter::new(res("1s:10 1m:5"));
        c.tracks[0] = Track { lo: 17, n: 3 };
        let state = c.state(20_000);
        assert_eq!(state, "0 -17:3 0:0");
        let back = Counter::from_stored(c.marker().as_bytes(), Some(state.as_bytes()));
        assert_eq!(back, Some(c.clone()));
        // The reference stays while offsets are short, and moves when they grow.
        assert_eq!(c.state(30_000), state);
        c.tracks[0].lo = 5_000;
        assert_eq!(c.state(5_000_500), "5000500 0:3 0:0");
        assert!(Counter::is_counter_marker(c.marker().as_bytes()));
        assert!(!Counter::is_counter_marker(b"counterx 1s:1"));
        for bad in [&b"counter"[..], b"counter 1s", b"rank 1s:1", b"\xff"] {
            assert_eq!(Counter::from_stored(bad, None), None);
        }
        let marker = c.marker();
        for bad in [
            &b"1:2"[..],
            b"0 1:2 x:1",
            b"0 1:-1 0:0",
            b"0 1:2 3:4 5:6",
            b"x 1:1 1:1",
            b"0 1:2",
        ] {
            assert_eq!(Counter::from_stored(marker.as_bytes(), Some(bad)), None);
        }
    }

    #[test]
    fn increments_reply_the_finest_kept_slot() {
        let mut c = Counter::new(res("1s:10 1m:10"));
        let mut s = MapStore::default();
        let now = 1_000_600;
        assert_eq!(c.incrby(&mut s, now, now, 5), Ok(5));
        assert_eq!(c.incrby(&mut s, now, now - 500, 2), Ok(7));
        // 30 s ago: too old for 1s:10, kept by 1m:10.
        assert_eq!(c.incrby(&mut s, now, now - 30_000, 1), Ok(8));
        assert_eq!(
            c.incrby(&mut s, now, now - 3_600_000, 1),
            Err(Error::OutsideKeptRange)
        );
        assert_eq!(c.sum(&mut s, now, now, &[1000, 60_000]), Ok(vec![7, 8]));
        assert_eq!(c.stored_slots(), 2);
        assert_eq!(c.incrby(&mut s, now, now, -7), Ok(0));
        assert_eq!(s.0.len(), 1, "a slot that reaches 0 is removed");
        assert_eq!(c.stored_slots(), 1);
    }

    #[test]
    fn overflow_changes_nothing() {
        let mut c = Counter::new(res("1s:10 1m:10"));
        let mut s = MapStore::default();
        c.incrby(&mut s, 61_000, 61_000, i64::MAX).unwrap();
        let before = (c.clone(), s.0.clone());
        assert_eq!(c.incrby(&mut s, 200_000, 200_000, 1), Ok(1));
        c = before.0.clone();
        s.0 = before.1.clone();
        assert_eq!(c.incrby(&mut s, 61_500, 61_500, 1), Err(Error::Overflow));
        assert_eq!((c, s.0), before);
    }

    #[test]
    fn trimming_removes_old_slots_and_schedules_the_next() {
        let mut c = Counter::new(res("1s:3"));
        let mut s = MapStore::default();
        for t in [10_000, 11_000, 12_000] {
            c.incrby(&mut s, t, t, 1).unwrap();
        }
        assert_eq!(c.next_due(), Some(13_000));
        assert_eq!(c.trim(&mut s, 12_999), 0);
        assert_eq!(c.trim(&mut s, 13_000), 1);
        assert_eq!(c.next_due(), Some(14_000));
        assert_eq!(c.trim(&mut s, 100_000), 2);
        assert_eq!(c.stored_slots(), 0);
        assert_eq!(c.next_due(), None);
        assert!(s.0.is_empty());
    }

    #[test]
    fn sparse_counter_trims_with_few_probes() {
        struct Counting(MapStore, usize);
        impl SlotStore for Counting {
            fn get(&mut self, r: i64, i: i64) -> Option<i64> {
                self.0.get(r, i)
            }
            fn put(&mut self, r: i64, i: i64, c: i64) {
                self.0.put(r, i, c)
            }
            fn remove(&mut self, r: i64, i: i64) -> bool {
                self.1 += 1;
                self.0.remove(r, i)
            }
            fn stored_slots(&mut self) -> usize {
                self.0.stored_slots()
            }
            fn each_slot(&mut self, f: &mut dyn FnMut(i64, i64, i64)) {
                self.0.each_slot(f)
            }
        }
        let mut c = Counter::new(res("1s:100000"));
        let mut s = Counting(MapStore::default(), 0);
        for day in 1..=5 {
            let t = day * 86_400_000 * 2;
            c.incrby(&mut s, t, t, 1).unwrap();
        }
        assert!(s.1 <= 8, "{} probes", s.1);
    }

    #[test]
    fn range_lists_kept_slots_oldest_first() {
        let mut c = Counter::new(res("1s:5"));
        let mut s = MapStore::default();
        let now = 100_500;
        c.incrby(&mut s, now, 97_000, 2).unwrap();
        c.incrby(&mut s, now, 100_000, 3).unwrap();
        assert_eq!(
            c.range(&mut s, now, 1000, None, None, false),
            Ok(vec![(97_000, 2), (100_000, 3)])
        );
        assert_eq!(
            c.range(&mut s, now, 1000, None, None, true),
            Ok(vec![
                (96_000, 0),
                (97_000, 2),
                (98_000, 0),
                (99_000, 0),
                (100_000, 3)
            ])
        );
        assert_eq!(
            c.range(&mut s, now, 1000, Some(97_500), Some(98_000), true),
            Ok(vec![(97_000, 2), (98_000, 0)])
        );
        assert_eq!(
            c.range(&mut s, now, 1000, Some(99_000), Some(98_000), true),
            Ok(vec![])
        );
        // Later, 97 s has left the kept range: never listed, even if still stored.
        assert_eq!(
            c.range(&mut s, 102_000, 1000, Some(0), None, false),
            Ok(vec![(100_000, 3)])
        );
        assert!(c.range(&mut s, now, 60_000, None, None, false).is_err());
    }

    #[test]
    fn windows_pick_the_finest_covering_resolution() {
        let c = Counter::new(res("1s:60 1m:60 1h:24 1d:365"));
        assert_eq!(c.resolution_for(5_000).map(|r| r.ms), Ok(1000));
        assert_eq!(c.resolution_for(60_000).map(|r| r.ms), Ok(1000));
        assert_eq!(c.resolution_for(60_001).map(|r| r.ms), Ok(60_000));
        assert_eq!(c.resolution_for(5 * 3_600_000).map(|r| r.ms), Ok(3_600_000));
        assert_eq!(
            c.resolution_for(180 * 86_400_000).map(|r| r.ms),
            Ok(86_400_000)
        );
        assert_eq!(
            c.resolution_for(366 * 86_400_000).unwrap_err().to_string(),
            "ERR window '366d' is longer than any resolution keeps"
        );
    }

    /// Seeded random workload of increments with backfilled timestamps, compared after
    /// every step with the reference model, for several resolution sets.
    #[test]
    fn model_based_random_workload() {
        for (seed, text) in [
            (1u64, "1s:120 5s:120 1m:120 5m:120 1h:120 5h:120 1d:120"),
            (2, "1s:60 1m:60 1h:24 1d:365"),
            (3, "500ms:7 3s:4"),
            (4, "1s:1 2s:1"),
        ] {
            let rs = res(text);
            let mut rng = Rng(seed);
            let mut c = Counter::new(rs.clone());
            let mut s = MapStore::default();
            let mut m = Model::default();
            let mut now: i64 = 1_700_000_000_000;
            let spans: Vec<i64> = rs.iter().map(|r| r.span()).collect();
            let widest = *spans.iter().max().unwrap();
            for step in 0..4000 {
                now += match rng.below(10) {
                    0 => rng.below(widest / 4 + 1),
                    1..=3 => rng.below(5_000),
                    _ => rng.below(300),
                };
                let back = match rng.below(4) {
                    0 => rng.below(widest + 1),
                    _ => rng.below(2_000),
                };
                let ts = now - back;
                let by = rng.below(21) - 10;
                let expected = m.incr(&rs, now, ts, by);
                let got = c.incrby(&mut s, now, ts, by);
                match expected {
                    Some(v) => assert_eq!(got, Ok(v), "seed {seed} step {step}"),
                    None => assert_eq!(got, Err(Error::OutsideKeptRange)),
                }
                // Invariants: bookkeeping matches the store; nothing old stays after a write.
                if by != 0 && expected.is_some() {
                    assert_eq!(c.stored_slots() as usize, s.0.len());
                    for (&(r_ms, i), &v) in &s.0 {
                        let r = rs.iter().find(|r| r.ms == r_ms).unwrap();
                        assert!(i >= first_kept(now, r.ms, r.samples));
                        assert_ne!(v, 0);
                    }
                }
                if step % 7 == 0 {
                    let t = now - rng.below(3_000);
                    let windows: Vec<i64> = (0..3).map(|_| 1 + rng.below(widest)).collect();
                    let want: Vec<i64> = windows
                        .iter()
                        .map(|&w| {
                            let r = rs.iter().find(|r| r.span() >= w).unwrap();
                            let hi = slot_index(t, r.ms);
                            let k = slots_covering(w, r.ms);
                            (hi - k + 1..=hi).map(|i| m.kept(r, now, i)).sum()
                        })
                        .collect();
                    assert_eq!(c.sum(&mut s, now, t, &windows), Ok(want), "seed {seed}");
                    let r = rs[rng.below(rs.len() as i64) as usize];
                    let lo = first_kept(now, r.ms, r.samples);
                    let want_range: Vec<(i64, i64)> = (lo..=slot_index(now, r.ms))
                        .map(|i| (slot_start(i, r.ms), m.kept(&r, now, i)))
                        .collect();
                    assert_eq!(
                        c.range(&mut s, now, r.ms, None, None, true),
                        Ok(want_range.clone())
                    );
                    let nonzero: Vec<(i64, i64)> =
                        want_range.into_iter().filter(|&(_, v)| v != 0).collect();
                    assert_eq!(c.range(&mut s, now, r.ms, None, None, false), Ok(nonzero));
                }
                if step % 50 == 0 {
                    // A timer pass later on removes exactly what is no longer kept.
                    if let Some(due) = c.next_due() {
                        if due <= now + 10_000 {
                            now = now.max(due);
                            c.trim(&mut s, now);
                            assert!(c.next_due().is_none_or(|d| d > now));
                        }
                    }
                }
            }
        }
    }

    /// The ordered-walk SUM answers exactly what summing each window slot by slot does,
    /// for many windows at once, through both collection strategies (probing, and one walk
    /// of the store).
    #[test]
    fn many_window_sums_match_the_naive_sums() {
        struct WalkOnly(MapStore);
        impl SlotStore for WalkOnly {
            fn get(&mut self, r: i64, i: i64) -> Option<i64> {
                self.0.get(r, i)
            }
            fn put(&mut self, r: i64, i: i64, c: i64) {
                self.0.put(r, i, c)
            }
            fn remove(&mut self, r: i64, i: i64) -> bool {
                self.0.remove(r, i)
            }
            fn stored_slots(&mut self) -> usize {
                self.0.stored_slots()
            }
            fn each_slot(&mut self, f: &mut dyn FnMut(i64, i64, i64)) {
                self.0.each_slot(f)
            }
            fn probes_are_cheap(&mut self, _: i64) -> bool {
                false
            }
        }
        for seed in 1..=6u64 {
            let mut rng = Rng(seed);
            let rs = res("1s:300 1m:200 1h:48");
            let mut c = Counter::new(rs.clone());
            let mut s = MapStore::default();
            let now: i64 = 1_700_000_000_000 + rng.below(1_000_000);
            for _ in 0..rng.below(600) {
                let ts = now - rng.below(48 * 3_600_000);
                let _ = c.incrby(&mut s, now, ts, rng.below(19) - 9);
            }
            let t = now - rng.below(5_000);
            let windows: Vec<i64> = (0..1 + rng.below(300))
                .map(|_| 1 + rng.below(48 * 3_600_000))
                .collect();
            let naive: Vec<i64> = windows
                .iter()
                .map(|&w| {
                    let r = rs.iter().find(|r| r.span() >= w).unwrap();
                    let hi = slot_index(t, r.ms);
                    let lo =
                        (hi - slots_covering(w, r.ms) + 1).max(first_kept(now, r.ms, r.samples));
                    (lo..=hi)
                        .map(|i| s.0.get(&(r.ms, i)).copied().unwrap_or(0))
                        .sum()
                })
                .collect();
            assert_eq!(c.sum(&mut s, now, t, &windows), Ok(naive.clone()), "{seed}");
            let mut walk = WalkOnly(s);
            assert_eq!(c.sum(&mut walk, now, t, &windows), Ok(naive), "{seed}");
        }
    }

    /// A user's HDEL of the only fine slot: once it has left, bounded trims (a small budget
    /// each) make progress that is kept between calls, and end with the fine resolution
    /// empty and nothing left to do, long before `samples` more slots have passed.
    #[test]
    fn bounded_trims_resume_and_heal_deleted_slots() {
        let rs = res("1ms:100000 1d:100000");
        let mut c = Counter::new(rs);
        let mut s = MapStore::default();
        let t0: i64 = 1_700_000_000_000;
        c.incrby(&mut s, t0, t0, 1).unwrap();
        assert!(s.remove(1, t0));
        let now = t0 + 100_000 + 5;
        let mut calls = 0;
        loop {
            calls += 1;
            assert!(calls < 10_000, "never finished");
            let mut checks = 0;
            let mut budget = || {
                checks += 1;
                checks < 4
            };
            let before = c.tracks.clone();
            let trimmed = c.trim_within(&mut s, now, &mut budget);
            assert_eq!(trimmed.removed, 0);
            if trimmed.finished {
                break;
            }
            assert_ne!(c.tracks, before, "an unfinished trim made no progress");
        }
        assert!(calls > 10, "the budget was not applied ({calls} calls)");
        assert_eq!(c.tracks[0].n, 0);
        assert_eq!(c.tracks[1].n, 1);
        assert_eq!(
            c.next_due(),
            Some(leaves_at(slot_index(t0, 86_400_000), 86_400_000, 100_000))
        );
        assert!(!c.has_trim_work(&mut s, now));
        // A counter whose bookkeeping matches its store has no work before its due time.
        let mut fresh = Counter::new(res("1s:10"));
        let mut store = MapStore::default();
        fresh.incrby(&mut store, t0, t0, 1).unwrap();
        assert!(!fresh.has_trim_work(&mut store, t0 + 9_000));
        assert!(fresh.has_trim_work(&mut store, t0 + 10_000));
    }

    /// Bookkeeping rebuilt from the stored slots equals what the writes kept.
    #[test]
    fn rebuilt_bookkeeping_matches_the_written_one() {
        let rs = res("1s:60 1m:60");
        let mut c = Counter::new(rs.clone());
        let mut s = MapStore::default();
        let now = 1_700_000_000_000;
        for back in [0, 1_000, 5_000, 59_000, 600_000] {
            c.incrby(&mut s, now, now - back, 2).unwrap();
        }
        let mut rebuilt = Counter::new(rs);
        s.each_slot(&mut |r, i, _| rebuilt.note_stored_slot(r, i));
        rebuilt.finish_rebuild();
        assert_eq!(rebuilt.tracks, c.tracks);
    }
}
