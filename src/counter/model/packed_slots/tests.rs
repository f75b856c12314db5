//! A counter over a hash of raw fields that routes slots as the command layer does (its own
//! field, or its run's packed field when the run may be packed), driven by a seeded random
//! workload beside the same counter over a plain map: every reply must be equal whichever
//! way, and however (a user's edit by hand), the old slots are stored.

use super::*;
use crate::counter::model::{parse_resolution_text, slot_field, Counter, SlotStore};
use crate::testutil::{MapStore, Rng};
use crate::window::first_kept;
use std::collections::BTreeMap;

/// A hash of raw fields at a given time, as `HashSlots` reads it without a mirror.
#[derive(Default)]
struct FieldHash {
    fields: BTreeMap<Vec<u8>, Vec<u8>>,
    now: i64,
}

impl RawFields for FieldHash {
    fn read(&mut self, name: &[u8]) -> Option<Vec<u8>> {
        self.fields.get(name).cloned()
    }
    fn write(&mut self, name: &[u8], value: &[u8]) {
        self.fields.insert(name.to_vec(), value.to_vec());
    }
    fn delete(&mut self, name: &[u8]) -> bool {
        self.fields.remove(name).is_some()
    }
}

impl SlotStore for FieldHash {
    fn get(&mut self, res_ms: i64, index: i64) -> Option<i64> {
        if may_be_packed(res_ms, index, self.now) {
            return get(self, res_ms, index);
        }
        let value = self.fields.get(slot_field(res_ms, index).as_bytes())?;
        Some(parse_i64(value).unwrap_or(0))
    }
    fn put(&mut self, res_ms: i64, index: i64, count: i64) {
        assert_ne!(count, 0, "zero counts are never stored");
        if may_be_packed(res_ms, index, self.now) {
            return put(self, res_ms, index, count);
        }
        let name = slot_field(res_ms, index).into_bytes();
        self.fields.insert(name, count.to_string().into_bytes());
    }
    fn remove(&mut self, res_ms: i64, index: i64) -> bool {
        if may_be_packed(res_ms, index, self.now) {
            return remove(self, res_ms, index);
        }
        self.fields
            .remove(slot_field(res_ms, index).as_bytes())
            .is_some()
    }
    fn stored_slots(&mut self) -> usize {
        self.fields.len()
    }
    fn seal_run(&mut self, res_ms: i64, first: i64) -> bool {
        seal(self, res_ms, first)
    }
    fn sealed_slots(&mut self, res_ms: i64, lo: i64, hi: i64, out: &mut Vec<(i64, i64)>) -> bool {
        let mut unpacked = Vec::new();
        let from = out.len();
        sealed_slots(self, res_ms, lo, hi, out, &mut unpacked);
        probed(self, res_ms, &unpacked, &mut |index, count| {
            out.push((index, count))
        });
        out[from..].sort_unstable();
        true
    }
    fn sealed_sum(&mut self, res_ms: i64, lo: i64, hi: i64) -> Option<i128> {
        let mut unpacked = Vec::new();
        let sum = sealed_sum(self, res_ms, lo, hi, &mut unpacked);
        let mut rest = 0i128;
        probed(self, res_ms, &unpacked, &mut |_, count| {
            rest += i128::from(count)
        });
        Some(sum + rest)
    }
    fn each_slot(&mut self, f: &mut dyn FnMut(i64, i64, i64)) {
        for (name, value) in self.fields.iter().rev() {
            each_in_field(name, value, self.now, f);
        }
    }
    fn ordered_slots(&mut self, res_ms: i64, lo: i64, hi: i64, out: &mut Vec<(i64, i64)>) {
        let mut index = lo;
        while index <= hi {
            if may_be_packed(res_ms, index, self.now) {
                let end = (packed::run_first(index).unwrap() + RUN - 1).min(hi);
                ordered_in_run(self, res_ms, index, end, out);
                index = end + 1;
                continue;
            }
            if let Some(count) = self.get(res_ms, index) {
                out.push((index, count));
            }
            index += 1;
        }
    }
}

