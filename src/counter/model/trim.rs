//! Trimming: removing the slots that have left their resolution's kept range, within a
//! budget and resumable, and healing bookkeeping a user's edit made wrong.
//!
//! Owns: the trim arithmetic and when it is next due. May not touch: Redis (pure).

use super::{Counter, SlotStore};
use crate::window::{first_kept, leaves_at, slot_index};

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

impl Counter {
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
        let overcounted = self.overcounts(store);
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
        let overcounted = self.overcounts(store);
        if !overcounted && !self.has_left(now) {
            // The usual write: no slot has left and the bookkeeping is exact, so the walk
            // below would change nothing (checked without a division per resolution).
            return Trimmed {
                removed,
                finished: true,
            };
        }
        // A counter written long ago has many positions to pass and few slots stored
        // there: one walk of the store finds them, where probing every position would
        // cost one lookup each (a scan of the whole hash while it is a listpack).
        let mut left = Vec::new();
        if !overcounted && store.walk_is_cheaper(self.positions_left(now)) {
            if !may_continue() {
                return Trimmed {
                    removed,
                    finished: false,
                };
            }
            left = self.stored_left(store, now);
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
            if let Some(found) = left.iter_mut().find(|(ms, _)| *ms == res.ms) {
                // Found by the walk: the stored slots in lo .. min(first, end), oldest
                // first, removed as the probes below would (positions holding nothing
                // are passed without a lookup).
                for &index in found.1.iter() {
                    if track.n == 0 {
                        break;
                    }
                    if !budget_left() {
                        return Trimmed {
                            removed,
                            finished: false,
                        };
                    }
                    if store.remove(res.ms, index) {
                        track.n -= 1;
                        removed += 1;
                    }
                    track.lo = index.saturating_add(1);
                }
                if track.n == 0 {
                    continue;
                }
                track.lo = track.lo.max(first.min(end));
            }
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

    /// True if the bookkeeping counts more slots than the store can hold: a user's `HDEL`
    /// took some. The store counts fields, and a packed field holds up to a run of slots:
    /// the slots below each resolution's sealing bound may all be inside packed fields, so
    /// they are not held against the store (a counter written steadily, its old runs
    /// packed, must not look overcounted on every write: the healing walk would then probe,
    /// and decode, its oldest packed run each time).
    fn overcounts(&self, store: &mut dyn SlotStore) -> bool {
        let maybe_packed = self
            .resolutions
            .iter()
            .zip(&self.tracks)
            .fold(0i64, |total, (_, t)| {
                total.saturating_add(t.packed_at_most())
            });
        self.stored_slots().saturating_sub(maybe_packed) > store.stored_slots() as i64
    }

    /// Positions a trim at `now` would probe for slots that have left, all resolutions
    /// together.
    fn positions_left(&self, now: i64) -> i64 {
        self.resolutions
            .iter()
            .zip(&self.tracks)
            .filter(|(_, t)| t.n > 0)
            .fold(0i64, |total, (r, t)| {
                let first = first_kept(now, r.ms, r.samples);
                let end = t.lo.saturating_add(r.samples);
                total.saturating_add(first.min(end).saturating_sub(t.lo).max(0))
            })
    }

    /// The stored slots a trim at `now` removes, found by one walk of the store: per
    /// resolution that has any, its slots in `lo .. min(first kept, lo + samples)`, oldest
    /// first.
    fn stored_left(&self, store: &mut dyn SlotStore, now: i64) -> Vec<(i64, Vec<i64>)> {
        let mut spans = Vec::with_capacity(self.resolutions.len());
        for (r, t) in self.resolutions.iter().zip(&self.tracks) {
            if t.n > 0 {
                let first = first_kept(now, r.ms, r.samples);
                let end = t.lo.saturating_add(r.samples);
                spans.push((r.ms, t.lo, first.min(end)));
            }
        }
        let mut left: Vec<(i64, Vec<i64>)> = Vec::new();
        store.each_slot(&mut |res_ms, index, _| {
            let Some(&(_, lo, until)) = spans.iter().find(|(ms, _, _)| *ms == res_ms) else {
                return;
            };
            if (lo..until).contains(&index) {
                match left.iter_mut().find(|(ms, _)| *ms == res_ms) {
                    Some((_, indexes)) => indexes.push(index),
                    None => left.push((res_ms, vec![index])),
                }
            }
        });
        // Every resolution walked gets an entry, so its positions are passed without
        // probes even when none of them holds a slot.
        for &(res_ms, _, _) in &spans {
            if !left.iter().any(|(ms, _)| *ms == res_ms) {
                left.push((res_ms, Vec::new()));
            }
        }
        for (_, indexes) in left.iter_mut() {
            indexes.sort_unstable();
        }
        left
    }

    /// its oldest possible slot is still kept at `now`: when false, trimming has no work.
    pub(super) fn has_left(&self, now: i64) -> bool {
        self.resolutions.iter().zip(&self.tracks).any(|(r, t)| {
            t.n != 0 && !((1..=r.samples).contains(&t.n) && now < leaves_at(t.lo, r.ms, r.samples))
        })
    }

    /// When the oldest stored slot stops being kept, or a run of recent slots becomes old
    /// enough to pack: the next time a timer visit has work.
    pub fn next_due(&self) -> Option<i64> {
        self.resolutions
            .iter()
            .zip(&self.tracks)
            .filter(|(_, t)| t.n > 0)
            .map(|(r, t)| {
                let leaves = leaves_at(t.lo, r.ms, r.samples);
                match t.seal_due(r) {
                    Some(due) => leaves.min(due),
                    None => leaves,
                }
            })
            .min()
    }
}
