//! Boards created with `CAPACITY k`: a Space-Saving summary per slot (Metwally, Agrawal and
//! El Abbadi), so a slot hash holds at most `k` members whatever the number of distinct
//! members written, and the board's keys O(k x slots).
//!
//! A write of `inc` to member `m` in slot `s`:
//! * `m` is in the slot: its count grows by `inc`, as on an exact board;
//! * `m` is not, and the slot holds fewer than `k` members: `m` enters with `e_s + inc`;
//! * the slot is full: the member with the smallest count `c` (ties: the smallest name)
//!   leaves the slot, its count leaves its window total, `e_s` becomes `c`, and `m` enters
//!   with `e_s + inc`.
//!
//! `e_s`, the slot's error, is the largest count evicted from the slot (0 while it never
//! evicted, and then the slot is exact). Counts only grow and an entering member gets more
//! than the minimum, so the minimum never falls and `e_s` is the last evicted count. The
//! `k` counts of a full slot sum to `N_s` (the increments written into it, each eviction
//! moves the count it removes onto the member that enters), so `e_s <= N_s / k`. A member
//! in the slot has `true_s <= count <= true_s + e_s`, a member not in it `true_s <= e_s`.
//! Over the live slots of a window, with `error = sum of e_s <= N / k`: every estimate is
//! within `error` of the true total, and a member whose true total exceeds `error` has a
//! positive estimate, so it is listed. A member entering a slot that is not full after
//! evictions (a `REM` made room) enters with `e_s + inc` too, which keeps `count >= true_s`.
//!
//! Why Space-Saving per slot: its bound needs no randomness and no tuning, its summary of a
//! slot is exactly what a slot hash stores (member -> count, read by every command as on an
//! exact board), and slots drain, replicate and persist as exact ones do. The window's
//! error is the sum of the slots' errors, stored beside the settings; measurements of it
//! against RedisBloom's TOPK are in BENCHMARKS.md.
//!
//! Finding the minimum needs the slot's members in count order. A slot hash has no order,
//! and a sorted set beside every slot hash would double what the board stores; the order
//! lives in memory instead ([`SlotOrder`], one per board: the slot written last), built
//! empty with a new slot and followed by every write, so a write costs O(log k). Only a
//! write that finds no order for a slot that already has members (after a restart, a
//! failover, a native edit, a write `AT` an older slot) reads the slot once to build it.
//!
//! Owns: the summary's arithmetic and its order. May not touch: Redis (pure).

use std::collections::{BTreeSet, HashMap};
use std::os::raw::c_int;

use crate::error::{Error, Result};

/// Bytes an entry of a [`SlotOrder`] costs besides its name: its place in the B-tree
/// (a count and a boxed name, 24 bytes, in nodes about two thirds full) and the name's
/// allocation header.
const ENTRY_BYTES: usize = 48;

/// The error a write with a negative increment gets on a board with `CAPACITY`.
pub fn positive_only() -> Error {
    Error::Invalid("a board with CAPACITY takes only positive increments".into())
}

/// The members of one slot in count order, for Space-Saving's eviction, and the slot's
/// error (the largest count evicted from it).
#[derive(Debug, Default)]
pub struct SlotOrder {
    /// The slot's index.
    pub index: i64,
    /// The slot's error `e_s`.
    pub error: i64,
    by_count: BTreeSet<(i64, Box<[u8]>)>,
    names: usize,
}

impl SlotOrder {
    /// The order of an empty slot whose error is `error`.
    pub fn new(index: i64, error: i64) -> SlotOrder {
        SlotOrder {
            index,
            error,
            ..SlotOrder::default()
        }
    }

    /// The order of a slot holding `counts` (`(member, count)`; counts below 1, a user's
    /// edits, are left out as reads leave them out).
    pub fn from_counts<'a>(
        index: i64,
        error: i64,
        counts: impl IntoIterator<Item = (&'a [u8], i64)>,
    ) -> SlotOrder {
        let mut order = SlotOrder::new(index, error);
        for (member, count) in counts {
            order.set(member, 0, count);
        }
        order
    }

    /// Members in the order.
    pub fn len(&self) -> usize {
        self.by_count.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_count.is_empty()
    }

    /// The member with the smallest count (ties: the smallest name), and its count.
    pub fn min(&self) -> Option<(i64, &[u8])> {
        self.by_count.first().map(|(count, name)| (*count, &**name))
    }

    /// `member`'s count goes from `old` to `new` (0: not in the slot).
    pub fn set(&mut self, member: &[u8], old: i64, new: i64) {
        if old > 0 {
            let key = (old, Box::<[u8]>::from(member));
            if self.by_count.remove(&key) {
                self.names -= member.len();
            }
        }
        if new > 0 && self.by_count.insert((new, member.into())) {
            self.names += member.len();
        }
    }

    /// Estimated bytes held.
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.names + self.by_count.len() * ENTRY_BYTES
    }
}

/// Who an increment of a [`Plan`] is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The member of the command's pair at this position (its reply is the command's).
    Pair(usize),
    /// A member evicted from the slot (the increment is minus its count).
    Evicted(Box<[u8]>),
}