const MINUTE: i64 = 60_000;

/// Packs by hand the run of `res_ms` starting at `first` as a user or a future writer
/// would: its slot fields merged into one packed field and deleted. With `keep_some`, a
/// few slots keep part of their count in their own field (both forms, reads add them).
fn pack_by_hand(h: &mut FieldHash, res_ms: i64, first: i64, keep_some: bool, rng: &mut Rng) {
    let mut slots = Vec::new();
    for index in first..first + RUN {
        let name = slot_field(res_ms, index).into_bytes();
        let Some(value) = h.fields.get(&name) else {
            continue;
        };
        let count = parse_i64(value).unwrap();
        if keep_some && rng.below(4) == 0 && count > 1 {
            let own = 1 + rng.below(count - 1);
            h.fields.insert(name, own.to_string().into_bytes());
            slots.push((index, count - own));
        } else {
            h.fields.remove(&name);
            slots.push((index, count));
        }
    }
    if let Ok(value) = packed::encode(first, RUN, &slots) {
        if !slots.is_empty() {
            h.fields.insert(packed::packed_field(res_ms, first), value);
        }
    }
}

#[test]
fn replies_are_the_same_however_old_slots_are_stored() {
    let resolutions = parse_resolution_text("1m:2000 1h:100 1d:30").unwrap();
    // How often the workload packed a run, wrote into a packed one, and read garbage.
    let (mut packs, mut writes_into_packed, mut garbage, mut seals) = (0, 0, 0, 0);
    for seed in 0..24u64 {
        let mut rng = Rng(seed);
        let mut now = 1_700_000_000_000i64;
        let mut packed_counter = Counter::new(resolutions.clone());
        let mut plain_counter = Counter::new(resolutions.clone());
        let mut h = FieldHash {
            now,
            ..FieldHash::default()
        };
        let mut plain = MapStore::default();
        for step in 0..600 {
            now += rng.below(3 * MINUTE);
            h.now = now;
            let kept = first_kept(now, MINUTE, 2000) * MINUTE;
            match rng.below(10) {
                0..=5 => {
                    // Mostly old slots (AT into the packed past), some recent ones.
                    let ts = if rng.below(3) == 0 {
                        now - rng.below(10 * MINUTE)
                    } else {
                        kept + rng.below(now - kept + 1)
                    };
                    let by = if rng.below(8) == 0 {
                        -rng.below(50)
                    } else {
                        1 + rng.below(5000)
                    };
                    let a = packed_counter.incrby(&mut h, now, ts, by);
                    let b = plain_counter.incrby(&mut plain, now, ts, by);
                    assert_eq!(a, b, "seed {seed} step {step}: INCRBY {by} AT {ts}");
                    // A write into a run with a packed field left no field of its own.
                    let index = ts.div_euclid(MINUTE);
                    let first = packed::run_first(index).unwrap();
                    if may_be_packed(MINUTE, index, now)
                        && h.fields.contains_key(&packed::packed_field(MINUTE, first))
                    {
                        writes_into_packed += 1;
                        assert!(
                            !h.fields.contains_key(slot_field(MINUTE, index).as_bytes()),
                            "seed {seed} step {step}: a slot in two forms"
                        );
                    }
                }
                6 | 7 => {
                    // Pack an old run by hand.
                    let oldest = packed::run_first(first_kept(now, MINUTE, 2000)).unwrap();
                    let first = oldest + RUN * rng.below(8);
                    if may_be_packed(MINUTE, first, now)
                        && !h.fields.contains_key(&packed::packed_field(MINUTE, first))
                    {
                        // Both forms of a slot only in runs not sealed yet: in a sealed
                        // run a sum reads the packed field alone (`sealed_sum`).
                        let keep_some =
                            rng.below(2) == 0 && first >= packed_counter.tracks[0].unsealed_from();
                        packs += 1;
                        pack_by_hand(&mut h, MINUTE, first, keep_some, &mut rng);
                    }
                }
                8 => {
                    // A user's garbage over a packed field: its slots are gone in both.
                    let packed_names: Vec<Vec<u8>> = h
                        .fields
                        .keys()
                        .filter(|name| is_packed_field(name))
                        .cloned()
                        .collect();
                    if !packed_names.is_empty() && rng.below(4) == 0 {
                        let name = &packed_names[rng.below(packed_names.len() as i64) as usize];
                        let (res_ms, first) = packed::parse_packed_field(name).unwrap();
                        for (index, _) in run_slots(first, &h.fields[name]).unwrap_or_default() {
                            plain.0.remove(&(res_ms, index));
                            // What the user's edit left in the slot's own field stays.
                            if let Some(own) = h.fields.get(slot_field(res_ms, index).as_bytes()) {
                                plain.0.insert((res_ms, index), parse_i64(own).unwrap_or(0));
                            }
                        }
                        h.fields.insert(name.clone(), b"garbage".to_vec());
                        garbage += 1;
                    }
                }
                _ => {
                    // The timer's visit: trim, then pack what is old enough.
                    packed_counter.trim(&mut h, now);
                    plain_counter.trim(&mut plain, now);
                    if rng.below(2) == 0 {
                        seals += packed_counter.seal_within(&mut h, now, &mut || true);
                        assert!(!packed_counter.has_seal_work(now));
                        // Every run old enough is now one packed field, or none.
                        for name in h.fields.keys() {
                            if let Some((res_ms, index)) = parse_slot_field(name) {
                                if res_ms == MINUTE && index >= first_kept(now, MINUTE, 2000) {
                                    assert!(
                                        !may_be_packed(MINUTE, index, now),
                                        "seed {seed} step {step}: {name:?} left unpacked"
                                    );
                                }
                            }
                        }
                        // Its text round-trips.
                        let text = packed_counter.state(now);
                        let back = Counter::with_state(resolutions.clone(), Some(text.as_bytes()));
                        assert_eq!(back.as_ref(), Some(&packed_counter), "{text}");
                    }
                }
            }
            let windows = [
                5 * MINUTE,
                300 * MINUTE,
                1000 * MINUTE,
                2000 * MINUTE,
                24 * 3_600_000,
            ];
            let t = now - rng.below(100 * MINUTE);
            assert_eq!(
                packed_counter.sum(&mut h, now, t, &windows),
                plain_counter.sum(&mut plain, now, t, &windows),
                "seed {seed} step {step}: SUM at {t}"
            );
            if step % 10 == 0 {
                for res_ms in [MINUTE, 3_600_000] {
                    assert_eq!(
                        packed_counter.range(&mut h, now, res_ms, None, None, false),
                        plain_counter.range(&mut plain, now, res_ms, None, None, false),
                        "seed {seed} step {step}: RANGE {res_ms}"
                    );
                }
                // The walk of every field agrees with the probes.
                let mut walked = Vec::new();
                h.each_slot(&mut |r, i, c| {
                    if r == MINUTE && i >= first_kept(now, MINUTE, 2000) {
                        walked.push((i, c))
                    }
                });
                walked.sort_unstable();
                merge_duplicates(&mut walked);
                walked.retain(|&(_, c)| c != 0);
                let mut probed = Vec::new();
                let (lo, hi) = (first_kept(now, MINUTE, 2000), now.div_euclid(MINUTE));
                h.ordered_slots(MINUTE, lo, hi, &mut probed);
                probed.retain(|&(_, c)| c != 0);
                walked.retain(|&(i, _)| i <= hi);
                assert_eq!(walked, probed, "seed {seed} step {step}: walk and probes");
                // INFO's walk (headers, a few decodes) counts what the full walk finds.
                let mut all = Vec::new();
                h.each_slot(&mut |r, i, _| all.push((r, i)));
                all.sort_unstable();
                all.dedup();
                let mut full = Extent::default();
                for &(r, i) in &all {
                    full.add_slot(r, i);
                }
                let mut info = InfoWalk::default();
                for (name, value) in &h.fields {
                    info.field(name, value, now);
                }
                let fields = h.fields.clone();
                let got = info.finish(&mut |name| fields.get(name).cloned());
                // Garbage with a valid header counts by its header: this workload's is not.
                assert_eq!(got, full, "seed {seed} step {step}: INFO's walk");
            }
        }
    }
    // (Writes into old runs pack them too, so fewer runs are left for packing by hand or
    // by the timer.)
    assert!(
        packs > 100 && writes_into_packed > 200 && garbage > 20 && seals > 20,
        "{packs} {writes_into_packed} {garbage} {seals}"
    );
}

