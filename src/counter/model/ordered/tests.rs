//! Unit tests of the ordered copy.

use super::*;
use crate::testutil::Rng;
use std::collections::BTreeMap;

fn contents(slots: &OrderedSlots) -> Vec<((i64, i64), i64)> {
    slots.iter().collect()
}

/// Random writes, removals and range sums, compared with sums over a plain map.
#[test]
fn range_sums_match_a_walk_whatever_the_writes() {
    let mut rng = Rng(5);
    let mut slots = OrderedSlots::default();
    let mut plain: BTreeMap<(i64, i64), i64> = BTreeMap::new();
    let resolutions = [1_000, 60_000];
    let mut newest = [0i64; 2];
    for step in 0..20_000 {
        let r = rng.below(2) as usize;
        let res = resolutions[r];
        match rng.below(10) {
            // Mostly writes at the newest slot or just after it (the hot path).
            0..=4 => {
                newest[r] += rng.below(2);
                let count = rng.below(9) - 2;
                slots.insert((res, newest[r]), count);
                plain.insert((res, newest[r]), count);
            }
            5 => {
                let index = newest[r] - rng.below(300);
                let count = rng.below(9) - 2;
                slots.insert((res, index), count);
                plain.insert((res, index), count);
            }
            6 => {
                // The newest slot, the oldest (trimming) or any.
                let oldest = plain
                    .range((res, i64::MIN)..)
                    .next()
                    .filter(|(k, _)| k.0 == res)
                    .map(|(k, _)| k.1);
                let index = match rng.below(3) {
                    0 => newest[r],
                    1 => oldest.filter(|k| *k <= newest[r]).unwrap_or(newest[r]),
                    _ => newest[r] - rng.below(300),
                };
                assert_eq!(slots.remove(&(res, index)), plain.remove(&(res, index)));
            }
            _ => {
                let hi = newest[r] - rng.below(5);
                let lo = hi - rng.below(400);
                let want: i128 = plain
                    .range((res, lo)..=(res, hi))
                    .map(|(_, &c)| i128::from(c))
                    .sum();
                assert_eq!(
                    slots.range_sum(res, lo, hi),
                    want,
                    "step {step}: {lo}..={hi}"
                );
            }
        }
        assert_eq!(slots.len(), plain.len());
        if step % 1000 == 0 {
            let want: Vec<_> = plain.iter().map(|(&k, &v)| (k, v)).collect();
            assert_eq!(contents(&slots), want, "step {step}");
            let (res, lo, hi) = (resolutions[r], newest[r] - 50, newest[r]);
            let range: Vec<_> = slots.range(res, lo, hi).collect();
            let want: Vec<_> = plain
                .range((res, lo)..=(res, hi))
                .map(|(&(_, i), &c)| (i, c))
                .collect();
            assert_eq!(range, want, "step {step}");
        }
    }
}

/// The batch forms (one write's slots, resolutions visited in order or not) do what
/// one call per slot does.
#[test]
fn batches_equal_one_call_per_slot() {
    let mut rng = Rng(23);
    let mut batched = OrderedSlots::default();
    let mut single = OrderedSlots::default();
    let resolutions = [1_000, 5_000, 60_000, 3_600_000];
    for _ in 0..5_000 {
        let mut writes: Vec<(i64, i64, i64)> = Vec::new();
        for &r in &resolutions {
            if rng.below(4) != 0 {
                writes.push((r, rng.below(40), rng.below(9) - 2));
            }
        }
        if rng.below(5) == 0 {
            // Out of order, or a new resolution between the others.
            writes.reverse();
            writes.push((rng.below(100_000) + 1, rng.below(3), 1));
        }
        let slots: Vec<(i64, i64)> = writes.iter().map(|&(r, i, _)| (r, i)).collect();
        let mut got = vec![Some(-1); slots.len()];
        batched.get_many(&slots, &mut got);
        let want: Vec<Option<i64>> = slots.iter().map(|s| single.get(s).copied()).collect();
        assert_eq!(got, want);
        batched.insert_many(&writes);
        for &(r, i, c) in &writes {
            single.insert((r, i), c);
        }
        assert_eq!(batched.len(), single.len());
    }
    assert_eq!(contents(&batched), contents(&single));
}

/// Loading a hash walk (any order, a slot given twice: the later count wins) gives what
/// inserting one by one gives.
#[test]
fn loading_unordered_slots_equals_inserting_them() {
    let mut rng = Rng(11);
    let mut entries = Vec::new();
    for _ in 0..3000 {
        let res = [1_000, 5_000, 60_000][rng.below(3) as usize];
        entries.push(((res, rng.below(500)), rng.below(20) + 1));
    }
    let mut inserted = OrderedSlots::default();
    for &(slot, count) in &entries {
        inserted.insert(slot, count);
    }
    let mut loaded = OrderedSlots::from_unordered(entries);
    assert_eq!(contents(&loaded), contents(&inserted));
    assert_eq!(loaded.len(), inserted.len());
    for res in [1_000, 5_000, 60_000, 7] {
        assert_eq!(
            loaded.range_sum(res, 0, 499),
            inserted.range_sum(res, 0, 499)
        );
        assert_eq!(
            loaded.range_sum(res, 100, 200),
            inserted.range_sum(res, 100, 200)
        );
    }
}

/// A forged hash with slot fields of many resolutions: each is found by its own
/// resolution, and a resolution whose last slot goes leaves nothing behind.
#[test]
fn many_resolutions_each_keep_their_own_slots() {
    let mut slots =
        OrderedSlots::from_unordered((0..10_000).rev().map(|r| ((r + 1, 3), r + 1)).collect());
    assert_eq!(slots.len(), 10_000);
    assert_eq!(slots.get(&(5_000, 3)), Some(&5_000));
    assert_eq!(slots.get(&(5_000, 4)), None);
    assert_eq!(slots.range_sum(77, 0, 10), 77);
    assert_eq!(slots.remove(&(77, 3)), Some(77));
    assert_eq!(slots.range_sum(77, 0, 10), 0);
    assert_eq!(slots.get(&(77, 3)), None);
    assert_eq!(slots.len(), 9_999);
    assert_eq!(slots.insert((77, 9), 1), None);
    assert_eq!(
        slots.iter().find(|&((r, _), _)| r == 77),
        Some(((77, 9), 1))
    );
}
