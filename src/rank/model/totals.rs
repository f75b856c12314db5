//! Window totals of a quarantined board computed from its slot hashes, built and sorted
//! in steps of bounded work. Pure: no Redis imports.

use std::collections::{hash_map, HashMap};
use std::rc::Rc;

use crate::args::parse_i64;

use std::cmp::Ordering;

use super::order::ahead;

/// A member name shared by the lists of computed [`Totals`].
pub type Member = Rc<[u8]>;

/// Window totals computed from slot hashes (a quarantined board's), by member and in
/// leaderboard order, so SCORE, TOP, RANK and INFO answer from them without a pass over
/// every member. Built by a [`TotalsBuilder`], in steps of bounded work.
#[derive(Debug, Default)]
pub struct Totals {
    index: HashMap<Member, usize>,
    /// `(member, total)` in the order first seen; every total is positive.
    entries: Vec<(Member, i64)>,
    /// Positions in `entries`, in leaderboard order (plain integers: a pass of the
    /// ordering copies and drops no member).
    order: Vec<u32>,
    /// Bytes of the member names (each allocated once, shared by `index` and `entries`).
    member_bytes: usize,
    /// The index being freed in steps (see [`Totals::free_step`]).
    freeing: Option<hash_map::IntoIter<Member, usize>>,
}

impl Totals {
    /// `member`'s total (0 if absent).
    pub fn get(&self, member: &[u8]) -> i64 {
        self.index
            .get(member)
            .and_then(|&i| self.entries.get(i))
            .map_or(0, |(_, total)| *total)
    }

    /// Number of members (every total is positive).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes held (an estimate: allocations, their headers and the index's slack).
    pub fn bytes(&self) -> usize {
        let index_entry = std::mem::size_of::<(Member, usize)>() + 1;
        let freeing = self.freeing.as_ref().map_or(0, ExactSizeIterator::len);
        (self.index.capacity() + freeing) * index_entry
            + self.entries.capacity() * std::mem::size_of::<(Member, i64)>()
            + self.order.capacity() * std::mem::size_of::<u32>()
            // Each name's allocation: the bytes and the two reference counts.
            + self.member_bytes
            + self.entries.len() * 2 * std::mem::size_of::<usize>()
    }

    /// Frees about `work` members' worth of memory; true once nothing is left. Freeing a
    /// million members at once would hold the server for tens of milliseconds.
    pub fn free_step(&mut self, work: usize) -> bool {
        let work = work.max(1);
        // The order holds plain integers: one allocation.
        self.order = Vec::new();
        // The index's names first (each step drops `work` of them: a scan of the whole
        // table per step would cost O(members) each time), then the entries, whose names
        // are then the last references.
        if self.freeing.is_none() && !self.index.is_empty() {
            self.freeing = Some(std::mem::take(&mut self.index).into_iter());
        }
        if let Some(freeing) = &mut self.freeing {
            if freeing.by_ref().take(work).count() == work && freeing.len() > 0 {
                return false;
            }
            self.freeing = None;
            return false;
        }
        if !self.entries.is_empty() {
            self.entries
                .truncate(self.entries.len().saturating_sub(work));
            return false;
        }
        *self = Totals::default();
        true
    }

    /// Every `(member, total)` in the order first summed (before ordering, or without it).
    pub fn rows(&self) -> impl Iterator<Item = (&[u8], i64)> {
        self.entries
            .iter()
            .map(|(member, total)| (&member[..], *total))
    }

    /// At most `count` rows from `offset`, in leaderboard order.
    pub fn top(&self, offset: usize, count: usize) -> impl Iterator<Item = (&[u8], i64)> {
        let start = offset.min(self.order.len());
        let end = start.saturating_add(count).min(self.order.len());
        let rows = self.order.get(start..end).unwrap_or_default();
        rows.iter().filter_map(|&i| self.row(i))
    }

    /// How many members rank ahead of `(total, member)` (binary search of the order).
    pub fn rank(&self, total: i64, member: &[u8]) -> usize {
        self.order.partition_point(|&i| {
            self.row(i)
                .is_some_and(|(m, t)| ahead((t, m), (total, member)) == Ordering::Greater)
        })
    }

    /// How many members have a total strictly higher than `total` (TSRANK.RANK ... TIES,
    /// binary search of the order).
    pub fn above(&self, total: i64) -> usize {
        let total_at = |at: usize| {
            let i = *self.order.get(at)?;
            self.row(i).map(|(_, t)| t)
        };
        super::around::above_in(self.order.len(), total_at, total)
    }

    fn row(&self, i: u32) -> Option<(&[u8], i64)> {
        let (member, total) = self.entries.get(i as usize)?;
        Some((member, *total))
    }
}

/// Sums slot hash fields into [`Totals`], then orders them in steps.
#[derive(Debug, Default)]
pub struct TotalsBuilder {
    totals: Totals,
    sort: SteppedSort,
}

impl TotalsBuilder {
    pub fn new() -> TotalsBuilder {
        TotalsBuilder::default()
    }

    /// A builder with room for `members` (growing a large table later rehashes it all in
    /// one step).
    pub fn with_capacity(members: usize) -> TotalsBuilder {
        let mut builder = TotalsBuilder::default();
        builder.totals.index.reserve(members);
        builder.totals.entries.reserve(members);
        builder
    }

