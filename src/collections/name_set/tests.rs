use super::filter::{FILTER_MAX_CELLS, FILTER_MAX_STEP};
use super::*;

#[test]
fn names_are_kept_per_database() {
    let mut s = NameSet::default();
    assert!(!s.contains(0, b"a"));
    s.insert(0, b"a");
    s.insert(3, b"counter:with:a:longer:name");
    assert!(s.contains(0, b"a"));
    assert!(!s.contains(1, b"a"));
    assert!(!s.contains(0, b"b"));
    assert!(s.contains(3, b"counter:with:a:longer:name"));
    assert!(!s.contains(3, b"counter:with:a:longer:namf"));
    assert!(!s.contains(-1, b"a"));
    assert_eq!(s.len(), 2);
    s.remove(0, b"a");
    assert!(!s.contains(0, b"a"));
    assert_eq!(s.len(), 1);
}

#[test]
fn names_differing_in_length_or_padding_differ() {
    let mut s = NameSet::default();
    s.insert(0, b"");
    s.insert(0, b"abcdefgh");
    assert!(!s.contains(0, b"\0"));
    assert!(!s.contains(0, b"abcdefgh\0"));
    assert!(!s.contains(0, b"abcdefg"));
    assert!(s.contains(0, b""));
    assert!(s.contains(0, b"abcdefgh"));
}

#[test]
fn an_insert_says_whether_the_set_changed_and_the_last_name_stays_known() {
    let mut s = NameSet::default();
    assert!(s.insert(0, b"hot"));
    assert!(!s.insert(0, b"hot"));
    assert!(s.insert(1, b"hot"));
    assert!(!s.insert(0, b"hot"));
    assert!(s.insert(0, b"other"));
    // A name that left is new again, also right after it was the last inserted.
    s.remove(0, b"other");
    assert!(!s.contains(0, b"other"));
    assert!(s.insert(0, b"other"));
    s.clear_db(0);
    assert!(s.insert(0, b"other"));
    s.swap_dbs(0, 2);
    assert!(s.insert(0, b"other"));
    assert!(s.contains(2, b"other"));
    assert_eq!(s.len(), 3);
}

#[test]
fn flushes_and_swaps_follow_the_databases() {
    let mut s = NameSet::default();
    s.insert(0, b"a");
    s.insert(1, b"b");
    s.swap_dbs(0, 5);
    assert!(!s.contains(0, b"a"));
    assert!(s.contains(5, b"a"));
    s.clear_db(5);
    assert!(!s.contains(5, b"a"));
    assert!(s.contains(1, b"b"));
    s.clear_db(-1);
    assert!(s.is_empty());
}

#[test]
fn databases_past_the_last_set_share_it_and_keep_their_names() {
    let mut s = NameSet::default();
    let far = MAX_DB_SETS as i32 + 10;
    s.insert(far, b"a");
    assert!(s.contains(far, b"a"));
    assert!(s.contains(far + 1, b"a"), "shared set: a superset");
    s.remove(far, b"a");
    assert!(s.contains(far, b"a"), "the shared set keeps its names");
    s.insert(2, b"b");
    s.swap_dbs(2, far);
    assert!(s.contains(far, b"b"));
    assert!(
        s.contains(2, b"b"),
        "the merge keeps the names on both sides"
    );
    assert!(s.contains(2, b"a"));
    s.clear_db(far);
    assert!(
        s.contains(far, b"b"),
        "only a full flush empties the shared set"
    );
}

/// Every name of up to 10 bytes over a small alphabet, and seeded random names up to
/// 40 bytes, get distinct ids: the words read overlap, but no byte is left out.
#[test]
fn short_and_overlapping_names_get_distinct_ids() {
    use crate::testutil::Rng;
    use std::collections::HashMap;
    let ids = NameIds::default();
    let mut seen: HashMap<u64, Vec<u8>> = HashMap::new();
    let mut check = |name: Vec<u8>| {
        if let Some(other) = seen.insert(ids.id(&name), name.clone()) {
            assert_eq!(other, name, "two names share an id");
        }
    };
    let alphabet = [0u8, 1, b'a', 0xff];
    for len in 0..=10u32 {
        for n in 0..4usize.pow(len.min(8)) {
            let mut name: Vec<u8> = (0..len)
                .map(|i| alphabet[(n >> (2 * (i % 8))) & 3])
                .collect();
            if len > 8 {
                name.reverse();
            }
            check(name);
        }
    }
    let mut rng = Rng(5);
    for _ in 0..100_000 {
        let len = rng.below(41) as usize;
        check((0..len).map(|_| rng.below(256) as u8).collect());
    }
}

