//! Sealing: which runs of old slots get packed, and when. A run is packed once it is older
//! than the two newest runs of its resolution (see `packed_slots::may_be_packed`), by the
//! timer's visit of the counter (the one that trims it): the increment of the current slot
//! costs what it cost before packing existed. A write into an old run goes into its packed
//! field, made (with the run's slot fields folded in) when the run has none
//! (`packed_slots::put`), so a sealed run stays one packed field. The visit is due when the
//! oldest run not yet sealed becomes old enough ([`Track::seal_due`]), so a counter written
//! every minute has one run packed every 240 minutes, and a counter loaded from a release
//! without packing has its old runs packed at its first visit, a few runs per timer tick.
//!
//! Only resolutions of more than two runs of samples ever pack: a run must be older than
//! the two newest and still hold kept slots.
//!
//! Owns: the sealing bound in the bookkeeping and the order runs are packed in. May not
//! touch: Redis (pure; the store packs one run with [`SlotStore::seal_run`]).

use super::packed::{run_first, RUN};
use super::{Counter, Resolution, SlotStore, Track};
use crate::window::slot_index;

impl Track {
    /// The first run that may still hold slots in fields of their own: slots before it
    /// are in sealed runs ([`super::SlotStore::sealed_sum`]).
    pub(super) fn unsealed_from(&self) -> i64 {
        let lo_run = run_first(self.lo).unwrap_or(self.lo);
        self.sealed.max(lo_run)
    }

    /// Runs from the one holding `lo` to [`Track::unsealed_from`] (what `_state` stores).
    pub(super) fn sealed_runs(&self) -> i64 {
        let lo_run = run_first(self.lo).unwrap_or(self.lo);
        self.unsealed_from().saturating_sub(lo_run) / RUN
    }

    /// Sets the sealing bound `runs` runs after the one holding `lo` (read from `_state`).
    pub(super) fn set_sealed_runs(&mut self, runs: i64) {
        let lo_run = run_first(self.lo).unwrap_or(self.lo);
        self.sealed = lo_run.saturating_add(runs.saturating_mul(RUN));
    }

    /// The most slots of this resolution that packed fields may hold: those below the
    /// sealing bound (at most `n`).
    pub(super) fn packed_at_most(&self) -> i64 {
        if self.n <= 0 {
            return 0;
        }
        // (Never `clamp`: it panics on bounds out of order.)
        self.unsealed_from()
            .saturating_sub(self.lo)
            .max(0)
            .min(self.n)
    }

    /// When the first run not yet sealed becomes old enough to pack: `None` for a
    /// resolution too short to ever pack, or without slots.
    pub(super) fn seal_due(&self, r: &Resolution) -> Option<i64> {
        if self.n == 0 || r.samples <= 2 * RUN {
            return None;
        }
        // A run starting at `first` may be packed once `now`'s slot is 2 runs past it.
        self.unsealed_from().checked_add(2 * RUN)?.checked_mul(r.ms)
    }
}

impl Counter {
    /// Per resolution with slots, `(res_ms, oldest stored slot, first slot not sealed)`:
    /// what [`super::collect_ordered_sealed`] reads from packed fields alone.
    pub fn sealed_bounds(&self) -> Vec<(i64, i64, i64)> {
        self.resolutions
            .iter()
            .zip(&self.tracks)
            .filter(|(_, t)| t.n > 0)
            .map(|(r, t)| (r.ms, t.lo, t.unsealed_from()))
            .collect()
    }

    /// True if a run is old enough to pack at `now` and not sealed yet.
    pub fn has_seal_work(&self, now: i64) -> bool {
        self.resolutions
            .iter()
            .zip(&self.tracks)
            .any(|(r, t)| t.seal_due(r).is_some_and(|due| due <= now))
    }

    /// Packs the runs old enough at `now` that are not sealed yet, oldest first, asking
    /// `may_continue` before each (a run costs a few hundred field lookups). Resumable: the
    /// bookkeeping records every run sealed. Returns how many runs were packed.
    pub fn seal_within(
        &mut self,
        store: &mut dyn SlotStore,
        now: i64,
        may_continue: &mut dyn FnMut() -> bool,
    ) -> usize {
        let mut packed = 0;
        for (r, t) in self.resolutions.iter().zip(self.tracks.iter_mut()) {
            if t.seal_due(r).is_none_or(|due| due > now) {
                continue;
            }
            let Some(now_run) = run_first(slot_index(now, r.ms)) else {
                continue;
            };
            let last = now_run.saturating_sub(2 * RUN);
            let mut first = t.unsealed_from();
            while first <= last {
                if !may_continue() {
                    return packed;
                }
                if store.seal_run(r.ms, first) {
                    packed += 1;
                }
                first = first.saturating_add(RUN);
                t.sealed = first;
            }
        }
        packed
    }
}
