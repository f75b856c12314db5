//! Increments and trims.

use super::*;

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

/// Trimming when no slot has left must still be exactly the full walk: the quick exit may
/// not skip bringing out-of-range bookkeeping back in range, nor healing an overcount.
#[test]
fn trimming_with_nothing_left_matches_the_full_walk() {
    let mut rng = Rng(7);
    for case in 0..2_000 {
        let mut c = Counter::new(res("1s:5 1m:3"));
        let mut s = MapStore::default();
        let t0 = 1_795_424_400_000;
        for _ in 0..rng.below(6) {
            let t = t0 + rng.below(8_000);
            c.incrby(&mut s, t, t, 1).unwrap();
        }
        // Forged or damaged bookkeeping now and then: counts out of range, a bound moved.
        if let Some(t) = c.tracks.get_mut(rng.below(2) as usize) {
            match rng.below(4) {
                0 => t.n = 9,
                1 => t.n = -2,
                2 => t.lo -= rng.below(3),
                _ => {}
            }
        }
        let now = t0 + 8_000 + rng.below(4_000);
        let (mut full, mut full_store) = (c.clone(), s.clone());
        // The walk as it was before the quick exit, written out: what trimming must equal.
        let overcounted = full.stored_slots() > full_store.stored_slots() as i64;
        for (r, t) in full.resolutions.iter().zip(full.tracks.iter_mut()) {
            if t.n == 0 {
                continue;
            }
            let first = first_kept(now, r.ms, r.samples);
            let end = t.lo + r.samples;
            while t.lo < first.min(end) && t.n > 0 {
                if full_store.remove(r.ms, t.lo) {
                    t.n -= 1;
                }
                t.lo += 1;
            }
            if t.n == 0 {
                continue;
            }
            t.lo = t.lo.max(first);
            if overcounted {
                let limit = end.min(slot_index(now, r.ms) + 1);
                while t.lo < limit && full_store.get(r.ms, t.lo).is_none() {
                    t.lo += 1;
                }
                if t.lo >= limit {
                    t.n = 0;
                }
            }
            t.n = t.n.min(end - t.lo).max(0);
        }
        c.trim(&mut s, now);
        assert_eq!(
            (&c.tracks, &s.0),
            (&full.tracks, &full_store.0),
            "case {case}"
        );
    }
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
    let mut c = Counter::new(res("1s:10000"));
    let mut s = Counting(MapStore::default(), 0);
    for day in 1..=5 {
        let t = day * 86_400_000 * 2;
        c.incrby(&mut s, t, t, 1).unwrap();
    }
    assert!(s.1 <= 8, "{} probes", s.1);
}