/// Seeded random inserts, removals, flushes and swaps over a few databases against a
/// plain model: the filter never turns a kept name away (no false negative), the sets
/// stay exact, and the filter turns away most names never kept.
#[test]
fn the_filter_never_loses_a_kept_name() {
    use crate::testutil::Rng;
    use std::collections::HashSet;
    let mut rng = Rng(23);
    let mut s = NameSet::default();
    let mut model: HashSet<(i32, u64)> = HashSet::new();
    let name = |n: u64| format!("key:{n}").into_bytes();
    for step in 0..300_000u64 {
        let db = rng.below(4) as i32;
        let n = rng.below(40_000) as u64;
        match rng.below(1000) {
            0 => {
                s.clear_db(db);
                model.retain(|&(d, _)| d != db);
            }
            1 => {
                let other = rng.below(4) as i32;
                s.swap_dbs(db, other);
                model = model
                    .into_iter()
                    .map(|(d, n)| match d {
                        d if d == db => (other, n),
                        d if d == other => (db, n),
                        d => (d, n),
                    })
                    .collect();
            }
            2..=600 => {
                s.insert(db, &name(n));
                model.insert((db, n));
            }
            _ => {
                s.remove(db, &name(n));
                model.remove(&(db, n));
            }
        }
        let probe = (rng.below(4) as i32, rng.below(40_000) as u64);
        assert_eq!(
            s.contains(probe.0, &name(probe.1)),
            model.contains(&probe),
            "step {step}"
        );
        assert_eq!(s.len(), model.len(), "step {step}");
    }
    for &(db, n) in &model {
        assert!(s.contains(db, &name(n)));
    }
    let strangers = (0..100_000u64)
        .filter(|n| s.may_contain(format!("other:{n}").as_bytes()).is_some())
        .count();
    assert!(
        strangers < 10_000,
        "{strangers} of 100000 strangers pass the filter"
    );
}

/// Flushing a database too large to uncount now makes the filter give up ("maybe" for
/// every name), and it counts again once the names are few.
#[test]
fn the_filter_gives_up_and_comes_back() {
    let mut s = NameSet::default();
    let limit = FILTER_MAX_STEP;
    for n in 0..limit + 10 {
        s.insert(1, format!("big:{n}").as_bytes());
        s.insert(3, format!("big:{n}").as_bytes());
    }
    s.insert(0, b"small");
    s.clear_db(1);
    assert!(s.filter.given_up, "too many ids to uncount in one step");
    assert!(
        s.may_contain(b"other").is_some(),
        "given up: maybe for every name"
    );
    assert!(s.contains(0, b"small"));
    assert!(s.contains(3, b"big:1"));
    assert!(!s.contains(0, b"other"));
    assert!(!s.contains(1, b"big:1"));
    s.clear_db(3);
    // A few names: counted again at once.
    assert!(!s.filter.given_up);
    assert!(s.may_contain(b"small").is_some());
    let strangers = (0..10_000)
        .filter(|n| s.may_contain(format!("o:{n}").as_bytes()).is_some())
        .count();
    assert!(strangers < 100, "{strangers}");
    // Past the largest size the filter stops growing and keeps every name.
    for n in 0..limit * 2 {
        s.insert(2, format!("huge:{n}").as_bytes());
    }
    assert_eq!(s.filter.counts.len(), FILTER_MAX_CELLS);
    assert!((0..limit * 2).all(|n| s.contains(2, format!("huge:{n}").as_bytes())));
}

