//! The totals of a board without its oldest slot, ready before that slot leaves the window,
//! so that no read subtracts a large slot member by member (see `state::Next`).
//!
//! When a slot leaves the window its counts are still in the sorted set until the timer
//! has subtracted them, in steps. Reads meanwhile answer from these totals: for every
//! member, its sorted-set total less its count in that slot, which is its exact window
//! total at every moment of the subtraction (the timer removes a member's count from the
//! slot hash in the step that subtracts it; slots that leave the window after it are
//! still counted in them, and the reads correct those: `board`). They are kept only while the oldest slot
//! hash holds more than [`BIG_SLOT`] members; below, reads correct the few pending counts
//! themselves.
//!
//! Kept in step by: the timer, which fills them in steps within its budget (a pass over
//! the sorted set, or, right after the previous oldest slot is subtracted, when they equal
//! the sorted set, a pass over the next oldest slot hash); every TSRANK.INCRBY, which sets
//! the new value of each member it writes; the subtraction itself, which leaves every
//! value as it is. Any other change to the board's keys drops them (`lifecycle`), and so do
//! flushes, SWAPDB, loads and the removal of the board (`state`). They live in memory: a
//! primary that has just started answers as before until its timer has filled them again.
//! A replica fills its own with the same code, from its copies of the keys, and follows
//! the primary's effects member by member (`replica`): the members they change are marked
//! dirty and [`settle`]d from the keys before the totals answer.
//!
//! Owns: when a board has them and how they are filled. May not touch: keys (opens the
//! board's keys read-only, without touching their LRU/LFU clock), replication.

use std::collections::HashSet;
use std::os::raw::c_int;

use redis_module::Context;

use crate::args::parse_i64;
use crate::expiry::Visit;
use crate::host::server::monotonic_us;
use crate::host::store::scan::HashCursor;
use crate::host::store::{Key, KeyKind, RStr};
use crate::rank::{score_to_total, slot_key, Meta, RankedSet};

use super::slots::count_in;
use super::state::{self, Next, NextScan};

/// An oldest slot hash with more members than this gets next totals; with fewer, a read
/// corrects the pending counts of the members it passes itself.
pub(super) const BIG_SLOT: usize = 2048;

/// The oldest slot of the board that has a slot hash, and that hash, if any.
fn oldest_slot(ctx: &Context, base: &[u8], meta: &Meta) -> Option<(i64, Key)> {
    if meta.is_empty() {
        return None;
    }
    // `span_fits` bounds this walk to two windows of slot names.
    (meta.lo..=meta.hi).find_map(|index| {
        let slot = Key::open_bytes_untouched(ctx, &slot_key(base, index))?;
        (slot.kind() == KeyKind::Hash).then_some((index, slot))
    })
}

/// `member`'s total without the excluded slot `slot` (its count there given, or read):
/// the board's total less that count.
fn value_of(zset: &Key, slot: &Key, member: &[u8], count: Option<i64>) -> i64 {
    let Some(m) = RStr::new(member) else {
        return 0;
    };
    let total = zset.zscore(&m).map_or(0, score_to_total);
    total.saturating_sub(count.unwrap_or_else(|| count_in(slot, &m)))
}

