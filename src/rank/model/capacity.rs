//! Boards created with `CAPACITY k`: a Space-Saving summary per slot (Metwally, Agrawal and
//! El Abbadi), so a slot hash holds at most `k` members whatever the number of distinct
//! members written (more for a while after a restart, see below), and the board's
//! keys O(k x slots).
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
//! lives in memory instead ([`SlotOrder`]), built empty with a new slot and followed by
//! every write, so a write costs O(log k).
//!
//! A slot that already has members and no order in memory (after a restart, a failover, a
//! native edit, a write `AT` a slot whose order was let go) is read by the write only if
//! it holds at most [`FILL_IN_WRITE`] fields; a larger one is never read whole inside a
//! command: at ~3 us a field, a slot of 100,000 members takes ~300 ms. The write starts an
//! empty order that is not complete ([`SlotOrder::building`]) and the timer fills it from
//! a saved scan of the slot hash, a bounded step per tick ([`SlotOrder::scanned`]; only on
//! a primary, which the timer alone acts on, and reading only, so nothing replicates); the
//! writes meanwhile put the members they write into it with their new counts, so once the
//! scan is done the order holds every member (a member present for the whole scan is
//! returned by it, a member written during it is put there by the write) with its stored
//! count (the scan reads the count of the moment, and every later change goes through a
//! write or a `REM`, which follow the order). Until then the slot evicts nothing: a
//! member that is not in it enters with `e_s + inc` whatever the number of members, so the
//! slot may hold more than `k` members for a while. Once the order is complete, every
//! write to a slot above `k` evicts up to [`SHRINK_PER_WRITE`] minimums more than it needs,
//! so the slot comes back down to `k` within one write per [`SHRINK_PER_WRITE`] extra
//! members (each eviction replicated as the write's effects); a slot no one writes again
//! keeps its extra members until it leaves the window. The extra members are at most the
//! distinct newcomers written before the scan completes: k = 100,000 takes ~300 ms of
//! timer work, spread over ticks of `tally.expire-budget-us`.
//!
//! The guarantees hold through that phase. Let `m` be the slot's members, `S` the sum of
//! their counts, `N_s` the increments written into the slot. Every count present is at
//! least `e_s` (an entering member gets more, and `e_s` only rises to a minimum), and
//! `S <= N_s + (m - k) * e_s` (`m - k` may be negative; while `e_s = 0`, `S <= N_s`):
//! * an increment of a present member adds `inc` to `S` and to `N_s`;
//! * a member entering without eviction adds `e_s + inc` to `S`, `inc` to `N_s` and one to
//!   `m`, so `e_s` to the right side;
//! * an eviction, only while `m >= k`, removes the minimum `c >= e_s` and `e_s` becomes
//!   `c`: `S - c <= N_s + (m - k) * c - c = N_s + (m - 1 - k) * c`;
//! * a `REM` removes a count of at least `e_s` and one member.
//!
//! So the minimum evicted is at most `S / m <= (N_s + (m - k) * e_s) / m`, which is at most
//! `N_s / k` when `e_s <= N_s / k`: `e_s <= N_s / k` always. An entering member's count is
//! `e_s + inc` and its true count at most `e_s + inc` (it had at most `e_s` while absent:
//! evicted with a count at least its true count, which then became `e_s`), so a present
//! member has `true_s <= count <= true_s + e_s` and an absent one `true_s <= e_s`, as in
//! the classic summary. Entering with `inc` alone (keeping `S = N_s`) would not do: a
//! member that had `e_s` while absent would be under by up to `e_s`, evicted later with
//! its count it would be absent with a true count up to twice `e_s`, and each such round
//! adds to the gap (the brute-force test with orders dropped at random fails with it).
//!
//! The orders are kept per written slot, at most [`ORDERS_PER_BOARD`] per board (the
//! slot of the moment and one more, so writes alternating between two slots, a backfill
//! `AT` an older one, keep both): O(k) each, ~60 bytes a member besides its name, counted
//! in `INFO tally`'s memory: per board at most two times `k` plus a filling slot's extra
//! members; an order let go is freed by the timer in steps, as discarded totals are.
//! They are state the family needs to evict in bounded time,
//! not a cache held to `tally.cache-max-memory`: a board with `CAPACITY k` needs them
//! as its keys need their O(k) members per slot.
//!
//! Owns: the summary's arithmetic and its order. May not touch: Redis (pure).

