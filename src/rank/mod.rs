//! Pure leaderboard (TSRANK) logic. No Redis imports: settings and bookkeeping, names of
//! derived keys, and the ranking algorithms used while an expired slot is still being
//! subtracted. The command layer (`commands/rank/`) feeds these from native keys.
//!
//! Layout of one leaderboard `key` (all keys start with `key`, so a hash tag in `key`
//! keeps them in one cluster slot):
//! * `key`: a native sorted set of window totals (`ZREVRANGE key 0 9 WITHSCORES`);
//! * `key|meta`: a hash whose `_tally` field is `rank <window ms> <slot ms>` (the
//!   settings, never changed after CREATE) and whose `_slots` field is `<lo> <hi>`: the
//!   range of slot indexes that may still have a slot hash (`hi < lo`: none). Metas
//!   written before `_slots` existed hold all four numbers in `_tally` and no `_slots`
//!   ([`MetaLayout::FourNumberMarker`]): they load, and the next write of the range
//!   rewrites them in the current layout. Any other combination is not a leaderboard;
//! * `_edited` (present or not) on `key|meta`: the board is quarantined (see
//!   `commands/rank/events.rs`);
//! * `key|slot|<slot index>`: a hash `member -> count` of the events of one slot
//!   (slot index = slot start / slot length).
//!
//! Invariant: every existing slot hash has an index in the meta's `lo ..= hi`, and a slot
//! hash is created only where the meta hash is. So while a reshard splits a board between
//! two nodes, a slot index outside `lo ..= hi` has no hash on either node and may be
//! created; one inside that is missing may be on the other node (see `commands/rank/`).
//!
//! Exactness while an expiry is in progress: expiry subtracts a member's count from the
//! totals and removes the member from the expiring slot's hash in the same step. So at any
//! moment, what is not yet subtracted is exactly what remains in slot hashes that have
//! left the window ("pending" slots), and a member's window total is its sorted-set score
//! minus its counts in the pending slots.
//!
//! Owns: leaderboard arithmetic, key names and the meta's stored text. May not touch:
//! Redis (pure).

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::rc::Rc;

use crate::args::{format_duration, parse_i64, MAX_DURATION_MS};
use crate::error::{Error, Result};
use crate::inline_vec::InlineVec;
use crate::layout;
use crate::window::{first_kept, leaves_at, slot_index};

mod ranked;
pub use ranked::RankedSet;

/// Suffix of the meta hash name.
pub const META_SUFFIX: &[u8] = b"|meta";
/// Infix of slot hash names: `key|slot|<index>`.
pub const SLOT_INFIX: &[u8] = b"|slot|";
/// At most this many slots in a window.
pub const MAX_SLOTS: i64 = 10_000;
/// Totals are kept in sorted-set scores (doubles): integers are exact up to 2^53.
pub const MAX_TOTAL: i64 = 1 << 53;
/// A meta's `hi - lo` stays below this many windows. Every slot index in between may be
/// probed by a read, so a span that does not fit its window is not a leaderboard (a forged
/// `rank 10000 1 0 1000000` would make every TOP walk a million names). Tally never writes
/// one: a write that would stretch the span this far waits for expiry (TRYAGAIN).
pub const SPAN_WINDOWS: i64 = 2;

/// How a meta hash stored its settings and slot range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaLayout {
    /// `_tally` = `rank <window> <slot>`, `_slots` = `<lo> <hi>`.
    Current,
    /// `_tally` = `rank <window> <slot> <lo> <hi>` and no `_slots` (the first layout):
    /// still read; the next write of the range migrates it to [`MetaLayout::Current`].
    FourNumberMarker,
}

/// Settings and slot bookkeeping of one leaderboard, stored in its meta hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub window: i64,
    pub slot: i64,
    /// Every existing slot hash has an index in `lo ..= hi` (none when `hi < lo`).
    pub lo: i64,
    pub hi: i64,
}

