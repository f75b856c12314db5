//! Members and their totals in leaderboard order, kept in memory and updated one member at
//! a time: a member's total, its rank, a page of the order and the count, each in bounded
//! time (what a sorted set answers). Holds a board's totals without its oldest slot, ready
//! before that slot leaves the window.
//!
//! A sorted list of blocks of at most `2 × BLOCK` entries: an update moves the entries of
//! one block, a rank adds the lengths of the blocks before its own (a million members make
//! a few thousand blocks). Members are found through a [`ShardedMap`], which never grows a
//! large table in one step.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::mem::size_of;
use std::rc::Rc;

use super::order::ahead;
use super::totals::Member;
use crate::collections::sharded_map::ShardedMap;

/// Entries per block after a split.
const BLOCK: usize = 256;

/// See the module doc.
#[derive(Default)]
pub struct RankedSet {
    totals: Index,
    /// Blocks of `(total, member)`, each in leaderboard order (the entry ahead first),
    /// every entry of a block ahead of every entry of the next. No block is empty.
    blocks: Vec<Vec<(i64, Member)>>,
    /// Bytes of the member names (each allocated once, shared by both lists).
    member_bytes: usize,
}

/// Members past which the index moves to a [`ShardedMap`] (one step of this many entries;
/// below, a plain map costs a few kilobytes where the shards cost 200).
const SHARDED_FROM: usize = 32_768;

/// Member -> total: a plain map while small, a [`ShardedMap`] once large.
enum Index {
    Small(HashMap<Member, i64>),
    Large(ShardedMap<Member, i64>),
}

impl Default for Index {
    fn default() -> Self {
        Index::Small(HashMap::new())
    }
}