/// The timer's visit of a board that is not quarantined and has nothing left to subtract:
/// starts, continues or drops its next totals. `Some(Visit::Unfinished)` while they are
/// being filled and the deadline has passed.
pub(super) fn visit(
    ctx: &Context,
    db: c_int,
    base: &[u8],
    meta: &Meta,
    deadline_us: u64,
) -> Option<Visit> {
    if !settle(ctx, db, base, Some(deadline_us)) {
        return Some(Visit::Unfinished);
    }
    let Some((oldest, slot)) = oldest_slot(ctx, base, meta) else {
        state::with(|s| s.drop_next(db, base));
        return None;
    };
    let big = slot.len() > BIG_SLOT;
    let current = state::with(|s| {
        s.next(db, base)
            .map(|next| (next.excluded, next.scan.is_none()))
    });
    match current {
        Some((excluded, _)) if excluded == oldest => {}
        // The slot they left out is subtracted and gone: they equal the sorted set, and
        // now leave out the next oldest slot.
        Some((excluded, true)) if big && excluded < oldest => state::with(|s| {
            if let Some(next) = s.next_mut(db, base) {
                next.excluded = oldest;
                next.scan = Some(NextScan::Excluded(HashCursor::new()));
            }
        }),
        _ if big => {
            let scan = first_scan(ctx, base, meta, oldest);
            state::with(|s| {
                s.drop_next(db, base);
                let next = Next {
                    excluded: oldest,
                    totals: RankedSet::default(),
                    scan: Some(scan),
                    dirty: HashSet::new(),
                };
                s.put_next(db, base, next);
            })
        }
        _ => {
            state::with(|s| s.drop_next(db, base));
            return None;
        }
    }
    fill(ctx, db, base, oldest, &slot, deadline_us)
}

/// How new next totals leaving out slot `excluded` are filled: from the slot hashes after
/// it when they hold fewer fields than the sorted set has members (the usual case: the
/// large slot is the old one), else from the sorted set.
fn first_scan(ctx: &Context, base: &[u8], meta: &Meta, excluded: i64) -> NextScan {
    let members = Key::open_bytes_untouched(ctx, base).map_or(0, |zset| zset.len());
    let mut fields = 0usize;
    for index in excluded.saturating_add(1)..=meta.hi {
        if let Some(slot) = Key::open_bytes_untouched(ctx, &slot_key(base, index)) {
            if slot.kind() == KeyKind::Hash {
                fields = fields.saturating_add(slot.len());
            }
        }
        if fields >= members {
            return NextScan::Totals(HashCursor::new());
        }
    }
    NextScan::Slots {
        index: excluded.saturating_add(1),
        cursor: HashCursor::new(),
    }
}

/// Continues filling the board's next totals (leaving out slot `excluded`, whose hash is
/// `slot`) until they are complete (`None`) or the deadline passes.
fn fill(
    ctx: &Context,
    db: c_int,
    base: &[u8],
    excluded: i64,
    slot: &Key,
    deadline_us: u64,
) -> Option<Visit> {
    let mut scan = state::with(|s| s.next_mut(db, base)?.scan.take())?;
    let zset = Key::open_bytes_untouched(ctx, base).filter(|z| z.kind() == KeyKind::Zset);
    let Some(zset) = zset else {
        state::with(|s| s.drop_next(db, base));
        return None;
    };
    let hi = state::with(|s| s.known_meta(db, base)).map_or(excluded, |meta| meta.hi);
    let mut batch = Vec::new();
    let mut values = Vec::new();
    loop {
        batch.clear();
        values.clear();
        let more = match &mut scan {
            NextScan::Slots { index, cursor } => {
                let other = Key::open_bytes_untouched(ctx, &slot_key(base, *index))
                    .filter(|other| other.kind() == KeyKind::Hash);
                let more = match &other {
                    Some(other) => cursor.step(other, &mut batch),
                    None => false,
                };
                for (member, _) in &batch {
                    values.push(value_of(&zset, slot, member, None));
                }
                if more {
                    true
                } else {
                    *index = index.saturating_add(1);
                    *cursor = HashCursor::new();
                    *index <= hi
                }
            }
            NextScan::Totals(cursor) => {
                let more = cursor.step(&zset, &mut batch);
                for (member, _) in &batch {
                    values.push(value_of(&zset, slot, member, None));
                }
                more
            }
            NextScan::Excluded(cursor) => {
                let more = cursor.step(slot, &mut batch);
                for (member, count) in &batch {
                    let count = parse_i64(count).unwrap_or(0).max(0);
                    values.push(value_of(&zset, slot, member, Some(count)));
                }
                more
            }
        };
        state::with(|s| {
            if let Some(next) = s.next_mut(db, base) {
                for ((member, _), &value) in batch.iter().zip(&values) {
                    next.totals.set(member, value);
                }
            }
        });
        if !more {
            return None;
        }
        if monotonic_us() >= deadline_us {
            state::with(|s| {
                if let Some(next) = s.next_mut(db, base) {
                    if next.excluded == excluded {
                        next.scan = Some(scan);
                    }
                }
            });
            return Some(Visit::Unfinished);
        }
    }
}