/// Checks `WINDOW`/`SLOT` settings. Both are durations (at most [`MAX_DURATION_MS`]);
/// parsed arguments always are, a stored meta is checked again here.
pub fn validate_settings(window: i64, slot: i64) -> Result<()> {
    if let Some(too_long) = [window, slot].into_iter().find(|&d| d > MAX_DURATION_MS) {
        return Err(Error::InvalidDuration(format_duration(too_long)));
    }
    if window <= 0 || slot <= 0 || window % slot != 0 {
        return Err(Error::Invalid(
            "WINDOW must be a whole multiple of SLOT".into(),
        ));
    }
    if window / slot > MAX_SLOTS {
        return Err(Error::Invalid(format!(
            "WINDOW can hold at most {MAX_SLOTS} slots"
        )));
    }
    Ok(())
}

impl Meta {
    /// A new, empty leaderboard (settings must have been validated).
    pub fn new(window: i64, slot: i64) -> Meta {
        Meta {
            window,
            slot,
            lo: 0,
            hi: -1,
        }
    }

    /// Number of slots in the window.
    pub fn slots(&self) -> i64 {
        (self.window / self.slot.max(1)).max(1)
    }

    pub fn is_empty(&self) -> bool {
        self.hi < self.lo
    }

    /// Oldest slot index in the window at `now`.
    pub fn first_kept(&self, now: i64) -> i64 {
        first_kept(now, self.slot, self.slots())
    }

    /// Slot indexes that have left the window at `now` but may still have a slot hash
    /// (their counts are not fully subtracted yet): `lo ..= end`, if any.
    pub fn pending_range(&self, now: i64) -> Option<(i64, i64)> {
        let end = self.hi.min(self.first_kept(now).saturating_sub(1));
        (self.lo <= end).then_some((self.lo, end))
    }

    /// Slot indexes in the window at `now` that may have a slot hash.
    pub fn live_range(&self, now: i64) -> Option<(i64, i64)> {
        let start = self.lo.max(self.first_kept(now));
        let end = self.hi.min(slot_index(now, self.slot));
        (start <= end).then_some((start, end))
    }

    /// Records a write to slot `index`; true if the bookkeeping changed.
    pub fn note_write(&mut self, index: i64) -> bool {
        if self.is_empty() {
            self.lo = index;
            self.hi = index;
            return true;
        }
        let before = (self.lo, self.hi);
        self.lo = self.lo.min(index);
        self.hi = self.hi.max(index);
        before != (self.lo, self.hi)
    }

    /// True if the slot indexes `lo ..= hi` span less than [`SPAN_WINDOWS`] windows.
    pub fn span_fits(&self) -> bool {
        self.is_empty()
            || self.hi.saturating_sub(self.lo) < self.slots().saturating_mul(SPAN_WINDOWS)
    }

    /// When the oldest possibly existing slot leaves the window (`None`: no slot).
    pub fn next_due(&self) -> Option<i64> {
        (!self.is_empty()).then(|| leaves_at(self.lo, self.slot, self.slots()))
    }

    /// The `_tally` field's value: family and settings (never changes after CREATE).
    pub fn marker(&self) -> String {
        let settings = format!("{} {}", self.window, self.slot);
        layout::marker(layout::RANK, &settings)
    }

    /// The `_slots` field's value: the range of slot indexes that may have a slot hash.
    pub fn slots_value(&self) -> String {
        format!("{} {}", self.lo, self.hi)
    }

    /// A meta from the `_tally` value and the `_slots` value (if the field exists), and
    /// the layout they were stored in; `None` if they do not make a valid leaderboard
    /// meta (see the module comment: forged or garbage fields, a span that does not fit).
    pub fn from_fields(marker: &[u8], slots: Option<&[u8]>) -> Option<(Meta, MetaLayout)> {
        let settings = layout::settings_of(marker, layout::RANK)?.as_bytes();
        let (meta, layout) = match slots {
            Some(slots) => {
                let [window, slot] = numbers(settings)?;
                let [lo, hi] = numbers(slots)?;
                (
                    Meta {
                        window,
                        slot,
                        lo,
                        hi,
                    },
                    MetaLayout::Current,
                )
            }
            None => {
                let [window, slot, lo, hi] = numbers(settings)?;
                let meta = Meta {
                    window,
                    slot,
                    lo,
                    hi,
                };
                (meta, MetaLayout::FourNumberMarker)
            }
        };
        if validate_settings(meta.window, meta.slot).is_err() || !meta.span_fits() {
            return None;
        }
        Some((meta, layout))
    }

