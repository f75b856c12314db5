//! Unit tests of the parent module.

use super::*;
use crate::testutil::{MapStore, Rng};
use std::collections::BTreeMap;

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

/// A resolution and its span (`res * samples`) are at most 10,000 years.
#[test]
fn resolution_spans_stop_at_ten_thousand_years() {
    assert_eq!(
        res("3652500d:1 3155760000ms:100000"),
        vec![
            Resolution {
                ms: 3_155_760_000,
                samples: 100_000
            },
            Resolution {
                ms: 315_576_000_000_000,
                samples: 1
            }
        ]
    );
    for (text, named) in [
        ("106751991167d:100000", "106751991167d"),
        ("3652501d:1", "3652501d"),
        ("3652500d:2", "3652500d:2"),
        ("3155760001ms:100000", "3155760001ms:100000"),
        ("1s:1 1000d:100000", "1000d:100000"),
    ] {
        assert_eq!(
            parse_resolution_text(text),
            Err(Error::InvalidDuration(named.into())),
            "{text}"
        );
    }
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
    assert!(layout::is_family(c.marker().as_bytes(), layout::COUNTER));
    assert!(!layout::is_family(b"counterx 1s:1", layout::COUNTER));
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
                assert_extent_is_the_walk(&c, &mut s, now, seed);
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

/// INFO's probed extent, when the bookkeeping gives one, is what a walk of the store
/// finds; a tight probe budget or bookkeeping that misses a slot gives none.
fn assert_extent_is_the_walk(c: &Counter, s: &mut MapStore, now: i64, seed: u64) {
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