/// After a write to the board at `base` (slot `index` now holds `members`, each with its
/// new count and total): the new values of its next totals, if it has them; else, when
/// the write made the board's oldest slot large, asks the timer for them. Returns true if
/// the timer should visit the board.
pub(super) fn follow_write<'a>(
    ctx: &Context,
    db: c_int,
    base: &[u8],
    meta: &Meta,
    (index, slot_len): (i64, usize),
    members: impl Iterator<Item = (&'a RStr, &'a [u8], i64, i64)>,
) -> bool {
    let Some(excluded) = state::with(|s| s.next(db, base).map(|next| next.excluded)) else {
        return index == meta.lo && slot_len > BIG_SLOT;
    };
    let slot = match excluded == index {
        true => None,
        false => Key::open_bytes_untouched(ctx, &slot_key(base, excluded)),
    };
    let values: Vec<(&[u8], i64)> = members
        .map(|(member, bytes, count, total)| {
            let left_out = match &slot {
                None if excluded == index => count,
                None => 0,
                Some(slot) => count_in(slot, member),
            };
            (bytes, total.saturating_sub(left_out))
        })
        .collect();
    state::with(|s| {
        if let Some(next) = s.next_mut(db, base) {
            for (member, value) in values {
                next.totals.set(member, value);
            }
        }
    });
    false
}

/// Dirty members settled between two looks at the clock.
const SETTLED_PER_STEP: usize = 64;

/// Sets the next value of each dirty member of the board (see [`Next`]) from the keys as
/// they are now: its total less its count in the excluded slot. O(dirty members); with a
/// deadline, stops once it has passed and answers false if some are left.
pub(super) fn settle(ctx: &Context, db: c_int, base: &[u8], deadline_us: Option<u64>) -> bool {
    loop {
        let taken = state::with(|s| {
            let next = s.next_mut(db, base)?;
            if next.dirty.is_empty() {
                return None;
            }
            let step = match deadline_us {
                Some(_) => SETTLED_PER_STEP,
                None => usize::MAX,
            };
            let members: Vec<Vec<u8>> = next.dirty.iter().take(step).cloned().collect();
            for member in &members {
                next.dirty.remove(member);
            }
            Some((next.excluded, members))
        });
        let Some((excluded, members)) = taken else {
            return true;
        };
        settle_members(ctx, db, base, excluded, members);
        if deadline_us.is_some_and(|deadline| monotonic_us() >= deadline) {
            return state::with(|s| s.next(db, base).is_none_or(|next| next.dirty.is_empty()));
        }
    }
}

/// Sets the next values of `members` of the board, which leave out slot `excluded`.
fn settle_members(ctx: &Context, db: c_int, base: &[u8], excluded: i64, members: Vec<Vec<u8>>) {
    let zset = Key::open_bytes_untouched(ctx, base).filter(|z| z.kind() == KeyKind::Zset);
    let slot = Key::open_bytes_untouched(ctx, &slot_key(base, excluded))
        .filter(|slot| slot.kind() == KeyKind::Hash);
    let values: Vec<(Vec<u8>, i64)> = members
        .into_iter()
        .map(|member| {
            let value = match (&zset, &slot, RStr::new(&member)) {
                (Some(zset), Some(slot), _) => value_of(zset, slot, &member, None),
                (Some(zset), None, Some(m)) => zset.zscore(&m).map_or(0, score_to_total),
                _ => 0,
            };
            (member, value)
        })
        .collect();
    state::with(|s| {
        if let Some(next) = s.next_mut(db, base) {
            if next.excluded == excluded {
                for (member, value) in &values {
                    next.totals.set(member, *value);
                }
            }
        }
    });
}
