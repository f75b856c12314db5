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
//!
//! Owns: counter arithmetic and its stored text. May not touch: Redis (pure; the command
//! layer provides the hash through [`SlotStore`]).

use crate::args::{format_duration, parse_i64, push_i64};
use crate::error::{Error, Result};
use crate::window::{first_kept, leaves_at, slot_index, slot_start, slots_covering};

use crate::layout;
pub use crate::layout::COUNTER_STATE_FIELD as STATE_FIELD;

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

/// Where a counter's slot counts live. Implemented over a native hash by the command layer.
///
/// A slot field whose value is not an integer (a user's `HSET`) is a stored slot holding 0:
/// `get` answers `Some(0)`, `each_slot` and `ordered_slots` list it with count 0, and a write
/// overwrites it without counting a new slot.
pub trait SlotStore {
    fn get(&mut self, res_ms: i64, index: i64) -> Option<i64>;
    fn put(&mut self, res_ms: i64, index: i64, count: i64);
    /// `get` of several `(res_ms, index)` slots into `out` (stores that read in batches
    /// override it).
    fn get_many(&mut self, slots: &[(i64, i64)], out: &mut [Option<i64>]) {
        for (&(res_ms, index), out) in slots.iter().zip(out) {
            *out = self.get(res_ms, index);
        }
    }
    /// `put` of several `(res_ms, index, count)` slots, distinct (stores that write in
    /// batches override it).
    fn put_many(&mut self, slots: &[(i64, i64, i64)]) {
        for &(res_ms, index, count) in slots {
            self.put(res_ms, index, count);
        }
    }
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
    /// The sum of the stored slots `lo ..= hi` of one resolution, if the store can give it
    /// without listing them (an ordered in-memory copy); `None` otherwise.
    fn range_sum(&mut self, _res_ms: i64, _lo: i64, _hi: i64) -> Option<i128> {
        None
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

#[derive(Debug, PartialEq, Eq)]
pub struct Counter {
    pub resolutions: Vec<Resolution>,
    pub tracks: Vec<Track>,
    /// Reference time of the stored state (see the module comment).
    pub reference: i64,
}

impl Counter {
    /// The heap bytes this counter holds (its two vectors), each allocation counted with
    /// `per_allocation` bytes of the allocator's own.
    pub fn heap_bytes(&self, per_allocation: usize) -> usize {
        let used = |bytes: usize| {
            if bytes == 0 {
                0
            } else {
                bytes + per_allocation
            }
        };
        used(self.resolutions.capacity() * std::mem::size_of::<Resolution>())
            + used(self.tracks.capacity() * std::mem::size_of::<Track>())
    }
}

impl Clone for Counter {
    fn clone(&self) -> Counter {
        Counter {
            resolutions: self.resolutions.clone(),
            tracks: self.tracks.clone(),
            reference: self.reference,
        }
    }

    /// Reuses the vectors (a mirrored counter is copied back after every write).
    fn clone_from(&mut self, source: &Counter) {
        self.resolutions.clone_from(&source.resolutions);
        self.tracks.clone_from(&source.tracks);
        self.reference = source.reference;
    }
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
#[derive(Clone, Copy, Default)]
struct SlotChange {
    res: usize,
    index: i64,
    existed: bool,
    new: i64,
}

/// What `TSCOUNTER.INFO` reports of a counter's stored slots: how many, and the starts of
/// the oldest and the newest (all resolutions together).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extent {
    pub slots: i64,
    pub first: Option<i64>,
    pub last: Option<i64>,
}

impl Extent {
    /// Widens `first ..= last` to include a slot starting at `start`.
    fn include(&mut self, start: i64) {
        self.first = Some(self.first.map_or(start, |f| f.min(start)));
        self.last = Some(self.last.map_or(start, |l| l.max(start)));
    }

    /// Counts one stored slot of resolution `res_ms` (a walk of the store).
    pub fn add_slot(&mut self, res_ms: i64, index: i64) {
        self.include(slot_start(index, res_ms));
        self.slots += 1;
    }
}

/// The finest of `resolutions` whose kept span covers `window`.
pub fn finest_covering(resolutions: &[Resolution], window: i64) -> Result<Resolution> {
    for &resolution in resolutions {
        if resolution.span() >= window {
            return Ok(resolution);
        }
    }
    Err(window_too_long(window))
}

#[cold]
fn window_too_long(window: i64) -> Error {
    Error::Invalid(format!(
        "window '{}' is longer than any resolution keeps",
        format_duration(window)
    ))
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
        layout::marker(layout::COUNTER, &format_resolutions(&self.resolutions))
    }

    /// The state field's value at time `now`. The reference time moves to `now` only when
    /// an offset would grow long, so an unchanged state keeps the same text.
    pub fn state(&mut self, now: i64) -> String {
        let mut text = Vec::with_capacity(16 + 8 * self.tracks.len());
        self.write_state(now, &mut text);
        String::from_utf8(text).unwrap_or_default()
    }

    /// [`Counter::state`], written into `text` (cleared first).
    pub fn write_state(&mut self, now: i64, text: &mut Vec<u8>) {
        // The slot index of the reference time per resolution, computed once (a division
        // each; this runs on most writes of counters not cached in memory).
        let mut base = [0i64; MAX_RESOLUTIONS];
        let fill = |base: &mut [i64; MAX_RESOLUTIONS], reference: i64| {
            for (b, r) in base.iter_mut().zip(&self.resolutions) {
                *b = slot_index(reference, r.ms);
            }
        };
        fill(&mut base, self.reference);
        let offsets_fit = |base: &[i64; MAX_RESOLUTIONS]| {
            self.tracks
                .iter()
                .zip(base)
                .all(|(t, b)| t.n == 0 || (b - t.lo).abs() <= MAX_STATE_OFFSET)
        };
        // (More resolutions than a counter may have never reach here: parsing refuses them.)
        if !offsets_fit(&base) || self.resolutions.len() > MAX_RESOLUTIONS {
            self.reference = now;
            fill(&mut base, now);
        }
        text.clear();
        push_i64(text, self.reference);
        for (i, (r, t)) in self.resolutions.iter().zip(&self.tracks).enumerate() {
            let offset = if t.n == 0 {
                0
            } else {
                let b = base
                    .get(i)
                    .copied()
                    .unwrap_or_else(|| slot_index(self.reference, r.ms));
                b - t.lo
            };
            text.push(b' ');
            push_i64(text, offset);
            text.push(b':');
            push_i64(text, t.n);
        }
    }

    /// Rebuilds a counter from its stored fields; `None` if they are not a valid counter.
    pub fn from_stored(marker: &[u8], state: Option<&[u8]>) -> Option<Counter> {
        Counter::with_state(Counter::parse_marker(marker)?, state)
    }

    /// The resolutions named by a marker value (`counter 1s:120 ...`).
    pub fn parse_marker(marker: &[u8]) -> Option<Vec<Resolution>> {
        parse_resolution_text(layout::settings_of(marker, layout::COUNTER)?).ok()
    }

    /// A counter with these resolutions and the stored state field (if any).
    pub fn with_state(resolutions: Vec<Resolution>, state: Option<&[u8]>) -> Option<Counter> {
        let Some(state) = state else {
            return Some(Counter::new(resolutions));
        };
        let (reference, tracks) = Counter::parse_state(&resolutions, state)?;
        Some(Counter {
            resolutions,
            tracks,
            reference,
        })
    }

    /// The reference time and tracks of a state field for these resolutions.
    pub fn parse_state(resolutions: &[Resolution], state: &[u8]) -> Option<(i64, Vec<Track>)> {
        // `reference offset:n offset:n ...`, one item per resolution, separated by spaces
        // (parsed in place: this runs on every write of a counter not cached in memory).
        let mut items = state.split(|&b| b == b' ').filter(|item| !item.is_empty());
        let reference = parse_i64(items.next()?).ok()?;
        let mut tracks = Vec::with_capacity(resolutions.len());
        for r in resolutions {
            let item = items.next()?;
            let colon = item.iter().position(|&b| b == b':')?;
            let (offset, n) = (item.get(..colon)?, item.get(colon + 1..)?);
            let track = Track {
                lo: slot_index(reference, r.ms).checked_sub(parse_i64(offset).ok()?)?,
                n: parse_i64(n).ok()?,
            };
            // More stored slots than a resolution keeps is not a counter's state.
            if !(0..=r.samples).contains(&track.n) {
                return None;
            }
            tracks.push(track);
        }
        if items.next().is_some() {
            return None;
        }
        Some((reference, tracks))
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
        if !overcounted && !self.has_left(now) {
            // The usual write: no slot has left and the bookkeeping is exact, so the walk
            // below would change nothing (checked without a division per resolution).
            return Trimmed {
                removed,
                finished: true,
            };
        }
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
        // At most one change per resolution: kept on the stack (this is every write).
        let mut buffer = [SlotChange::default(); MAX_RESOLUTIONS];
        let mut slots = [(0i64, 0i64); MAX_RESOLUTIONS];
        let mut len = 0;
        for (res_i, res) in self.resolutions.iter().enumerate() {
            let index = slot_index(ts, res.ms);
            // Usually `ts` is `now`: one division per resolution, not two.
            let now_index = if ts == now {
                index
            } else {
                slot_index(now, res.ms)
            };
            if index < now_index.saturating_sub(res.samples).saturating_add(1) {
                continue;
            }
            let (Some(change), Some(slot)) = (buffer.get_mut(len), slots.get_mut(len)) else {
                break;
            };
            change.res = res_i;
            change.index = index;
            *slot = (res.ms, index);
            len += 1;
        }
        // The current counts, read together.
        let mut old = [None; MAX_RESOLUTIONS];
        store.get_many(slots.get(..len).unwrap_or_default(), &mut old);
        for (change, old) in buffer.iter_mut().zip(old).take(len) {
            change.existed = old.is_some();
            change.new = old
                .unwrap_or(0)
                .checked_add(increment)
                .ok_or(Error::Overflow)?;
        }
        let changes = buffer.get(..len).unwrap_or_default();
        let reply = changes
            .first()
            .map(|c| c.new)
            .ok_or(Error::OutsideKeptRange)?;
        if increment == 0 {
            return Ok(reply);
        }
        self.trim(store, now);
        // The new counts, written together (one slot per resolution: all distinct).
        let mut puts = [(0i64, 0i64, 0i64); MAX_RESOLUTIONS];
        let mut put_len = 0;
        for &change in changes {
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
                if let Some(put) = puts.get_mut(put_len) {
                    *put = (res.ms, change.index, change.new);
                    put_len += 1;
                }
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
        store.put_many(puts.get(..put_len).unwrap_or_default());
        Ok(reply)
    }

    /// The usual increment of a hot counter, made on its ordered in-memory copy alone when
    /// it only adds to slots that are stored: every resolution's newest stored slot
    /// contains `ts`, no slot has left since the last write (so every stored slot is kept
    /// at `now`) and none of the new counts is 0. Then the bookkeeping does not change and
    /// [`Counter::incrby`] would
    /// write exactly these counts. Fills `writes` with `(res_ms, index, new count)` and
    /// returns how many and the reply; `None` (nothing changed) when the increment needs
    /// the general path.
    pub fn add_to_stored(
        &self,
        slots: &mut OrderedSlots,
        now: i64,
        ts: i64,
        increment: i64,
        writes: &mut [(i64, i64, i64); MAX_RESOLUTIONS],
    ) -> Option<(usize, i64)> {
        if increment == 0 || self.stored_slots() != slots.len() as i64 || self.has_left(now) {
            return None;
        }
        let mut res_ms = [0i64; MAX_RESOLUTIONS];
        for (ms, res) in res_ms.iter_mut().zip(&self.resolutions) {
            *ms = res.ms;
        }
        let res_ms = res_ms.get(..self.resolutions.len())?;
        let len = slots.add_to_newest(res_ms, ts, increment, writes)?;
        Some((len, writes.first()?.2))
    }

    /// The finest resolution whose kept span covers `window`.
    pub fn resolution_for(&self, window: i64) -> Result<Resolution> {
        finest_covering(&self.resolutions, window)
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
        let mut sums = vec![0; windows.len()];
        self.sum_into(store, now, t, windows, &mut sums)?;
        Ok(sums)
    }

    /// The sum of one window ending with the slot that contains `now` ([`Counter::sum`]
    /// of `[window]` at `t = now`): the usual read, asked straight of a store that sums
    /// ranges itself (a mirrored counter).
    pub fn window_sum(&self, store: &mut dyn SlotStore, now: i64, window: i64) -> Result<i64> {
        let (res_ms, lo, hi) = self.window_range(now, now, window)?;
        if let Some(sum) = store.range_sum(res_ms, lo, hi) {
            return i64::try_from(sum).map_err(|_| Error::Overflow);
        }
        let mut sum = [0];
        self.sum_into(store, now, now, &[window], &mut sum)?;
        let [sum] = sum;
        Ok(sum)
    }

    /// The slots a window ending with the slot that contains `t` sums, among those still
    /// kept at `now`: (resolution ms, first index, last index), empty when first > last.
    fn window_range(&self, now: i64, t: i64, window: i64) -> Result<(i64, i64, i64)> {
        let res = self.resolution_for(window)?;
        let hi = slot_index(t, res.ms);
        // `first_kept(now, ..)`, with one division less in the usual read (`t == now`).
        let now_index = if t == now {
            hi
        } else {
            slot_index(now, res.ms)
        };
        let first = now_index.saturating_sub(res.samples).saturating_add(1);
        let lo = (hi - slots_covering(window, res.ms) + 1).max(first);
        Ok((res.ms, lo, hi))
    }

    /// [`Counter::sum`] into `out` (as long as `windows`: a caller's stack array, so the
    /// usual read allocates nothing).
    pub fn sum_into(
        &self,
        store: &mut dyn SlotStore,
        now: i64,
        t: i64,
        windows: &[i64],
        out: &mut [i64],
    ) -> Result<()> {
        // Each window becomes a slot-index range of one resolution (an error for a window
        // no resolution keeps: a read changes nothing, so failing midway is as good).
        let range_of = |window: i64| self.window_range(now, t, window);
        if out.len() != windows.len() {
            return Err(Error::Invalid("one sum per window".into()));
        }
        // A store that sums ranges itself (a mirrored counter) answers each window directly
        // (the usual read: no allocation).
        let mut direct = 0;
        for (&window, out) in windows.iter().zip(out.iter_mut()) {
            let (res_ms, lo, hi) = range_of(window)?;
            let sum = if lo > hi {
                Some(0)
            } else {
                store.range_sum(res_ms, lo, hi)
            };
            let Some(sum) = sum else { break };
            *out = i64::try_from(sum).map_err(|_| Error::Overflow)?;
            direct += 1;
        }
        if direct == windows.len() {
            return Ok(());
        }
        let ranges = windows
            .iter()
            .map(|&window| range_of(window))
            .collect::<Result<Vec<_>>>()?;
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
        for (out, sum) in out.iter_mut().zip(sums) {
            *out = i64::try_from(sum).map_err(|_| Error::Overflow)?;
        }
        Ok(())
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

    /// [`TSCOUNTER.INFO`]'s view of the stored slots, found from the bookkeeping with a
    /// few probes per resolution (its oldest and newest stored slot) instead of a walk of
    /// every stored slot. `None` when the bookkeeping does not account for exactly the
    /// stored slots (a user's edit) or the probes would pass `max_probes` (gaps at the
    /// ends of a resolution): the caller then walks the store.
    pub fn extent(&self, store: &mut dyn SlotStore, now: i64, max_probes: usize) -> Option<Extent> {
        let slots = self.stored_slots();
        if usize::try_from(slots).ok()? != store.stored_slots() {
            return None;
        }
        let mut probes_left = max_probes;
        let mut stored = |store: &mut dyn SlotStore, res_ms: i64, index: i64| {
            probes_left = probes_left.checked_sub(1)?;
            Some(store.get(res_ms, index).is_some())
        };
        let mut extent = Extent {
            slots,
            ..Extent::default()
        };
        for (r, t) in self.resolutions.iter().zip(&self.tracks) {
            if t.n == 0 {
                continue;
            }
            // Every stored slot lies in `lo .. lo + samples`, and tally writes none after
            // the one containing `now` (only a server clock stepped back leaves such a
            // slot; it then counts in `slots` but not in `last` until the clock passes it).
            let top =
                t.lo.saturating_add(r.samples)
                    .saturating_sub(1)
                    .min(slot_index(now, r.ms));
            let mut oldest = t.lo;
            while !stored(store, r.ms, oldest)? {
                if oldest >= top {
                    return None;
                }
                oldest += 1;
            }
            let mut newest = top;
            while newest > oldest && !stored(store, r.ms, newest)? {
                newest -= 1;
            }
            extent.include(slot_start(oldest, r.ms));
            extent.include(slot_start(newest, r.ms));
        }
        Some(extent)
    }

    /// True unless every resolution's bookkeeping is in range (at most `samples` slots) and
    /// its oldest possible slot is still kept at `now`: when false, trimming has no work.
    fn has_left(&self, now: i64) -> bool {
        self.resolutions.iter().zip(&self.tracks).any(|(r, t)| {
            t.n != 0 && !((1..=r.samples).contains(&t.n) && now < leaves_at(t.lo, r.ms, r.samples))
        })
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

mod fields;
mod ordered;
pub use fields::{
    format_resolutions, parse_resolution_text, parse_resolutions, parse_slot_field,
    push_slot_field, slot_field,
};
pub use ordered::OrderedSlots;

#[cfg(test)]
mod tests;