/// What a write to a slot of a board with `CAPACITY` does: the increments to apply in
/// order (a pair's member gets its increment, or `e_s + inc` when it enters the slot; an
/// evicted member loses its whole count), and the slot's error after them.
#[derive(Debug, PartialEq, Eq)]
pub struct Plan {
    pub increments: Vec<(i64, Target)>,
    pub error: i64,
}

/// Plans the write of `pairs` (`(increment, member)`, increments positive) into the slot
/// whose members `order` holds in count order (it follows the plan), keeping at most
/// `capacity` members. `stored` answers a member's count in the slot before the write (0:
/// not there); it is asked once per member, and the counts it gives (not the order's) are
/// what an evicted member loses, so the slot hash and the totals stay consistent even
/// with an order that a user's edit made stale. `Err` (a non-positive increment, an
/// overflow) leaves `order` changed: the caller drops it.
pub fn plan_write(
    pairs: &[(i64, &[u8])],
    capacity: i64,
    order: &mut SlotOrder,
    mut stored: impl FnMut(&[u8]) -> i64,
) -> Result<Plan> {
    let capacity = usize::try_from(capacity.max(1)).unwrap_or(usize::MAX);
    // Each member's count as the write leaves it so far.
    let mut counts: HashMap<Box<[u8]>, i64> = HashMap::new();
    let mut increments = Vec::with_capacity(pairs.len());
    let mut error = order.error;
    for (position, &(increment, member)) in pairs.iter().enumerate() {
        if increment <= 0 {
            return Err(positive_only());
        }
        let count = count_of(&mut counts, member, &mut stored);
        if count > 0 {
            let new = count.checked_add(increment).ok_or(Error::Overflow)?;
            order.set(member, count, new);
            counts.insert(member.into(), new);
            increments.push((increment, Target::Pair(position)));
            continue;
        }
        while order.len() >= capacity {
            let Some((listed, victim)) = order.min() else {
                break;
            };
            let victim: Box<[u8]> = victim.into();
            order.set(&victim, listed, 0);
            let evicted = count_of(&mut counts, &victim, &mut stored);
            counts.insert(victim.clone(), 0);
            error = error.max(evicted);
            if evicted > 0 {
                increments.push((-evicted, Target::Evicted(victim)));
            }
        }
        let new = error.checked_add(increment).ok_or(Error::Overflow)?;
        order.set(member, 0, new);
        counts.insert(member.into(), new);
        increments.push((new, Target::Pair(position)));
    }
    order.error = error;
    Ok(Plan { increments, error })
}

/// The slot orders the server holds, one per board (the slot it wrote last), with their
/// bytes. A command takes a board's order out while it works on it and puts it back after
/// (nothing is borrowed across a call to the server).
#[derive(Debug, Default)]
pub struct Orders {
    by_board: HashMap<(c_int, Box<[u8]>), SlotOrder>,
    bytes: usize,
}

impl Orders {
    /// Takes the order held for board `base` of database `db`, if any.
    pub fn take(&mut self, db: c_int, base: &[u8]) -> Option<SlotOrder> {
        let key = (db, Box::<[u8]>::from(base));
        let order = self.by_board.remove(&key)?;
        self.bytes = self.bytes.saturating_sub(order.bytes() + base.len());
        Some(order)
    }

    /// Holds `order` for board `base` of database `db` (replacing any other).
    pub fn put(&mut self, db: c_int, base: &[u8], order: SlotOrder) {
        self.forget(db, base);
        self.bytes += order.bytes() + base.len();
        self.by_board.insert((db, base.into()), order);
    }

    /// Drops the order held for a board (its keys changed behind the order's back).
    pub fn forget(&mut self, db: c_int, base: &[u8]) {
        if !self.by_board.is_empty() {
            drop(self.take(db, base));
        }
    }

    /// Keeps the orders of the databases `keep` answers true for.
    pub fn retain_dbs(&mut self, keep: impl Fn(c_int) -> bool) {
        self.by_board.retain(|(db, _), _| keep(*db));
        self.bytes = (self.by_board.iter())
            .map(|((_, base), order)| order.bytes() + base.len())
            .sum();
    }

    /// Estimated bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// `member`'s count in the slot as the write leaves it so far (`stored` the first time).
fn count_of(
    counts: &mut HashMap<Box<[u8]>, i64>,
    member: &[u8],
    stored: &mut impl FnMut(&[u8]) -> i64,
) -> i64 {
    if let Some(&count) = counts.get(member) {
        return count;
    }
    let count = stored(member).max(0);
    counts.insert(member.into(), count);
    count
}

/// The error of a window: the sum of its live slots' errors (saturating; each is at most
/// the increments written into its slot over `k`).
pub fn window_error(slot_errors: impl IntoIterator<Item = i64>) -> i64 {
    slot_errors
        .into_iter()
        .map(|e| e.max(0))
        .fold(0, i64::saturating_add)
}

#[cfg(test)]
mod tests;
