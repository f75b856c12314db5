//! Increments: the general path (every resolution that keeps the time, checked before
//! the first write) and a hot counter's in-place add to its newest stored slots.
//!
//! Owns: the increment arithmetic. May not touch: Redis (pure).

use super::{Counter, OrderedSlots, SlotStore, MAX_RESOLUTIONS};
use crate::error::{Error, Result};
use crate::window::slot_index;

/// One resolution's part of an increment, computed before anything is written.
#[derive(Clone, Copy, Default)]
struct SlotChange {
    res: usize,
    index: i64,
    existed: bool,
    new: i64,
}

impl Counter {
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
            .ok_or_else(|| crate::error::outside_kept_range(ts))?;
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
}