    /// Adds one slot hash field: values that are not positive integers (a user's edits)
    /// count as nothing.
    pub fn add(&mut self, member: &[u8], count: &[u8]) {
        let Ok(count @ 1..) = parse_i64(count) else {
            return;
        };
        let totals = &mut self.totals;
        match totals
            .index
            .get(member)
            .and_then(|&i| totals.entries.get_mut(i))
        {
            Some((_, total)) => *total = total.saturating_add(count),
            None => {
                totals.member_bytes += member.len();
                let member: Member = Rc::from(member);
                totals
                    .index
                    .insert(Rc::clone(&member), totals.entries.len());
                totals.entries.push((member, count));
            }
        }
    }

    /// Orders the totals with about `work` element moves; true when they are ordered.
    /// Call only once every field is added.
    pub fn order_step(&mut self, work: usize) -> bool {
        let totals = &self.totals;
        // Leaderboard order of two positions in `entries`: the row ahead comes first.
        let order = |a: u32, b: u32| match (totals.row(a), totals.row(b)) {
            (Some((ma, ta)), Some((mb, tb))) => ahead((tb, mb), (ta, ma)),
            _ => a.cmp(&b),
        };
        self.sort.step(totals.entries.len(), work, order)
    }

    /// Bytes held (see [`Totals::bytes`]), with the ordering's work space.
    pub fn bytes(&self) -> usize {
        self.totals.bytes() + self.sort.bytes()
    }

    /// The totals summed so far, unordered (to free them in steps).
    pub fn abandon(self) -> Totals {
        self.totals
    }

    /// The totals, ordered (what [`TotalsBuilder::order_step`] left is done at once).
    pub fn finish(mut self) -> Totals {
        while !self.order_step(usize::MAX) {}
        self.totals.order = self.sort.into_sorted();
        self.totals
    }
}

/// Rows sorted first in runs of this many (each run in one go), then merged.
const SORT_RUN: usize = 128;

/// A stable merge sort of the positions `0 .. len` of some rows, done in steps of bounded
/// work (a timer tick may not sort a million rows at once): runs of [`SORT_RUN`]
/// positions are sorted, then merged pairwise, pass after pass, resuming where the last
/// step stopped.
#[derive(Debug)]
pub struct SteppedSort {
    items: Vec<u32>,
    out: Vec<u32>,
    /// Positions listed (and sorted in runs) so far.
    listed: usize,
    /// Length of the sorted runs the current pass merges.
    run: usize,
    /// Start of the pair of runs being merged, and the merge's positions in each.
    pos: usize,
    left: usize,
    right: usize,
    merging_pair: bool,
}

impl Default for SteppedSort {
    fn default() -> Self {
        SteppedSort {
            items: Vec::new(),
            out: Vec::new(),
            listed: 0,
            run: SORT_RUN,
            pos: 0,
            left: 0,
            right: 0,
            merging_pair: false,
        }
    }
}

impl SteppedSort {
    /// Sorts the positions `0 .. len` (the same `len` at every step) by `cmp` with about
    /// `work` element moves; true when done. Rows past `u32::MAX` are left out.
    pub fn step(&mut self, len: usize, work: usize, cmp: impl Fn(u32, u32) -> Ordering) -> bool {
        let len = len.min(u32::MAX as usize);
        let mut budget = work.max(1);
        if self.listed == 0 {
            // Room for every row at once: growing a large vector copies it all in one step.
            self.items.reserve(len);
            self.out.reserve(len);
        }
        while self.listed < len {
            if budget == 0 {
                return false;
            }
            let end = self.listed.saturating_add(SORT_RUN).min(len);
            let start = self.items.len();
            self.items.extend((self.listed..end).map(|i| i as u32));
            if let Some(run) = self.items.get_mut(start..) {
                run.sort_by(|&a, &b| cmp(a, b));
            }
            budget = budget.saturating_sub(end - self.listed);
            self.listed = end;
        }
        let n = self.items.len();
        while self.run < n {
            if budget == 0 {
                return false;
            }
            if self.pos >= n {
                // A pass is done: its output holds runs twice as long.
                std::mem::swap(&mut self.items, &mut self.out);
                self.out.clear();
                self.run = self.run.saturating_mul(2);
                self.pos = 0;
                continue;
            }
            let mid = self.pos.saturating_add(self.run).min(n);
            let hi = mid.saturating_add(self.run).min(n);
            if !self.merging_pair {
                (self.left, self.right, self.merging_pair) = (self.pos, mid, true);
            }
            while budget > 0 && (self.left < mid || self.right < hi) {
                let l = self
                    .items
                    .get(self.left)
                    .copied()
                    .filter(|_| self.left < mid);
                let r = self
                    .items
                    .get(self.right)
                    .copied()
                    .filter(|_| self.right < hi);
                let row = match (l, r) {
                    (Some(l), Some(r)) if cmp(l, r) != Ordering::Greater => {
                        self.left += 1;
                        l
                    }
                    (_, Some(r)) => {
                        self.right += 1;
                        r
                    }
                    (Some(l), None) => {
                        self.left += 1;
                        l
                    }
                    (None, None) => break,
                };
                self.out.push(row);
                budget -= 1;
            }
            if self.left >= mid && self.right >= hi {
                self.pos = hi;
                self.merging_pair = false;
            }
        }
        true
    }

    /// Bytes held by the positions being sorted.
    pub fn bytes(&self) -> usize {
        (self.items.capacity() + self.out.capacity()) * std::mem::size_of::<u32>()
    }

    /// The sorted positions (call once [`SteppedSort::step`] returned true).
    pub fn into_sorted(self) -> Vec<u32> {
        self.items
    }
}