    /// Slot indexes among the latest `slots` slots of the window at `now` that may have a
    /// slot hash (`lo ..= hi`, never a slot that has left the window), if any.
    pub fn recent_range(&self, now: i64, slots: i64) -> Option<(i64, i64)> {
        let current = slot_index(now, self.slot);
        let start = current
            .saturating_sub(slots.saturating_sub(1))
            .max(self.lo)
            .max(self.first_kept(now));
        let end = current.min(self.hi);
        (slots > 0 && start <= end).then_some((start, end))
    }

    /// Number of slots in `TOP ... WINDOW dur`: a multiple of SLOT, at most WINDOW.
    pub fn sub_window_slots(&self, dur: i64) -> Result<i64> {
        if dur % self.slot != 0 || dur > self.window {
            return Err(Error::Invalid(
                "WINDOW must be a multiple of the leaderboard's SLOT, at most its WINDOW".into(),
            ));
        }
        Ok(dur / self.slot)
    }
}

/// Exactly `N` integers separated by single spaces.
fn numbers<const N: usize>(text: &[u8]) -> Option<[i64; N]> {
    let mut out = [0i64; N];
    let mut fields = text.split(|&b| b == b' ');
    for number in &mut out {
        *number = parse_i64(fields.next()?).ok()?;
    }
    fields.next().is_none().then_some(out)
}

/// A derived key's name, built on the stack when short (every INCRBY builds two).
pub type KeyName = InlineVec<u8, 64>;

/// Name of the meta hash of leaderboard `base`.
pub fn meta_key(base: &[u8]) -> KeyName {
    let mut name = KeyName::new();
    name.extend_from_slice(base);
    name.extend_from_slice(META_SUFFIX);
    name
}

/// Name of the hash of slot `index` of leaderboard `base`.
pub fn slot_key(base: &[u8], index: i64) -> KeyName {
    let mut name = KeyName::new();
    name.extend_from_slice(base);
    name.extend_from_slice(SLOT_INFIX);
    push_decimal(&mut name, index);
    name
}

/// Appends `n` in decimal (what `to_string` writes) without a temporary string: slot
/// names are built on every INCRBY and by every read of the slots.
fn push_decimal(out: &mut KeyName, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    let mut digits = [0u8; 20];
    let mut rest = n.unsigned_abs();
    let mut start = digits.len();
    loop {
        start -= 1;
        if let Some(d) = digits.get_mut(start) {
            *d = b'0' + (rest % 10) as u8;
        }
        rest /= 10;
        if rest == 0 || start == 0 {
            break;
        }
    }
    out.extend_from_slice(digits.get(start..).unwrap_or_default());
}

/// The leaderboard whose meta hash is `meta`.
pub fn base_of_meta(meta: &[u8]) -> Option<&[u8]> {
    meta.strip_suffix(META_SUFFIX)
}

/// The leaderboard whose slot hash is `name` (`<base>|slot|<index>`).
pub fn base_of_slot(name: &[u8]) -> Option<&[u8]> {
    let at = name
        .windows(SLOT_INFIX.len())
        .rposition(|w| w == SLOT_INFIX)?;
    let index = name.get(at + SLOT_INFIX.len()..)?;
    parse_i64(index).ok()?;
    name.get(..at)
}

/// The leaderboard a derived key (meta or slot hash) belongs to.
pub fn base_of_part(name: &[u8]) -> Option<&[u8]> {
    base_of_meta(name).or_else(|| base_of_slot(name))
}

/// True if `key` has a hash tag as Redis Cluster reads it (the first `{` followed later by
/// a `}` with at least one byte between), so `key` + any suffix hashes to the same slot.
pub fn has_hash_tag(key: &[u8]) -> bool {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return false;
    };
    let after = key.get(open + 1..).unwrap_or_default();
    matches!(after.iter().position(|&b| b == b'}'), Some(close) if close > 0)
}

/// A sorted-set score as an integer total (scores written by tally are integers).
pub fn score_to_total(score: f64) -> i64 {
    if score.is_nan() {
        return 0;
    }
    score.round().clamp(i64::MIN as f64, i64::MAX as f64) as i64
}