/// A user's HDEL of the only fine slot: once it has left, bounded trims (a small budget
/// each) make progress that is kept between calls, and end with the fine resolution
/// empty and nothing left to do, long before `samples` more slots have passed.
#[test]
fn bounded_trims_resume_and_heal_deleted_slots() {
    let rs = res("1ms:5000 1d:5000");
    let mut c = Counter::new(rs);
    let mut s = MapStore::default();
    let t0: i64 = 1_700_000_000_000;
    c.incrby(&mut s, t0, t0, 1).unwrap();
    assert!(s.remove(1, t0));
    let now = t0 + 5_000 + 5;
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
    // Due when the day leaves, or earlier when its run of days becomes old enough to pack.
    let day = slot_index(t0, 86_400_000);
    let run = day.div_euclid(packed::RUN) * packed::RUN;
    assert_eq!(
        c.next_due(),
        Some(leaves_at(day, 86_400_000, 5_000).min((run + 2 * packed::RUN) * 86_400_000))
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

/// A hot counter's in-place increment (`add_to_stored`), with the general path where it
/// declines, ends every step exactly like the general path alone: same replies, slots and
/// bookkeeping, whatever the times, increments and trims.
#[test]
fn in_place_increments_equal_the_general_path() {
    for (seed, text) in [
        (51u64, "1s:60 1m:60 1h:24 1d:30"),
        (52, "1s:120 5s:120 1m:120 5m:120 1h:120 5h:120 1d:120"),
        (53, "500ms:3 2s:2"),
    ] {
        let rs = res(text);
        let mut rng = Rng(seed);
        let mut general = Counter::new(rs.clone());
        let mut in_place = Counter::new(rs);
        let mut map = MapStore::default();
        let mut copy = OrderedSlots::default();
        let mut now: i64 = 10_000_000_000;
        let mut taken = 0;
        for step in 0..20_000 {
            now += match rng.below(20) {
                0 => rng.below(200_000),
                1..=4 => rng.below(2_000),
                _ => rng.below(30),
            };
            let ts = match rng.below(8) {
                0 => now - rng.below(100_000),
                _ => now,
            };
            let increment = match rng.below(30) {
                0 => 0,
                1 => -rng.below(5),
                2 => i64::MAX - rng.below(3),
                _ => 1 + rng.below(3),
            };
            let want = general.incrby(&mut map, now, ts, increment);
            let mut writes = [(0, 0, 0); MAX_RESOLUTIONS];
            let got = match in_place.add_to_stored(&mut copy, now, ts, increment, &mut writes) {
                Some((_, reply)) => {
                    taken += 1;
                    Ok(reply)
                }
                None => in_place.incrby(&mut copy, now, ts, increment),
            };
            assert_eq!(got, want, "seed {seed} step {step}");
            assert_eq!(in_place.tracks, general.tracks, "seed {seed} step {step}");
            let listed: Vec<((i64, i64), i64)> = copy.iter().collect();
            let plain: Vec<((i64, i64), i64)> = map.0.iter().map(|(&s, &c)| (s, c)).collect();
            assert_eq!(listed, plain, "seed {seed} step {step}");
            if step % 97 == 0 {
                assert_eq!(in_place.trim(&mut copy, now), general.trim(&mut map, now));
            }
        }
        // The in-place path is the usual one, not a rarity the test never reaches.
        assert!(taken > 10_000, "seed {seed}: {taken}");
    }
}

/// A store that counts its lookups and can be told which way trimming goes.
#[derive(Clone)]
struct Steered {
    store: MapStore,
    walk: Option<bool>,
    lookups: usize,
    walks: usize,
}

impl SlotStore for Steered {
    fn get(&mut self, r: i64, i: i64) -> Option<i64> {
        self.lookups += 1;
        self.store.get(r, i)
    }
    fn put(&mut self, r: i64, i: i64, c: i64) {
        self.store.put(r, i, c)
    }
    fn remove(&mut self, r: i64, i: i64) -> bool {
        self.lookups += 1;
        self.store.remove(r, i)
    }
    fn stored_slots(&mut self) -> usize {
        self.store.stored_slots()
    }
    fn each_slot(&mut self, f: &mut dyn FnMut(i64, i64, i64)) {
        self.walks += 1;
        self.store.each_slot(f)
    }
    fn walk_is_cheaper(&mut self, probes: i64) -> bool {
        // Unsteered: as a listpack, where a walk costs about 8 probes.
        self.walk.unwrap_or(probes > 8)
    }
}

/// Trimming by one walk of the store (a counter written long ago) leaves exactly what
/// probing every position leaves, budgeted or not, whatever the bookkeeping says.
#[test]
fn a_trim_by_walking_equals_a_trim_by_probing() {
    let mut rng = Rng(11);
    for case in 0..3_000 {
        let mut c = Counter::new(res("1s:5 5s:4 1m:3"));
        let mut s = MapStore::default();
        let t0 = 1_795_424_400_000;
        for _ in 0..rng.below(12) {
            let t = t0 + rng.below(20_000);
            c.incrby(&mut s, t, t, 1 + rng.below(3)).unwrap();
        }
        if let Some(t) = c.tracks.get_mut(rng.below(3) as usize) {
            match rng.below(5) {
                0 => t.n += 1,
                1 => t.n = (t.n - 1).max(0),
                2 => t.lo -= rng.below(3),
                3 => t.lo += rng.below(2),
                _ => {}
            }
        }
        let now = t0 + 20_000 + rng.below(200_000);
        let budget = rng.below(3) == 0;
        let run = |walk: bool| {
            let (mut c, mut s) = (
                c.clone(),
                Steered {
                    store: s.clone(),
                    walk: Some(walk),
                    lookups: 0,
                    walks: 0,
                },
            );
            let mut calls = 0;
            let mut trims = Vec::new();
            loop {
                let mut checks = 0;
                let mut may = || {
                    checks += 1;
                    !budget || checks < 2
                };
                let trimmed = c.trim_within(&mut s, now, &mut may);
                trims.push(trimmed.removed);
                calls += 1;
                if trimmed.finished || calls > 1_000 {
                    break;
                }
            }
            (c.tracks, s.store.0, trims.iter().sum::<usize>(), s.walks)
        };
        let (probed, walked) = (run(false), run(true));
        assert_eq!(probed.3, 0, "case {case}");
        assert_eq!(
            (&probed.0, &probed.1, probed.2),
            (&walked.0, &walked.1, walked.2),
            "case {case}"
        );
    }
}

/// A counter written once a minute with `1s:120`: each write's trim passes ~60 positions
/// of the fine resolution but looks up only the slots stored there (one walk instead).
#[test]
fn a_counter_written_now_and_then_trims_with_lookups_of_stored_slots_only() {
    let mut c = Counter::new(res("1s:120 1m:120"));
    let mut s = Steered {
        store: MapStore::default(),
        walk: None,
        lookups: 0,
        walks: 0,
    };
    let t0 = 1_795_424_400_000;
    for minute in 0..120 {
        let t = t0 + minute * 60_000 + 123;
        s.lookups = 0;
        c.incrby(&mut s, t, t, 1).unwrap();
        // The increment's reads of its two slots, and at most the one fine slot that left.
        assert!(s.lookups <= 3, "minute {minute}: {} lookups", s.lookups);
    }
    assert!(s.walks > 100, "{} walks", s.walks);
    // The fine slots of the last two minutes, and one per minute.
    assert_eq!(c.tracks[0].n, 2);
    assert_eq!(s.store.0.len(), 2 + 120);
}