use std::collections::{BTreeSet, HashMap};
use std::os::raw::c_int;

use crate::error::{Error, Result};

use super::discarded::{Discarded, FreedInSteps};

/// Bytes an entry of a [`SlotOrder`] costs besides its name: its place in the B-tree
/// (a count and a boxed name, 24 bytes, in nodes about two thirds full) and the name's
/// allocation header.
const ENTRY_BYTES: usize = 48;

/// Members a write may read from a slot hash to build its order itself (~3 us a field, so
/// under half a millisecond; a hash this small is also read by one step of a scan): a
/// small slot keeps the exact Space-Saving behaviour, a larger one is filled by the timer.
pub const FILL_IN_WRITE: usize = 128;

/// Orders kept per board: the slot written last and one more.
pub const ORDERS_PER_BOARD: usize = 2;

/// Minimums a write evicts beyond the ones it needs from a slot above `k` (see the module
/// doc), each a few microseconds.
pub const SHRINK_PER_WRITE: usize = 4;

/// The error a write with a negative increment gets on a board with `CAPACITY`.
pub fn positive_only() -> Error {
    Error::Invalid("a board with CAPACITY takes only positive increments".into())
}

/// The members of one slot in count order, for Space-Saving's eviction, and the slot's
/// error (the largest count evicted from it).
#[derive(Debug)]
pub struct SlotOrder {
    /// The slot's index.
    pub index: i64,
    /// The slot's error `e_s`.
    pub error: i64,
    by_count: BTreeSet<(i64, Box<[u8]>)>,
    names: usize,
    /// Whether every member of the slot is here (else the timer's scan is filling it).
    complete: bool,
    /// Fields of the slot hash that are not members (values that are not positive
    /// integers, a user's edits), as counted when the order was completed.
    others: usize,
}

impl SlotOrder {
    /// The order of an empty slot whose error is `error`.
    pub fn new(index: i64, error: i64) -> SlotOrder {
        SlotOrder {
            index,
            error,
            by_count: BTreeSet::new(),
            names: 0,
            complete: true,
            others: 0,
        }
    }

