//! The totals of a board without its oldest slot, ready before that slot leaves the window,
//! so that no read subtracts a large slot member by member (see `memory::Next`).
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
//! flushes, SWAPDB, loads and the removal of the board (`memory`). They live in memory: a
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

use crate::expiry::Visit;
use crate::host::server::monotonic_us;
use crate::host::store::scan::HashCursor;
use crate::host::store::{Key, KeyKind, RStr};
use crate::rank::model::{
    fill_step, next_value, score_to_total, slot_key, value_after_write, Meta, NextSource, RankedSet,
};

use super::memory::{self, Next, NextScan};
use super::slots::count_in;

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

/// A board's keys as its next totals read them (`crate::rank::model::NextSource`): the sorted
/// set, the excluded slot hash, the others opened by name; all read-only, without
/// touching their LRU/LFU clock.
struct NextKeys<'a> {
    ctx: &'a Context,
    base: &'a [u8],
    zset: Option<&'a Key>,
    excluded: (i64, Option<&'a Key>),
}

impl NextSource for NextKeys<'_> {
    type Cursor = HashCursor;

    fn new_cursor(&self) -> HashCursor {
        HashCursor::new()
    }

    fn scan_totals(&mut self, cursor: &mut HashCursor, out: &mut Vec<(Vec<u8>, Vec<u8>)>) -> bool {
        self.zset.is_some_and(|zset| cursor.step(zset, out))
    }

    fn scan_slot(
        &mut self,
        index: i64,
        cursor: &mut HashCursor,
        out: &mut Vec<(Vec<u8>, Vec<u8>)>,
    ) -> bool {
        if let (excluded, Some(slot)) = self.excluded {
            if excluded == index {
                return cursor.step(slot, out);
            }
        }
        let slot = Key::open_bytes_untouched(self.ctx, &slot_key(self.base, index));
        slot.filter(|slot| slot.kind() == KeyKind::Hash)
            .is_some_and(|slot| cursor.step(&slot, out))
    }

    fn total(&mut self, member: &[u8]) -> i64 {
        match (self.zset, RStr::new(member)) {
            (Some(zset), Some(m)) => zset.zscore(&m).map_or(0, score_to_total),
            _ => 0,
        }
    }

    fn excluded_count(&mut self, member: &[u8]) -> i64 {
        match (self.excluded.1, RStr::new(member)) {
            (Some(slot), Some(m)) => count_in(slot, &m),
            _ => 0,
        }
    }
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
        memory::nexts(|n| n.drop(db, base));
        return None;
    };
    let big = slot.len() > BIG_SLOT;
    let current = memory::nexts(|n| {
        n.get(db, base)
            .map(|next| (next.excluded, next.scan.is_none()))
    });
    match current {
        Some((excluded, _)) if excluded == oldest => {}
        // The slot they left out is subtracted and gone: they equal the sorted set, and
        // now leave out the next oldest slot.
        Some((excluded, true)) if big && excluded < oldest => memory::nexts(|n| {
            if let Some(next) = n.get_mut(db, base) {
                next.excluded = oldest;
                next.scan = Some(NextScan::Excluded(HashCursor::new()));
            }
        }),
        _ if big => {
            let scan = first_scan(ctx, base, meta, oldest);
            memory::nexts(|n| {
                n.drop(db, base);
                let next = Next {
                    excluded: oldest,
                    totals: RankedSet::default(),
                    scan: Some(scan),
                    dirty: HashSet::new(),
                };
                n.put(db, base, next);
            })
        }
        _ => {
            memory::nexts(|n| n.drop(db, base));
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
    let mut scan = memory::nexts(|n| n.get_mut(db, base)?.scan.take())?;
    let zset = Key::open_bytes_untouched(ctx, base).filter(|z| z.kind() == KeyKind::Zset);
    let Some(zset) = zset else {
        memory::nexts(|n| n.drop(db, base));
        return None;
    };
    let hi = memory::known(|k| k.get(db, base)).map_or(excluded, |meta| meta.hi);
    let mut keys = NextKeys {
        ctx,
        base,
        zset: Some(&zset),
        excluded: (excluded, Some(slot)),
    };
    let mut values = Vec::new();
    loop {
        values.clear();
        let more = fill_step(&mut keys, excluded, hi, &mut scan, &mut values);
        memory::nexts(|n| {
            if let Some(next) = n.get_mut(db, base) {
                for (member, value) in &values {
                    next.totals.set(member, *value);
                }
            }
        });
        if !more {
            return None;
        }
        if monotonic_us() >= deadline_us {
            memory::nexts(|n| {
                if let Some(next) = n.get_mut(db, base) {
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
    let Some(excluded) = memory::nexts(|n| n.get(db, base).map(|next| next.excluded)) else {
        return index == meta.lo && slot_len > BIG_SLOT;
    };
    let slot = match excluded == index {
        true => None,
        false => Key::open_bytes_untouched(ctx, &slot_key(base, excluded)),
    };
    let values: Vec<(&[u8], i64)> = members
        .map(|(member, bytes, count, total)| {
            let in_excluded = || slot.as_ref().map_or(0, |slot| count_in(slot, member));
            let value = value_after_write(excluded, index, (count, total), in_excluded);
            (bytes, value)
        })
        .collect();
    memory::nexts(|n| {
        if let Some(next) = n.get_mut(db, base) {
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
        let taken = memory::nexts(|n| {
            let next = n.get_mut(db, base)?;
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
            return memory::nexts(|n| n.get(db, base).is_none_or(|next| next.dirty.is_empty()));
        }
    }
}

/// Sets the next values of `members` of the board, which leave out slot `excluded`.
fn settle_members(ctx: &Context, db: c_int, base: &[u8], excluded: i64, members: Vec<Vec<u8>>) {
    let zset = Key::open_bytes_untouched(ctx, base).filter(|z| z.kind() == KeyKind::Zset);
    let slot = Key::open_bytes_untouched(ctx, &slot_key(base, excluded))
        .filter(|slot| slot.kind() == KeyKind::Hash);
    let mut keys = NextKeys {
        ctx,
        base,
        zset: zset.as_ref(),
        excluded: (excluded, slot.as_ref()),
    };
    let values: Vec<(Vec<u8>, i64)> = members
        .into_iter()
        .map(|member| {
            let value = next_value(&mut keys, &member);
            (member, value)
        })
        .collect();
    memory::nexts(|n| {
        if let Some(next) = n.get_mut(db, base) {
            if next.excluded == excluded {
                for (member, value) in &values {
                    next.totals.set(member, *value);
                }
            }
        }
    });
}
