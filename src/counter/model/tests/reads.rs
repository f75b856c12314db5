//! Sums, ranges and INFO's extent.

use super::*;

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
        "ERR window '366d' is longer than any resolution keeps (at most 365d)"
    );
}

/// INFO's probed extent, when the bookkeeping gives one, is what a walk of the store
/// finds; a tight probe budget or bookkeeping that misses a slot gives none.
pub(super) fn assert_extent_is_the_walk(c: &Counter, s: &mut MapStore, now: i64, seed: u64) {
    let mut walked = Extent::default();
    for &(res_ms, index) in s.0.keys() {
        walked.add_slot(res_ms, index);
    }
    if let Some(probed) = c.extent(s, now, usize::MAX) {
        assert_eq!(probed, walked, "seed {seed}");
    } else {
        // Only a slot beyond the bookkeeping's count refuses an unlimited budget.
        assert_ne!(c.stored_slots() as usize, s.0.len(), "seed {seed}");
    }
    if c.stored_slots() > 0 {
        assert_eq!(c.extent(s, now, 0), None);
    }
}

/// A slot the bookkeeping does not count (a user's `HSET`) makes INFO walk.
#[test]
fn extent_needs_bookkeeping_that_counts_every_slot() {
    let mut c = Counter::new(res("1s:100 1m:10"));
    let mut s = MapStore::default();
    let now = 1_700_000_000_000;
    for back in [0, 3_000, 50_000] {
        c.incrby(&mut s, now, now - back, 2).unwrap();
    }
    let probed = c.extent(&mut s, now, 64).unwrap();
    // Three seconds and two minutes (`now` is 20 s into its minute); the oldest is the
    // minute before, the newest the second of `now`.
    assert_eq!(probed.slots, 5);
    let minute = |t: i64| slot_start(slot_index(t, 60_000), 60_000);
    assert_eq!(probed.first, Some(minute(now - 50_000)));
    assert_eq!(probed.last, Some(slot_start(slot_index(now, 1000), 1000)));
    s.0.insert((1000, slot_index(now, 1000) - 70), 5);
    assert_eq!(c.extent(&mut s, now, 64), None);
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
                let lo = (hi - slots_covering(w, r.ms) + 1).max(first_kept(now, r.ms, r.samples));
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

/// A store that sums ranges itself (as a mirrored counter does) answers SUM exactly like
/// one that lists its slots.
#[test]
fn range_sums_agree_with_listed_slots() {
    struct Summing(MapStore);
    impl SlotStore for Summing {
        fn get(&mut self, res_ms: i64, index: i64) -> Option<i64> {
            self.0.get(res_ms, index)
        }
        fn put(&mut self, res_ms: i64, index: i64, count: i64) {
            self.0.put(res_ms, index, count)
        }
        fn remove(&mut self, res_ms: i64, index: i64) -> bool {
            self.0.remove(res_ms, index)
        }
        fn stored_slots(&mut self) -> usize {
            self.0.stored_slots()
        }
        fn each_slot(&mut self, f: &mut dyn FnMut(i64, i64, i64)) {
            self.0.each_slot(f)
        }
        fn range_sum(&mut self, res_ms: i64, lo: i64, hi: i64) -> Option<i128> {
            let slots = self.0 .0.range((res_ms, lo)..=(res_ms, hi));
            Some(slots.map(|(_, &c)| i128::from(c)).sum())
        }
    }
    let mut rng = Rng(41);
    let mut counter = Counter::new(res("1s:60 1m:60 1h:24 1d:30"));
    let mut listed = MapStore::default();
    let now = 10_000_000_000;
    for _ in 0..2_000 {
        let ts = now - rng.below(20 * 86_400_000);
        let inc = rng.below(7) - 2;
        let _ = counter.incrby(&mut listed, now, ts, inc);
    }
    let mut summing = Summing(listed.clone());
    for _ in 0..500 {
        let windows: Vec<i64> = (0..1 + rng.below(5))
            .map(|_| 1 + rng.below(30 * 86_400_000))
            .collect();
        let t = now - rng.below(3_600_000);
        assert_eq!(
            counter.sum(&mut summing, now, t, &windows),
            counter.sum(&mut listed, now, t, &windows),
            "{windows:?} at {t}"
        );
    }
}

/// The in-memory ordered copy, used as the store of a mirrored counter's reads, answers
/// every read (SUM, RANGE, trims, LIMIT's listing) exactly like a plain map of the same
/// slots, whatever the writes before.
#[test]
fn ordered_copy_answers_like_a_plain_store() {
    let mut rng = Rng(43);
    let rs = res("1s:60 1m:60 1h:24 1d:30");
    let mut on_map = Counter::new(rs.clone());
    let mut on_copy = Counter::new(rs);
    let mut map = MapStore::ordered();
    let mut copy = OrderedSlots::default();
    let mut now: i64 = 10_000_000_000;
    for step in 0..5_000 {
        now += rng.below(4_000);
        let far = rng.below(4) == 0;
        let ts = now - rng.below(if far { 20 * 86_400_000 } else { 90_000 });
        let inc = rng.below(9) - 3;
        assert_eq!(
            on_copy.incrby(&mut copy, now, ts, inc),
            on_map.incrby(&mut map, now, ts, inc),
            "step {step}"
        );
        if step % 5 == 0 {
            let windows: Vec<i64> = (0..1 + rng.below(5))
                .map(|_| 1 + rng.below(30 * 86_400_000))
                .collect();
            let t = now - rng.below(3_600_000);
            assert_eq!(
                on_copy.sum(&mut copy, now, t, &windows),
                on_map.sum(&mut map, now, t, &windows),
                "step {step}: {windows:?} at {t}"
            );
            let r = [1_000, 60_000, 3_600_000, 86_400_000][rng.below(4) as usize];
            let empty = rng.below(2) == 0;
            assert_eq!(
                on_copy.range(&mut copy, now, r, None, None, empty),
                on_map.range(&mut map, now, r, None, None, empty),
                "step {step}"
            );
        }
        if step % 50 == 0 {
            assert_eq!(on_copy.trim(&mut copy, now), on_map.trim(&mut map, now));
        }
        let listed: Vec<((i64, i64), i64)> = copy.iter().collect();
        let plain: Vec<((i64, i64), i64)> = map.0.iter().map(|(&s, &c)| (s, c)).collect();
        assert_eq!(listed, plain, "step {step}");
    }
}

/// SUM's one-window read (`window_sum`) answers exactly what `sum` of `[window]` at `now`
/// does, on a store that sums ranges itself (the mirror's copy) and on one that lists its
/// slots (the hash), errors included, whatever the writes and the time.
#[test]
fn one_window_sum_answers_like_the_general_path() {
    for (seed, text) in [
        (61u64, "1s:60 1m:60 1h:24 1d:30"),
        (62, "500ms:3 2s:2 1m:5"),
    ] {
        let mut rng = Rng(seed);
        let mut on_map = Counter::new(res(text));
        let mut on_copy = Counter::new(res(text));
        let mut map = MapStore::default();
        let mut copy = OrderedSlots::default();
        let mut now: i64 = 10_000_000_000;
        for step in 0..20_000 {
            let pick = rng.below(4);
            now += rng.below([30, 5_000, 400_000, 1][pick as usize]);
            if pick == 3 {
                // Onto a slot boundary of every resolution (where a window's last slot
                // starts).
                now += 60_000 - now.rem_euclid(60_000);
            }
            let far = rng.below(4) == 0;
            let ts = now - rng.below(if far { 20 * 86_400_000 } else { 90_000 });
            // Increments of any sign, huge ones now and then (sums past i64 are an error).
            let inc = match rng.below(50) {
                0 => i64::MAX / 3,
                _ => rng.below(9) - 3,
            };
            let _ = on_copy.incrby(&mut copy, now, ts, inc);
            let _ = on_map.incrby(&mut map, now, ts, inc);
            if step % 100 == 0 {
                assert_eq!(on_copy.trim(&mut copy, now), on_map.trim(&mut map, now));
            }
            let window = match rng.below(4) {
                0 => 1 + rng.below(40 * 86_400_000),
                1 => 1 + rng.below(5_000),
                _ => [1_000, 5_000, 60_000, 300_000, 3_600_000, 86_400_000][rng.below(6) as usize],
            };
            let general = on_map
                .sum(&mut map, now, now, &[window])
                .map(|sums| sums[0]);
            assert_eq!(
                on_map.window_sum(&mut map, now, window),
                general,
                "step {step}"
            );
            assert_eq!(
                on_copy.window_sum(&mut copy, now, window),
                general,
                "step {step}"
            );
        }
    }
}