/// Seeded random names of 0 to 40 bytes, over an alphabet with `|` in it: the screen
/// finds the mark exactly when the name holds it, gives the name's id, and turns no
/// kept name away (before the first insert, after it, and once the filter gave up).
#[test]
fn the_screen_finds_the_mark_and_never_loses_a_kept_name() {
    use crate::testutil::Rng;
    let mut rng = Rng(41);
    let alphabet = [b'|', b'a', b'1', b':', 0, 0xff, b'|' ^ 0x80, b'|' - 1];
    let random_name = |rng: &mut Rng| -> Vec<u8> {
        let len = rng.below(41) as usize;
        (0..len).map(|_| alphabet[rng.below(8) as usize]).collect()
    };
    let empty = NameSet::new();
    for _ in 0..20_000 {
        let name = random_name(&mut rng);
        let screened = empty.screen(&name, b'|');
        assert_eq!(screened.marked, name.contains(&b'|'), "{name:?}");
        assert_eq!(screened.maybe, None);
    }
    let mut s = NameSet::new();
    let mut kept = Vec::new();
    for _ in 0..20_000 {
        let name = random_name(&mut rng);
        s.insert(rng.below(3) as i32, &name);
        kept.push(name);
    }
    let ids = s.ids.as_ref().map(|ids| ids.seed);
    for name in &kept {
        let screened = s.screen(name, b'|');
        assert_eq!(screened.marked, name.contains(&b'|'), "{name:?}");
        let id = NameIds {
            seed: ids.unwrap_or_default(),
        }
        .id(name);
        assert_eq!(screened.maybe, Some(id), "a kept name passes, with its id");
    }
    let strangers = (0..20_000)
        .map(|_| random_name(&mut rng))
        .filter(|name| s.screen(name, b'|').maybe.is_some() && !kept.contains(name))
        .count();
    assert!(strangers < 2_000, "{strangers} of 20000 strangers pass");
    // Given up: every name may be kept.
    s.filter = IdFilter::new();
    s.filter.given_up = true;
    assert!(kept.iter().all(|name| s.screen(name, b'|').maybe.is_some()));
    assert!(s.screen(b"never kept", b'|').maybe.is_some());
}

#[test]
fn many_names_stay_distinct() {
    let mut s = NameSet::default();
    for i in 0..10_000 {
        s.insert(0, format!("key:{i}").as_bytes());
    }
    assert_eq!(s.len(), 10_000);
    let strangers = (0..10_000)
        .filter(|i| s.contains(0, format!("other:{i}").as_bytes()))
        .count();
    assert_eq!(strangers, 0);
}

/// Seeded random inserts, removals, flushes and swaps across many growths of the filter:
/// after every step, while a recount is under way or not, every kept name passes the
/// filter and is found in its database, and no step counts more than a bounded number of
/// ids into the filter being filled.
#[test]
fn the_filter_grows_in_steps_and_never_loses_a_kept_name() {
    use crate::testutil::Rng;
    use std::collections::BTreeSet;
    let mut rng = Rng(53);
    let mut s = NameSet {
        recount_step: 16,
        ..NameSet::default()
    };
    let mut model: BTreeSet<(i32, u64)> = BTreeSet::new();
    let mut recounting_steps = 0;
    for step in 0..120_000u64 {
        let db = rng.below(3) as i32;
        let n = rng.below(60_000) as u64;
        let name = format!("n:{n}");
        match rng.below(100) {
            0..=79 => {
                s.insert(db, name.as_bytes());
                model.insert((db, n));
            }
            80..=97 => {
                s.remove(db, name.as_bytes());
                model.remove(&(db, n));
            }
            98 if rng.below(40) == 0 => {
                s.clear_db(db);
                model.retain(|&(d, _)| d != db);
            }
            _ if rng.below(20) == 0 => {
                let other = rng.below(3) as i32;
                s.swap_dbs(db, other);
                model = model
                    .into_iter()
                    .map(|(d, n)| (crate::collections::swapped(d, db, other), n))
                    .collect();
            }
            _ => {}
        }
        if s.filter.next.is_some() {
            recounting_steps += 1;
        }
        assert_eq!(s.len(), model.len(), "step {step}");
        // Every kept name passes, during a recount too; sample the rest.
        if step % 97 == 0 || s.filter.next.is_some() && step % 7 == 0 {
            for &(d, n) in &model {
                let name = format!("n:{n}");
                assert!(s.contains(d, name.as_bytes()), "step {step}: {d} {name}");
            }
        }
        assert!(s.contains(db, name.as_bytes()) == model.contains(&(db, n)));
    }
    assert!(
        recounting_steps > 1_000,
        "{recounting_steps} steps during a recount"
    );
}