    /// The order of a slot that has members none of which it holds yet: writes put theirs
    /// in, the timer's scan the others ([`SlotOrder::scanned`]); until the scan is done
    /// ([`SlotOrder::scan_done`]) the slot evicts nothing.
    pub fn building(index: i64, error: i64) -> SlotOrder {
        SlotOrder {
            complete: false,
            ..SlotOrder::new(index, error)
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

    /// Whether the order holds every member of its slot.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Fields of the slot hash a scan step returned (`(member, value)`, the values of the
    /// moment). A member the order holds already has the same count (writes keep it
    /// current), so it is not added twice; values that are not positive integers are left
    /// out as reads leave them out.
    pub fn scanned(&mut self, batch: &[(Vec<u8>, Vec<u8>)]) {
        for (member, value) in batch {
            if let Ok(count @ 1..) = crate::args::parse_i64(value) {
                if self.by_count.insert((count, member[..].into())) {
                    self.names += member.len();
                }
            }
        }
    }

    /// The scan of the slot hash is done: the order holds every member, and the hash
    /// holds `fields` fields now (those that are not members are noted, so that
    /// [`SlotOrder::fields`] can be checked against the hash's length).
    pub fn scan_done(&mut self, fields: usize) {
        self.complete = true;
        self.others = fields.saturating_sub(self.len());
    }

    /// The fields the slot hash should hold: the members, and the fields that are not
    /// members seen when the order was completed. A write that finds another length (a
    /// change the order missed) lets the order go.
    pub fn fields(&self) -> usize {
        self.len().saturating_add(self.others)
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

impl FreedInSteps for SlotOrder {
    fn is_empty(&self) -> bool {
        SlotOrder::is_empty(self)
    }
    fn bytes(&self) -> usize {
        SlotOrder::bytes(self)
    }
    fn free_step(&mut self, work: usize) -> bool {
        for _ in 0..work {
            let Some((_, name)) = self.by_count.pop_last() else {
                break;
            };
            self.names -= name.len();
        }
        self.by_count.is_empty()
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
/// `capacity` members once the order is complete: a slot above `capacity` first loses up
/// to [`SHRINK_PER_WRITE`] minimums, then each member entering a slot of `capacity` or
/// more evicts one. With an order not complete nothing is evicted (see the module doc).
/// `stored` answers a member's count in the slot before the write (0: not there); it is
/// asked once per member, and the counts it gives (not the order's) are what an evicted
/// member loses, so the slot hash and the totals stay consistent even with an order that
/// a user's edit made stale. `Err` (a non-positive increment, an overflow) leaves `order`
/// changed: the caller drops it.
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
    if pairs.iter().any(|&(increment, _)| increment <= 0) {
        return Err(positive_only());
    }
    if order.complete {
        let extra = order.len().saturating_sub(capacity).min(SHRINK_PER_WRITE);
        for _ in 0..extra {
            evict_min(order, &mut counts, &mut stored, &mut error, &mut increments);
        }
    }
    for (position, &(increment, member)) in pairs.iter().enumerate() {
        let count = count_of(&mut counts, member, &mut stored);
        if count > 0 {
            let new = count.checked_add(increment).ok_or(Error::Overflow)?;
            order.set(member, count, new);
            counts.insert(member.into(), new);
            increments.push((increment, Target::Pair(position)));
            continue;
        }
        if order.complete && order.len() >= capacity {
            evict_min(order, &mut counts, &mut stored, &mut error, &mut increments);
        }
        let new = error.checked_add(increment).ok_or(Error::Overflow)?;
        order.set(member, 0, new);
        counts.insert(member.into(), new);
        increments.push((new, Target::Pair(position)));
    }
    order.error = error;
    Ok(Plan { increments, error })
}

/// Evicts the order's minimum (if any): it loses its stored count, which becomes the
/// error if larger.
fn evict_min(
    order: &mut SlotOrder,
    counts: &mut HashMap<Box<[u8]>, i64>,
    stored: &mut impl FnMut(&[u8]) -> i64,
    error: &mut i64,
    increments: &mut Vec<(i64, Target)>,
) {
    let Some((listed, victim)) = order.min() else {
        return;
    };
    let victim: Box<[u8]> = victim.into();
    order.set(&victim, listed, 0);
    let evicted = count_of(counts, &victim, stored);
    counts.insert(victim.clone(), 0);
    *error = (*error).max(evicted);
    if evicted > 0 {
        increments.push((-evicted, Target::Evicted(victim)));
    }
}

/// A slot's order as the server holds it, with the saved scan `C` of its slot hash while
/// the timer fills it.
#[derive(Debug)]
pub struct Held<C> {
    pub order: SlotOrder,
    pub scan: Option<C>,
}

impl<C> Held<C> {
    pub fn new(order: SlotOrder) -> Held<C> {
        Held { order, scan: None }
    }

    fn bytes(&self, base: &[u8]) -> usize {
        self.order.bytes() + std::mem::size_of::<C>() + base.len()
    }
}

/// A board: its database and its name.
type BoardKey = (c_int, Box<[u8]>);

/// The slot orders the server holds, up to [`ORDERS_PER_BOARD`] per board (the slots it
/// wrote last), with their bytes. A command takes an order out while it works on it and
/// puts it back after (nothing is borrowed across a call to the server). An order let go
/// is freed by the timer in steps (dropping 100,000 members at once takes 4-8 ms).
pub struct Orders<C> {
    /// A board's orders, the one written last at the end.
    by_board: HashMap<BoardKey, Vec<Held<C>>>,
    bytes: usize,
    discarded: Discarded<SlotOrder>,
}

impl<C> Default for Orders<C> {
    fn default() -> Self {
        Orders {
            by_board: HashMap::new(),
            bytes: 0,
            discarded: Discarded::default(),
        }
    }
}

impl<C> Orders<C> {
    /// Takes the order held for slot `index` of board `base` of database `db`, if any.
    pub fn take(&mut self, db: c_int, base: &[u8], index: i64) -> Option<Held<C>> {
        let key = (db, Box::<[u8]>::from(base));
        let held = self.by_board.get_mut(&key)?;
        let at = held.iter().position(|h| h.order.index == index)?;
        let taken = held.remove(at);
        if held.is_empty() {
            self.by_board.remove(&key);
        }
        self.bytes = self.bytes.saturating_sub(taken.bytes(base));
        Some(taken)
    }

    /// Holds `held` for its slot of board `base` of database `db`, as the one written last
    /// (replacing one of the same slot; the board's oldest goes beyond
    /// [`ORDERS_PER_BOARD`]).
    pub fn put(&mut self, db: c_int, base: &[u8], held: Held<C>) {
        if let Some(replaced) = self.take(db, base, held.order.index) {
            self.discard(replaced.order);
        }
        let list = self.by_board.entry((db, base.into())).or_default();
        self.bytes += held.bytes(base);
        list.push(held);
        while list.len() > ORDERS_PER_BOARD {
            let oldest = list.remove(0);
            self.bytes = self.bytes.saturating_sub(oldest.bytes(base));
            self.discarded.push(oldest.order);
        }
    }

    /// Lets `order` go: the timer frees it in steps.
    pub fn discard(&mut self, order: SlotOrder) {
        self.discarded.push(order);
    }

    /// Whether orders let go are still to be freed.
    pub fn has_discarded(&self) -> bool {
        !self.discarded.is_empty()
    }

    /// Frees orders let go, about `work` members' worth.
    pub fn free_discarded(&mut self, work: usize) {
        self.discarded.free_step(work);
    }

    /// Takes every order held for a board, the one written last at the end.
    pub fn take_all(&mut self, db: c_int, base: &[u8]) -> Vec<Held<C>> {
        if self.by_board.is_empty() {
            return Vec::new();
        }
        let taken = (self.by_board.remove(&(db, Box::<[u8]>::from(base)))).unwrap_or_default();
        let bytes: usize = taken.iter().map(|h| h.bytes(base)).sum();
        self.bytes = self.bytes.saturating_sub(bytes);
        taken
    }

    /// Puts back what [`Orders::take_all`] took, in the same order (before any put since).
    pub fn put_all(&mut self, db: c_int, base: &[u8], taken: Vec<Held<C>>) {
        let since = self.take_all(db, base);
        for held in taken.into_iter().chain(since) {
            self.put(db, base, held);
        }
    }

    /// The slot index of an order of the board that the timer is filling, if any.
    pub fn building(&self, db: c_int, base: &[u8]) -> Option<i64> {
        let held = self.by_board.get(&(db, Box::<[u8]>::from(base)))?;
        (held.iter())
            .find(|h| !h.order.is_complete())
            .map(|h| h.order.index)
    }

    /// Drops the orders held for a board (its keys changed behind the orders' back).
    pub fn forget(&mut self, db: c_int, base: &[u8]) {
        for held in self.take_all(db, base) {
            self.discard(held.order);
        }
    }

    /// Keeps the orders of the databases `keep` answers true for.
    pub fn retain_dbs(&mut self, keep: impl Fn(c_int) -> bool) {
        for ((db, base), held) in std::mem::take(&mut self.by_board) {
            match keep(db) {
                true => drop(self.by_board.insert((db, base), held)),
                false => held.into_iter().for_each(|h| self.discarded.push(h.order)),
            }
        }
        self.bytes = (self.by_board.iter())
            .flat_map(|((_, base), held)| held.iter().map(|h| h.bytes(base)))
            .sum();
    }

    /// Orders held (all boards).
    pub fn len(&self) -> usize {
        self.by_board.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.by_board.is_empty()
    }

    /// Estimated bytes held (orders let go included until freed).
    pub fn bytes(&self) -> usize {
        self.bytes + self.discarded.bytes()
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