/// Leaderboard order: higher total first, ties by member descending (as `ZREVRANGE`).
/// `Ordering::Greater` means `a` ranks ahead of `b`.
pub fn ahead(a: (i64, &[u8]), b: (i64, &[u8])) -> Ordering {
    a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1))
}

#[derive(Debug, PartialEq, Eq)]
struct Entry {
    total: i64,
    member: Vec<u8>,
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        ahead((self.total, &self.member), (other.total, &other.member))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The `want` best `(member, total)` of `members`, best first.
///
/// `members` yields `(member, raw score)` in leaderboard order (as a reverse walk of the
/// sorted set does); `adjust(member, raw)` gives the exact total, which is never above
/// `raw`. Threshold algorithm: the walk stops once the next raw score (with its member)
/// ranks below the `want`-th best exact total found so far, since no later member can
/// beat it. Members whose total is not positive are skipped.
pub fn top_adjusted(
    members: impl Iterator<Item = (Vec<u8>, i64)>,
    want: usize,
    mut adjust: impl FnMut(&[u8], i64) -> i64,
) -> Vec<(Vec<u8>, i64)> {
    if want == 0 {
        return Vec::new();
    }
    let mut best: BinaryHeap<Reverse<Entry>> = BinaryHeap::new();
    for (member, raw) in members {
        if raw <= 0 {
            break;
        }
        if best.len() >= want {
            if let Some(Reverse(worst)) = best.peek() {
                if ahead((raw, &member), (worst.total, &worst.member)) == Ordering::Less {
                    break;
                }
            }
        }
        let total = adjust(&member, raw);
        if total <= 0 {
            continue;
        }
        best.push(Reverse(Entry { total, member }));
        if best.len() > want {
            best.pop();
        }
    }
    let mut out: Vec<Entry> = best.into_iter().map(|Reverse(e)| e).collect();
    out.sort_by(|a, b| b.cmp(a));
    out.into_iter().map(|e| (e.member, e.total)).collect()
}

/// Rank (0 = best) of a member whose exact total is `total`, among `members` (leaderboard
/// order, raw scores, as for [`top_adjusted`]). Only members whose raw score ranks ahead of
/// `(total, member)` can be ahead, so the walk stops at the first one that does not.
pub fn rank_adjusted(
    members: impl Iterator<Item = (Vec<u8>, i64)>,
    target: (i64, &[u8]),
    mut adjust: impl FnMut(&[u8], i64) -> i64,
) -> i64 {
    let mut rank = 0;
    for (member, raw) in members {
        if ahead((raw, &member), target) != Ordering::Greater {
            break;
        }
        let total = adjust(&member, raw);
        if total > 0 && ahead((total, &member), target) == Ordering::Greater {
            rank += 1;
        }
    }
    rank
}

/// Every `(member, total)` of `totals` in leaderboard order, positive totals only.
pub fn sort_totals(totals: impl IntoIterator<Item = (Vec<u8>, i64)>) -> Vec<(Vec<u8>, i64)> {
    let mut out: Vec<(Vec<u8>, i64)> = totals.into_iter().filter(|(_, t)| *t > 0).collect();
    out.sort_by(|a, b| ahead((b.1, &b.0), (a.1, &a.0)));
    out
}

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
        self.index.capacity() * index_entry
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
        if !self.order.is_empty() {
            self.order.truncate(self.order.len().saturating_sub(work));
            return false;
        }
        if !self.entries.is_empty() {
            self.entries
                .truncate(self.entries.len().saturating_sub(work));
            return false;
        }
        let mut left = work;
        self.index.retain(|_, _| {
            if left == 0 {
                return true;
            }
            left -= 1;
            false
        });
        if self.index.is_empty() {
            *self = Totals::default();
            return true;
        }
        false
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

/// Adds one slot hash field to summed counts: values that are not positive integers (a
/// user's edits) count as nothing.
pub fn add_count(sums: &mut HashMap<Vec<u8>, i64>, member: &[u8], count: &[u8]) {
    if let Ok(count @ 1..) = parse_i64(count) {
        let entry = sums.entry(member.to_vec()).or_insert(0);
        *entry = entry.saturating_add(count);
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

#[cfg(test)]
mod tests;
