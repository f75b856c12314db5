use super::*;
use crate::testutil::Rng;

/// Random inserts (mostly the same few keys again, as hot keys are), pops, removals,
/// flushes and swaps, against a plain map of each key's earliest due time: the
/// remembered last insert never hides a change.
#[test]
fn due_queue_matches_a_plain_map() {
    let mut rng = Rng(31);
    let mut schedule = DueQueue::default();
    let mut model: BTreeMap<(c_int, Vec<u8>), i64> = BTreeMap::new();
    let mut now = 0;
    for step in 0..50_000 {
        let db = rng.below(3) as c_int;
        let key = format!("k{}", rng.below(6)).into_bytes();
        match rng.below(20) {
            0..=13 => {
                let due = now + rng.below(50);
                schedule.insert(db, &key, due);
                let kept = model.entry((db, key)).or_insert(due);
                *kept = (*kept).min(due);
            }
            14..=16 => {
                now += rng.below(20);
                // Keys due at the same time may come in any order.
                let popped = schedule.pop_due(now);
                let earliest = model.values().min().copied().filter(|&due| due <= now);
                match (&popped, earliest) {
                    (None, None) => {}
                    (Some((d, k)), Some(due)) => {
                        let kept = model.remove(&(*d, k.clone()));
                        assert_eq!(kept, Some(due), "step {step}: popped {popped:?}");
                    }
                    _ => panic!("step {step}: popped {popped:?}, earliest {earliest:?}"),
                }
            }
            17 => {
                schedule.remove(db, &key);
                model.remove(&(db, key));
            }
            18 if rng.below(2) == 0 => {
                schedule.release_some(rng.below(4) as usize);
            }
            18 => {
                let flushed = if rng.below(4) == 0 { -1 } else { db };
                schedule.clear_db(flushed);
                model.retain(|(d, _), _| flushed >= 0 && *d != flushed);
            }
            _ => {
                let other = rng.below(3) as c_int;
                schedule.swap_dbs(db, other);
                model = model
                    .into_iter()
                    .map(|((d, k), due)| ((crate::collections::swapped(d, db, other), k), due))
                    .collect();
            }
        }
        assert_eq!(schedule.tracked(), model.len(), "step {step}");
    }
}

/// A key deleted and scheduled again and again, far in the future, leaves entries
/// behind that are no longer current: they are dropped as new ones come, so the
/// queue stays within half again the keys scheduled (plus a chunk).
#[test]
fn entries_left_behind_stay_bounded() {
    let mut schedule = DueQueue::default();
    for i in 0..2_000 {
        schedule.insert(0, format!("keep{i}").as_bytes(), 1_000_000 + i);
    }
    for round in 0..200_000i64 {
        let key = format!("churn{}", round % 10);
        schedule.insert(0, key.as_bytes(), 5_000_000 + round);
        schedule.remove(0, key.as_bytes());
        if round % 3 == 0 {
            // Scheduled earlier: the later entry is left behind too.
            schedule.insert(1, b"moving", 9_000_000 - round);
        }
        let bound = schedule.tracked() * 3 / 2 + 2 * CHUNK + COMPACT_PER_INSERT;
        assert!(
            schedule.queued() <= bound,
            "round {round}: {} entries",
            schedule.queued()
        );
    }
    // Every key still scheduled pops, once.
    let mut popped = 0;
    while let Some((db, key)) = schedule.pop_due(i64::MAX) {
        popped += 1;
        assert!(db == 0 || key == b"moving");
    }
    assert_eq!(popped, 2_001);
    assert_eq!(schedule.tracked(), 0);
}

/// Removing every key leaves its queue entry behind; the timer's `release_some` then
/// drops them in steps, down to at most a chunk.
#[test]
fn entries_left_by_mass_removal_are_freed_in_steps() {
    let mut schedule = DueQueue::default();
    for i in 0..50_000 {
        schedule.insert(0, format!("k{i}").as_bytes(), 1_000 + i % 7);
    }
    for i in 0..50_000 {
        schedule.remove(0, format!("k{i}").as_bytes());
    }
    assert_eq!(schedule.tracked(), 0);
    assert_eq!(schedule.queued(), 50_000);
    let mut steps = 0;
    while !schedule.release_some(512) {
        steps += 1;
        assert!(steps < 1_000, "not freed after {steps} steps");
    }
    assert!(steps >= 90, "freed in {steps} steps");
    assert!(
        schedule.queued() <= CHUNK,
        "{} entries left",
        schedule.queued()
    );
    assert_eq!(schedule.pop_due(i64::MAX), None);
}

/// A hundred thousand keys due at the same moment (counters written in one second)
/// sit in chunks: none is ever larger than a chunk, and all pop.
#[test]
fn one_due_time_holds_many_keys_in_chunks() {
    let mut schedule = DueQueue::default();
    for i in 0..100_000 {
        schedule.insert(0, format!("c{i}").as_bytes(), 42);
    }
    let chunks = schedule.queue.get(&42).map_or(0, Vec::len);
    assert_eq!(chunks, 100_000usize.div_ceil(CHUNK));
    assert!(schedule.queue.values().flatten().all(|c| c.len() <= CHUNK));
    assert_eq!(schedule.backlog(42), BACKLOG_COUNT_MAX);
    assert_eq!(schedule.backlog(41), 0);
    let mut seen = std::collections::HashSet::new();
    while let Some((_, key)) = schedule.pop_due(42) {
        assert!(seen.insert(key));
    }
    assert_eq!(seen.len(), 100_000);
    assert_eq!(schedule.first_due(), None);
}

/// A flush empties the schedule at once and its entries are then freed in steps of
/// about the size asked; new entries meanwhile are unaffected.
#[test]
fn flushed_entries_are_freed_in_steps() {
    let mut schedule = DueQueue::default();
    for i in 0..100_000 {
        schedule.insert(0, format!("k{i}").as_bytes(), i);
    }
    schedule.clear_db(-1);
    assert_eq!(schedule.tracked(), 0);
    assert_eq!(schedule.first_due(), None);
    schedule.insert(0, b"new", 5);
    let mut steps = 0;
    while !schedule.release_some(1000) {
        steps += 1;
        assert!(steps < 1_000, "not freed after {steps} steps");
    }
    // 100k map entries in 4096 shards and 100k queue entries (one chunk per due
    // time here), ~1000 per step.
    assert!(steps >= 150, "freed in {steps} steps");
    assert_eq!(schedule.pop_due(10), Some((0, b"new".to_vec())));
    assert_eq!(schedule.tracked(), 0);
}

/// A million keys scheduled at 10 and then earlier at 5 leave entries no longer current
/// at 10 (hundreds of thousands, what the inserts' compaction has not reached): each
/// bounded pop drops at most 1024 of them, and every key is popped exactly once.
#[test]
fn a_bounded_pop_drops_few_stale_entries() {
    let mut schedule = DueQueue::default();
    let n = 1_000_000;
    for i in 0..n {
        schedule.insert(0, format!("k{i}").as_bytes(), 10);
    }
    for i in 0..n {
        schedule.insert(0, format!("k{i}").as_bytes(), 5);
    }
    let stale = schedule.queued() - n;
    assert!(stale > 100_000, "{stale} stale entries");
    let (mut popped, mut skipped) = (0, 0);
    loop {
        match schedule.pop_due_bounded(20, 1024) {
            Popped::Due(..) => popped += 1,
            Popped::Skipped => skipped += 1,
            Popped::Nothing => break,
        }
    }
    assert_eq!(popped, n);
    assert!(
        skipped >= stale / 1024,
        "{skipped} bounded pops dropped {stale} stale entries"
    );
}
