//! Where a counter's slot counts live, as the pure logic sees them: the [`SlotStore`]
//! trait (a native hash in the command layer, the ordered in-memory copy of a mirror, a
//! map in the unit tests), and the ordered listing every long read starts from.
//!
//! Owns: that interface. May not touch: Redis (pure).

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
    /// True if one walk of every stored slot ([`SlotStore::each_slot`]) costs less than
    /// `probes` probes of single slots (trimming a counter written long ago).
    fn walk_is_cheaper(&mut self, probes: i64) -> bool {
        !self.probes_are_cheap(probes)
    }
    /// Packs the run of resolution `res_ms` starting at `first`: its slots' own fields
    /// merged into its packed field (see `packed_slots::seal`). True if it packed any.
    /// Stores that keep no packed runs (a plain map) leave every slot as it is.
    fn seal_run(&mut self, _res_ms: i64, _first: i64) -> bool {
        false
    }
    /// The sum of slots `lo ..= hi` of one resolution, all in runs the timer has sealed,
    /// from the runs' packed fields (see `packed_slots::sealed_sum`); `None` for a store
    /// that keeps no packed runs (or answers ranges from memory).
    fn sealed_sum(&mut self, _res_ms: i64, _lo: i64, _hi: i64) -> Option<i128> {
        None
    }
    /// Appends the slots `lo ..= hi` of one resolution, all in runs the timer has sealed,
    /// to `out`, oldest first, from the runs' packed fields (see
    /// `packed_slots::sealed_slots`); false (nothing appended) for a store that keeps no
    /// packed runs (or lists ranges from memory).
    fn sealed_slots(
        &mut self,
        _res_ms: i64,
        _lo: i64,
        _hi: i64,
        _out: &mut Vec<(i64, i64)>,
    ) -> bool {
        false
    }
    /// The sum of the stored slots `lo ..= hi` of one resolution, if the store can give it
    /// without listing them (an ordered in-memory copy); `None` otherwise.
    fn range_sum(&mut self, _res_ms: i64, _lo: i64, _hi: i64) -> Option<i128> {
        None
    }
}

/// [`collect_ordered`], with the part of each span below its resolution's sealing bound
/// (`sealed`: `(res_ms, oldest stored slot, first slot not sealed)`) read from the sealed
/// runs' packed fields ([`SlotStore::sealed_slots`]): a long window costs a decode per
/// run, not a probe per slot. Spans of a store without packed runs are read as
/// [`collect_ordered`] reads them.
pub fn collect_ordered_sealed(
    store: &mut dyn SlotStore,
    spans: &[(i64, i64, i64)],
    sealed: &[(i64, i64, i64)],
) -> Vec<Vec<(i64, i64)>> {
    let mut out: Vec<Vec<(i64, i64)>> = vec![Vec::new(); spans.len()];
    let mut rest = spans.to_vec();
    for ((slots, span), &(res_ms, lo, hi)) in out.iter_mut().zip(rest.iter_mut()).zip(spans) {
        let Some(&(_, oldest, end)) = sealed.iter().find(|&&(ms, _, _)| ms == res_ms) else {
            continue;
        };
        if lo >= end || lo > hi {
            continue;
        }
        // Nothing is stored before the oldest slot.
        let from = lo.max(oldest);
        let to = hi.min(end - 1);
        if from > to || store.sealed_slots(res_ms, from, to, slots) {
            span.1 = end;
        }
    }
    for (slots, more) in out.iter_mut().zip(collect_ordered(store, &rest)) {
        slots.extend(more);
    }
    out
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
        // A slot stored in both forms (a user's edit of a packed run) is listed once, with
        // the two counts added.
        out.iter_mut().for_each(|slots| {
            slots.sort_unstable();
            super::packed_slots::merge_duplicates(slots);
        });
    }
    out
}