impl Index {
    fn len(&self) -> usize {
        match self {
            Index::Small(map) => map.len(),
            Index::Large(map) => map.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn get_key_value(&self, member: &[u8]) -> Option<(&Member, &i64)> {
        match self {
            Index::Small(map) => map.get_key_value(member),
            Index::Large(map) => map.get_key_value(member),
        }
    }

    fn insert(&mut self, member: Member, total: i64) {
        if let Index::Small(map) = self {
            if map.len() >= SHARDED_FROM && !map.contains_key(&member) {
                let mut large = ShardedMap::default();
                for (m, t) in map.drain() {
                    large.insert(m, t);
                }
                *self = Index::Large(large);
            }
        }
        match self {
            Index::Small(map) => {
                map.insert(member, total);
            }
            Index::Large(map) => {
                map.insert(member, total);
            }
        }
    }

    fn remove_entry(&mut self, member: &[u8]) {
        match self {
            Index::Small(map) => {
                map.remove_entry(member);
            }
            Index::Large(map) => {
                map.remove_entry(member);
            }
        }
    }

    /// Bytes of the tables (an estimate).
    fn bytes(&self) -> usize {
        let entry = size_of::<(Member, i64)>() + 1;
        match self {
            Index::Small(map) => map.capacity() * entry,
            // The shards' tables run between half and seven eighths full.
            Index::Large(map) => {
                map.len() * entry * 3 / 2 + 4096 * size_of::<HashMap<Member, i64>>()
            }
        }
    }

    /// Frees about `work` entries; true once empty.
    fn release_some(&mut self, work: usize) -> bool {
        match self {
            Index::Small(map) => {
                let mut left = work.max(1);
                map.retain(|_, _| {
                    if left == 0 {
                        return true;
                    }
                    left -= 1;
                    false
                });
                map.is_empty()
            }
            Index::Large(map) => map.release_some(work),
        }
    }
}

/// `Less` when `a` comes before `b` in leaderboard order.
fn order(a: (i64, &[u8]), b: (i64, &[u8])) -> Ordering {
    ahead(b, a)
}

impl RankedSet {
    /// Number of members (every total is positive).
    pub fn len(&self) -> usize {
        self.totals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.totals.is_empty()
    }

    /// `member`'s total (0 if absent).
    pub fn get(&self, member: &[u8]) -> i64 {
        self.totals
            .get_key_value(member)
            .map_or(0, |(_, &total)| total)
    }

    /// Sets `member`'s total; a total of 0 or less removes the member.
    pub fn set(&mut self, member: &[u8], total: i64) {
        let (name, old) = match self.totals.get_key_value(member) {
            Some((_, &old)) if old == total => return,
            Some((name, &old)) => (Rc::clone(name), Some(old)),
            None if total <= 0 => return,
            None => (Member::from(member), None),
        };
        if let Some(old) = old {
            self.remove_entry(old, &name);
        }
        if total <= 0 {
            self.totals.remove_entry(member);
            self.member_bytes = self.member_bytes.saturating_sub(member.len());
            return;
        }
        if old.is_none() {
            self.member_bytes += member.len();
        }
        self.totals.insert(Rc::clone(&name), total);
        self.insert_entry(total, name);
    }

    /// The block where `(total, member)` is or would go.
    fn block_of(&self, total: i64, member: &[u8]) -> usize {
        let at = self.blocks.partition_point(|block| {
            block
                .last()
                .is_some_and(|(t, m)| order((*t, m), (total, member)) == Ordering::Less)
        });
        at.min(self.blocks.len().saturating_sub(1))
    }

    fn insert_entry(&mut self, total: i64, name: Member) {
        if self.blocks.is_empty() {
            self.blocks.push(vec![(total, name)]);
            return;
        }
        let b = self.block_of(total, &name);
        let Some(block) = self.blocks.get_mut(b) else {
            return;
        };
        let at = block.partition_point(|(t, m)| order((*t, m), (total, &name)) == Ordering::Less);
        block.insert(at, (total, name));
        if block.len() > 2 * BLOCK {
            let tail = block.split_off(BLOCK);
            self.blocks.insert(b + 1, tail);
        }
    }

    fn remove_entry(&mut self, total: i64, member: &[u8]) {
        let b = self.block_of(total, member);
        let Some(block) = self.blocks.get_mut(b) else {
            return;
        };
        if let Ok(at) = block.binary_search_by(|(t, m)| order((*t, m), (total, member))) {
            block.remove(at);
            if block.is_empty() {
                self.blocks.remove(b);
            }
        }
    }

    /// `member`'s rank (0 = first), if present.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let total = *self.totals.get_key_value(member)?.1;
        let b = self.block_of(total, member);
        let before: usize = self.blocks.get(..b)?.iter().map(Vec::len).sum();
        let block = self.blocks.get(b)?;
        let at = block
            .binary_search_by(|(t, m)| order((*t, m), (total, member)))
            .ok()?;
        Some(before + at)
    }

    /// How many members rank strictly ahead of `(total, member)`, present or not: the
    /// blocks before the one where it is or would go, and part of that one.
    pub fn ahead_of(&self, total: i64, member: &[u8]) -> usize {
        let before_key = |(t, m): &(i64, Member)| order((*t, m), (total, member)) == Ordering::Less;
        let b = self
            .blocks
            .partition_point(|block| block.last().is_some_and(before_key));
        let before: usize = self.blocks.iter().take(b).map(Vec::len).sum();
        let within = self
            .blocks
            .get(b)
            .map_or(0, |block| block.partition_point(before_key));
        before + within
    }

    /// How many members have a total strictly higher than `total` (TSRANK.RANK ... TIES):
    /// the blocks before the first that ends at or below it, and part of that one.
    pub fn above(&self, total: i64) -> usize {
        let b = self
            .blocks
            .partition_point(|block| block.last().is_some_and(|(t, _)| *t > total));
        let before: usize = self.blocks.iter().take(b).map(Vec::len).sum();
        let within = self
            .blocks
            .get(b)
            .map_or(0, |block| block.partition_point(|(t, _)| *t > total));
        before + within
    }

    /// At most `count` rows from `offset`, in leaderboard order.
    pub fn top(&self, offset: usize, count: usize) -> impl Iterator<Item = (&[u8], i64)> {
        let (mut first, mut skip) = (0, offset);
        for block in &self.blocks {
            if skip < block.len() {
                break;
            }
            skip -= block.len();
            first += 1;
        }
        let rows = self
            .blocks
            .get(first..)
            .unwrap_or_default()
            .iter()
            .flatten();
        rows.skip(skip).take(count).map(|(t, m)| (&m[..], *t))
    }

    /// Bytes held (an estimate: allocations, their headers and the map's slack).
    pub fn bytes(&self) -> usize {
        let entry = size_of::<(i64, Member)>();
        let blocks: usize = self.blocks.iter().map(|b| b.capacity() * entry).sum();
        self.totals.bytes()
            + self.blocks.capacity() * size_of::<Vec<(i64, Member)>>()
            + blocks
            // Each name's allocation: the bytes and the two reference counts.
            + self.member_bytes
            + self.totals.len() * 2 * size_of::<usize>()
    }

    /// Frees about `work` members' worth of memory; true once nothing is left. Freeing a
    /// million members at once would hold the server for tens of milliseconds.
    pub fn free_step(&mut self, work: usize) -> bool {
        let mut left = work.max(1);
        while left > 0 {
            let Some(block) = self.blocks.pop() else {
                break;
            };
            left = left.saturating_sub(block.len());
        }
        if !self.blocks.is_empty() {
            return false;
        }
        if self.totals.release_some(left) {
            *self = RankedSet::default();
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Rng;
    use std::collections::BTreeMap;

    /// The model: every member's total, ordered on demand.
    fn ordered(model: &BTreeMap<Vec<u8>, i64>) -> Vec<(Vec<u8>, i64)> {
        let mut rows: Vec<(Vec<u8>, i64)> = model
            .iter()
            .filter(|(_, &t)| t > 0)
            .map(|(m, &t)| (m.clone(), t))
            .collect();
        rows.sort_by(|a, b| order((a.1, &a.0), (b.1, &b.0)));
        rows
    }

    #[test]
    fn agrees_with_a_sorted_model_under_random_updates() {
        let mut rng = Rng(7);
        let mut set = RankedSet::default();
        let mut model: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
        for round in 0..20_000u64 {
            let member = format!("m{}", rng.below(3000)).into_bytes();
            let total = rng.below(60) - 10;
            set.set(&member, total);
            model.insert(member, total.max(0));
            if round % 2000 == 0 || round == 19_999 {
                let want = ordered(&model);
                assert_eq!(set.len(), want.len());
                let got: Vec<(Vec<u8>, i64)> = set
                    .top(0, usize::MAX)
                    .map(|(m, t)| (m.to_vec(), t))
                    .collect();
                assert_eq!(got, want);
                for (i, (m, t)) in want.iter().enumerate().step_by(37) {
                    assert_eq!(set.rank(m), Some(i));
                    assert_eq!(set.get(m), *t);
                }
                let page: Vec<(Vec<u8>, i64)> =
                    set.top(100, 10).map(|(m, t)| (m.to_vec(), t)).collect();
                assert_eq!(
                    page,
                    want.iter().skip(100).take(10).cloned().collect::<Vec<_>>()
                );
            }
        }
        for total in [-1, 0, 1, 5, 30, 49, 50, 1000] {
            let want_above = ordered(&model).iter().filter(|(_, t)| *t > total).count();
            assert_eq!(set.above(total), want_above, "above {total}");
        }
        assert_eq!(set.rank(b"nobody"), None);
        assert!(set.bytes() > set.len() * 40);
        while !set.free_step(500) {}
        assert!(set.is_empty());
    }

    #[test]
    fn a_large_set_moves_to_shards_and_keeps_its_answers() {
        let mut set = RankedSet::default();
        let mut model: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
        for i in 0..(SHARDED_FROM as i64 + 5000) {
            let member = format!("member:{i}").into_bytes();
            set.set(&member, 1 + i % 97);
            model.insert(member, 1 + i % 97);
        }
        assert!(matches!(set.totals, Index::Large(_)));
        for i in (0..SHARDED_FROM as i64).step_by(3) {
            let member = format!("member:{i}").into_bytes();
            set.set(&member, 0);
            model.insert(member, 0);
        }
        let want = ordered(&model);
        assert_eq!(set.len(), want.len());
        for (i, (m, t)) in want.iter().enumerate().step_by(101) {
            assert_eq!(set.rank(m), Some(i));
            assert_eq!(set.get(m), *t);
        }
        let page: Vec<(Vec<u8>, i64)> = set.top(777, 5).map(|(m, t)| (m.to_vec(), t)).collect();
        assert_eq!(
            page,
            want.iter().skip(777).take(5).cloned().collect::<Vec<_>>()
        );
        assert!(set.bytes() > set.len() * 40);
        while !set.free_step(500) {}
        assert!(set.is_empty());
    }
}
