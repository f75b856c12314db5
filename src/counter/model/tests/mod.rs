//! Unit tests of the pure counter: settings and stored text here, with the reference
//! model and its random workload; increments and trims in `writes`, reads in `reads`.

use super::*;
use crate::layout;
use crate::testutil::{MapStore, Rng};
use crate::window::{first_kept, leaves_at, slot_index, slot_start, slots_covering};
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

/// The text a duration or resolution error names (the hint after it aside).
fn named(e: &Error) -> String {
    match e {
        Error::InvalidDuration(text) | Error::DurationHint(text, _) => text.clone(),
        other => other.to_string(),
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
        parse_resolution_text("1s:1 1000:5").map_err(|e| named(&e)),
        Err("1000:5".to_string())
    );
    assert_eq!(
        parse_resolution_text("1x:5").map_err(|e| named(&e)),
        Err("1x".to_string())
    );
    assert_eq!(
        parse_resolution_text("1s").map_err(|e| named(&e)),
        Err("1s".to_string())
    );
    assert_eq!(
        parse_resolution_text("1s:a").map_err(|e| named(&e)),
        Err("1s:a".to_string())
    );
    assert!(parse_resolution_text("1s:0").is_err());
    // What is wrong is said: the form of a resolution, a duplicate.
    assert_eq!(
        parse_resolution_text("1m:60 1h").map_err(|e| e.to_string()),
        Err(
            "ERR invalid duration '1h': a resolution is res:samples, a duration and how \
             many slots of it to keep (1m:60, 1h:24)"
                .into()
        )
    );
    assert_eq!(
        parse_resolution_text("1m:60 1m:30").map_err(|e| e.to_string()),
        Err(
            "ERR invalid duration '1m:30': duplicate resolution: each resolution is given once"
                .into()
        )
    );
    // One resolution of more samples than a counter keeps is refused for its size, as
    // several are: the duration is fine.
    let too_many = || {
        Error::Invalid("a counter keeps at most 1048576 samples over all its resolutions".into())
    };
    assert_eq!(parse_resolution_text("1s:1048577"), Err(too_many()));
    assert_eq!(parse_resolution_text("1m:2000000"), Err(too_many()));
    assert_eq!(parse_resolution_text("1s:10 1m:1048570"), Err(too_many()));
    assert_eq!(
        parse_resolution_text("1s:600000 1m:600000"),
        Err(too_many())
    );
    assert_eq!(
        parse_resolution_text("1m:-5").map_err(|e| named(&e)),
        Err("1m:-5".to_string())
    );
    // The samples of all resolutions add up to at most MAX_SAMPLES: a day of seconds, a
    // year of minutes and ten years of hours fit.
    assert_eq!(res("1s:86400 1m:525600 1h:87600").len(), 3);
    assert_eq!(res("1s:524288 1m:524288").len(), 2);
    assert_eq!(
        parse_resolution_text("1s:524288 1m:524289"),
        Err(too_many())
    );
    assert!(parse_resolution_text("").is_err());
    let seventeen: Vec<String> = (1..=17).map(|i| format!("{i}s:1")).collect();
    assert!(parse_resolutions(&seventeen).is_err());
}

/// A resolution and its span (`res * samples`) are at most 10,000 years.
#[test]
fn resolution_spans_stop_at_ten_thousand_years() {
    assert_eq!(
        res("3652500d:1 1s:1"),
        vec![
            Resolution {
                ms: 1_000,
                samples: 1
            },
            Resolution {
                ms: 315_576_000_000_000,
                samples: 1
            }
        ]
    );
    assert_eq!(
        res("31557600000ms:10000"),
        vec![Resolution {
            ms: 31_557_600_000,
            samples: 10_000
        }]
    );
    for (text, named) in [
        ("106751991167d:100000", "106751991167d"),
        ("3652501d:1", "3652501d"),
        ("3652500d:2", "3652500d:2"),
        ("31557600001ms:10000", "31557600001ms:10000"),
        ("1s:1 1000d:10000", "1000d:10000"),
    ] {
        assert_eq!(
            parse_resolution_text(text).map_err(|e| self::named(&e)),
            Err(named.to_string()),
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
    c.tracks[0] = Track {
        lo: 17,
        n: 3,
        sealed: 0,
    };
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
                reads::assert_extent_is_the_walk(&c, &mut s, now, seed);
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

mod reads;
mod writes;
