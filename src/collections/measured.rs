//! The measurements behind each hand-written structure of this folder, against the std or
//! well-kept crate type it would otherwise be (std's `HashMap` is `hashbrown`'s table).
//! Timing, so ignored by the plain `cargo test`; run them on a quiet machine with
//!
//! ```text
//! cargo test --release -p tally --lib measured -- --ignored --nocapture --test-threads=1
//! ```
//!
//! Each prints its figures; the numbers quoted at the top of a structure's file come
//! from here.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::due_queue::DueQueue;
use super::memo_map::MemoMap;
use super::name_set::{IdHasher, NameSet};
use super::sharded_map::ShardedMap;

/// Ten million keys: the scale the module answers within 10 ms at.
const KEYS: u64 = 10_000_000;

fn key_name(i: u64) -> Vec<u8> {
    format!("counter:{i:012}").into_bytes()
}

/// The slowest single insert while a map grows to [`KEYS`] ids: one table doubles in one
/// step, the sharded map a shard at a time.
#[test]
#[ignore = "timing: run with --ignored (see the module doc)"]
fn measured_growth_of_a_map_of_ten_million_ids() {
    /// The slowest insert, how many took over 2 ms (a loaded machine adds a few of its
    /// own: compare the two), and the whole run.
    fn worst<M>(map: &mut M, mut insert: impl FnMut(&mut M, u64)) -> (Duration, usize, Duration) {
        let (mut worst, mut slow, start) = (Duration::ZERO, 0, Instant::now());
        for i in 0..KEYS {
            let at = Instant::now();
            insert(map, i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let took = at.elapsed();
            worst = worst.max(took);
            slow += usize::from(took > Duration::from_millis(2));
        }
        (worst, slow, start.elapsed())
    }
    type Ids = BuildHasherDefault<IdHasher>;
    let mut plain: HashMap<u64, i64, Ids> = HashMap::default();
    let (plain_worst, plain_slow, plain_all) = worst(&mut plain, |m, id| {
        m.insert(id, 1);
    });
    drop(plain);
    let mut sharded: ShardedMap<u64, i64, Ids, 8> = ShardedMap::default();
    let (sharded_worst, sharded_slow, sharded_all) = worst(&mut sharded, |m, id| {
        m.insert(id, 1);
    });
    println!(
        "10M ids: HashMap worst insert {plain_worst:?}, {plain_slow} over 2 ms (all \
         {plain_all:?}); ShardedMap<256 shards> worst {sharded_worst:?}, {sharded_slow} over \
         2 ms (all {sharded_all:?})"
    );
}

/// The expiry schedule against the textbook form, a `BTreeMap` keyed by (due, id) with
/// each key's due time in a map beside it: inserts of [`KEYS`] / 10 new keys, then every
/// key scheduled again later (a write), then all popped; time and the slowest step.
#[test]
#[ignore = "timing: run with --ignored (see the module doc)"]
fn measured_due_queue_against_a_btree_of_due_and_id() {
    let keys = KEYS / 10;
    let names: Vec<Vec<u8>> = (0..keys).map(key_name).collect();
    let time = |f: &mut dyn FnMut(u64)| {
        let (mut worst, start) = (Duration::ZERO, Instant::now());
        for i in 0..keys {
            let at = Instant::now();
            f(i);
            worst = worst.max(at.elapsed());
        }
        (start.elapsed(), worst)
    };
    let mut queue = DueQueue::default();
    let q_insert = time(&mut |i| queue.insert(0, &names[i as usize], 1_000 + i as i64));
    let q_again = time(&mut |i| queue.insert(0, &names[i as usize], 2_000_000 + i as i64));
    let start = Instant::now();
    let mut popped = 0;
    while queue.pop_due(i64::MAX).is_some() {
        popped += 1;
    }
    let q_pop = start.elapsed();
    assert_eq!(popped, keys);

    // The textbook form: (due, id) -> name, and id -> due (a plain map: the sharded one
    // above is this folder's answer to its growth).
    let ids = super::name_set::NameIds::default();
    let mut by_due: BTreeMap<(i64, u64), Rc<[u8]>> = BTreeMap::new();
    let mut due_of: HashMap<u64, i64, BuildHasherDefault<IdHasher>> = HashMap::default();
    let mut schedule = |i: u64, due: i64| {
        let name = &names[i as usize];
        let id = ids.id(name);
        if let Some(old) = due_of.insert(id, due) {
            if old <= due {
                due_of.insert(id, old);
                return;
            }
            by_due.remove(&(old, id));
        }
        by_due.insert((due, id), Rc::from(name.as_slice()));
    };
    let b_insert = time(&mut |i| schedule(i, 1_000 + i as i64));
    let b_again = time(&mut |i| schedule(i, 2_000_000 + i as i64));
    let start = Instant::now();
    let mut popped = 0;
    while let Some(((_, id), _)) = by_due.pop_first() {
        due_of.remove(&id);
        popped += 1;
    }
    let b_pop = start.elapsed();
    assert_eq!(popped, keys);
    println!(
        "{keys} keys (total, slowest step): DueQueue insert {q_insert:?}, again {q_again:?}, \
         pop all {q_pop:?}; BTreeMap<(due, id)> + HashMap insert {b_insert:?}, again \
         {b_again:?}, pop all {b_pop:?}"
    );
}

/// A hot key looked up again and again among many names: the remembered entry against a
/// plain map of the names.
#[test]
#[ignore = "timing: run with --ignored (see the module doc)"]
fn measured_memo_map_against_a_plain_map_for_a_hot_key() {
    let names: Vec<Vec<u8>> = (0..100_000).map(key_name).collect();
    let mut memo: MemoMap<u64> = MemoMap::default();
    let mut plain: HashMap<Rc<[u8]>, u64> = HashMap::new();
    for (i, name) in names.iter().enumerate() {
        memo.insert(name, i as u64);
        plain.insert(Rc::from(name.as_slice()), i as u64);
    }
    let hot = key_name(77_777);
    let lookups = 10_000_000u64;
    let start = Instant::now();
    let mut sum = 0u64;
    for _ in 0..lookups {
        sum = sum.wrapping_add(memo.get_mut(std::hint::black_box(&hot)).map_or(0, |v| *v));
    }
    let memo_ns = start.elapsed().as_nanos() as f64 / lookups as f64;
    let start = Instant::now();
    for _ in 0..lookups {
        sum = sum.wrapping_add(
            plain
                .get(std::hint::black_box(hot.as_slice()))
                .map_or(0, |v| *v),
        );
    }
    let plain_ns = start.elapsed().as_nanos() as f64 / lookups as f64;
    println!(
        "hot key among 100k names: MemoMap {memo_ns:.1} ns, HashMap (SipHash) {plain_ns:.1} ns \
         per lookup ({sum})"
    );
}

/// The slowest single insert of new names into the tracked names, to 1M and to 10M
/// names: the filter in front of the sets grows as they do, up to its largest size.
#[test]
#[ignore = "timing: run with --ignored (see the module doc)"]
fn measured_name_set_growth() {
    for total in [KEYS / 10, KEYS] {
        let mut names = NameSet::default();
        let (mut worst, mut worst_at, mut slow, start) = (Duration::ZERO, 0, 0, Instant::now());
        let mut name = Vec::new();
        for i in 0..total {
            name.clear();
            name.extend_from_slice(&key_name(i));
            let at = Instant::now();
            names.insert(0, &name);
            let took = at.elapsed();
            if took > worst {
                (worst, worst_at) = (took, i);
            }
            slow += usize::from(took > Duration::from_millis(1));
        }
        println!(
            "{total} names: slowest insert {worst:?} (the {worst_at}th), {slow} over 1 ms (all \
             {:?})",
            start.elapsed()
        );
    }
}