#[test]
fn the_two_newest_runs_are_never_packed() {
    let now = 1_700_000_000_000i64;
    let now_index = now.div_euclid(MINUTE);
    let now_first = packed::run_first(now_index).unwrap();
    for index in now_first - RUN..=now_index {
        assert!(!may_be_packed(MINUTE, index, now), "{index}");
    }
    for index in now_first - 3 * RUN..now_first - RUN {
        assert!(may_be_packed(MINUTE, index, now), "{index}");
    }
    // At each resolution's own scale, and at the edges of i64.
    assert!(!may_be_packed(1, i64::MAX, i64::MAX));
    assert!(may_be_packed(1000, 0, 10 * RUN * 1000));
}

#[test]
fn garbage_holds_nothing_and_the_next_write_replaces_it() {
    let now = 1_700_000_000_000i64;
    let first = packed::run_first(now.div_euclid(MINUTE)).unwrap() - 4 * RUN;
    let mut h = FieldHash {
        now,
        ..FieldHash::default()
    };
    let name = packed::packed_field(MINUTE, first);
    for garbage in [&b""[..], b"garbage", b"d\xf0", b"c\x01\x01\x05\x05"] {
        h.fields.clear();
        h.fields.insert(name.clone(), garbage.to_vec());
        assert_eq!(h.get(MINUTE, first + 3), None);
        let mut out = Vec::new();
        h.ordered_slots(MINUTE, first, first + RUN - 1, &mut out);
        assert_eq!(out, vec![]);
        h.put(MINUTE, first + 3, 7);
        assert_eq!(h.get(MINUTE, first + 3), Some(7));
        assert_eq!(
            run_slots(first, &h.fields[&name]),
            Some(vec![(first + 3, 7)])
        );
        assert_eq!(h.fields.len(), 1);
        // A removal in a garbage run deletes it.
        h.fields.insert(name.clone(), garbage.to_vec());
        assert!(!h.remove(MINUTE, first));
        assert!(h.fields.is_empty());
    }
}

#[test]
fn a_run_whose_total_would_overflow_lets_the_slot_out() {
    let now = 1_700_000_000_000i64;
    let first = packed::run_first(now.div_euclid(MINUTE)).unwrap() - 4 * RUN;
    let mut h = FieldHash {
        now,
        ..FieldHash::default()
    };
    let name = packed::packed_field(MINUTE, first);
    let value = packed::encode(first, RUN, &[(first, i64::MAX - 10)]).unwrap();
    h.fields.insert(name.clone(), value);
    h.put(MINUTE, first + 1, 100);
    assert_eq!(h.get(MINUTE, first), Some(i64::MAX - 10));
    assert_eq!(h.get(MINUTE, first + 1), Some(100));
    assert!(h
        .fields
        .contains_key(slot_field(MINUTE, first + 1).as_bytes()));
    // Removing both leaves nothing.
    assert!(h.remove(MINUTE, first));
    assert!(h.remove(MINUTE, first + 1));
    assert!(h.fields.is_empty());
}
