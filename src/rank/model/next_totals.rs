//! The memory of the totals without a large oldest slot, ready before it leaves the
//! window (the command layer fills them in steps and reads them meanwhile), with those no
//! longer used, freed in steps. Generic over the scan cursor `C` the command layer
//! resumes.
//!
//! Owns: that memory. May not touch: Redis (pure).

use std::collections::{HashMap, HashSet};
use std::os::raw::c_int;

use super::board_id::ENTRY_OVERHEAD;
use super::discarded::Discarded;
use super::names::slot_key;
use super::ranked::RankedSet;

/// A board's totals without slot `excluded` (its oldest slot hash), in leaderboard order:
/// for every member, its sorted-set total less its count in that slot. Complete once
/// `scan` is done (`None`); until then, only what was scanned or written is in `totals`.
/// On a replica, `dirty` holds the members the primary's effects changed since: their
/// values are set from the keys before the totals answer.
pub struct Next<C> {
    pub excluded: i64,
    pub totals: RankedSet,
    pub scan: Option<NextScan<C>>,
    pub dirty: HashSet<Vec<u8>>,
}

/// How the timer fills a board's [`Next`].
pub enum NextScan<C> {
    /// A pass over the sorted set (a new [`Next`] of a board whose other slots hold more).
    Totals(C),
    /// A pass over the slot hashes after the excluded one, from slot `index` (a new
    /// [`Next`]: a member in none of them has no total without the excluded slot).
    Slots { index: i64, cursor: C },
    /// A pass over the excluded slot's hash (the totals equal the sorted set's before).
    Excluded(C),
}

/// See the module doc.
pub struct NextTotals<C> {
    /// By database, then base; looked up by every INCRBY of a board that has one.
    by_db: HashMap<c_int, HashMap<Vec<u8>, Next<C>>>,
    /// Next totals no longer used, freed by the timer in steps.
    discarded: Discarded<RankedSet>,
}

impl<C> Default for NextTotals<C> {
    fn default() -> Self {
        NextTotals {
            by_db: HashMap::new(),
            discarded: Discarded::default(),
        }
    }
}

impl<C> NextTotals<C> {
    pub fn bytes(&self) -> usize {
        let nexts: usize = (self.by_db.values())
            .flat_map(HashMap::iter)
            .map(|(base, next)| {
                let dirty: usize = next.dirty.iter().map(|m| m.len() + ENTRY_OVERHEAD).sum();
                base.len() + ENTRY_OVERHEAD + next.totals.bytes() + dirty
            })
            .sum();
        let discarded = self.discarded.bytes();
        nexts + discarded
    }

    /// True if some board has next totals.
    pub fn any(&self) -> bool {
        !self.by_db.is_empty()
    }

    /// True if a board named `base` has next totals in some database (a command filter
    /// does not know the database its command runs in).
    pub fn has_named(&self, base: &[u8]) -> bool {
        self.by_db.values().any(|in_db| in_db.contains_key(base))
    }

    /// True if `slot` is the slot hash that a board named `base` leaves out of its next
    /// totals, in some database.
    pub fn excludes_slot(&self, base: &[u8], slot: &[u8]) -> bool {
        (self.by_db.values())
            .filter_map(|in_db| in_db.get(base))
            .any(|next| slot_key(base, next.excluded).as_ref() == slot)
    }

    /// The members in `members` of the board named `base` (in any database: a replica's
    /// effects name no database) may have changed in a way its next totals did not follow:
    /// their values are set from the keys before the next read.
    pub fn mark_dirty(&mut self, base: &[u8], members: Vec<Vec<u8>>) {
        let mut nexts = (self.by_db.values_mut()).filter_map(|in_db| in_db.get_mut(base));
        let Some(first) = nexts.next() else {
            return;
        };
        for next in nexts {
            next.dirty.extend(members.iter().cloned());
        }
        first.dirty.extend(members);
    }

    pub fn get(&self, db: c_int, base: &[u8]) -> Option<&Next<C>> {
        self.by_db.get(&db)?.get(base)
    }

    pub fn get_mut(&mut self, db: c_int, base: &[u8]) -> Option<&mut Next<C>> {
        self.by_db.get_mut(&db)?.get_mut(base)
    }

    pub fn put(&mut self, db: c_int, base: &[u8], next: Next<C>) {
        (self.by_db.entry(db).or_default()).insert(base.to_vec(), next);
    }

    /// The board's next totals, if they are complete and leave out slot `excluded`.
    pub fn ready(&self, db: c_int, base: &[u8], excluded: i64) -> Option<&RankedSet> {
        let next = self.get(db, base)?;
        (next.excluded == excluded && next.scan.is_none()).then_some(&next.totals)
    }

    /// Something changed the board's keys behind tally's back, or the board is gone: its
    /// next totals are no longer true.
    pub fn drop(&mut self, db: c_int, base: &[u8]) {
        let Some(in_db) = self.by_db.get_mut(&db) else {
            return;
        };
        let next = in_db.remove(base);
        if in_db.is_empty() {
            self.by_db.remove(&db);
        }
        if let Some(next) = next {
            self.discard(next);
        }
    }

    fn discard(&mut self, next: Next<C>) {
        self.discarded.push(next.totals);
    }

    /// Drops the next totals of the databases `gone` says.
    pub fn drop_where(&mut self, gone: impl Fn(c_int) -> bool) {
        let dbs: Vec<c_int> = self.by_db.keys().copied().filter(|d| gone(*d)).collect();
        for db in dbs {
            let nexts = self
                .by_db
                .remove(&db)
                .into_iter()
                .flat_map(HashMap::into_values);
            for next in nexts.collect::<Vec<_>>() {
                self.discard(next);
            }
        }
    }

    pub fn has_discarded(&self) -> bool {
        !self.discarded.is_empty()
    }

    /// Frees discarded totals, about `work` members' worth.
    pub fn free_discarded(&mut self, work: usize) {
        self.discarded.free_step(work);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type N = NextTotals<u32>;

    fn next(excluded: i64, rows: &[(&str, i64)], scan: Option<NextScan<u32>>) -> Next<u32> {
        let mut totals = RankedSet::default();
        for (member, total) in rows {
            totals.set(member.as_bytes(), *total);
        }
        Next {
            excluded,
            totals,
            scan,
            dirty: HashSet::new(),
        }
    }

    #[test]
    fn next_totals_answer_only_when_complete_and_for_their_slot() {
        let mut n = N::default();
        assert!(!n.any());
        n.put(0, b"b", next(7, &[("m", 3)], Some(NextScan::Totals(0))));
        assert!(n.any());
        assert!(n.ready(0, b"b", 7).is_none());
        if let Some(next) = n.get_mut(0, b"b") {
            next.scan = None;
        }
        assert_eq!(n.ready(0, b"b", 7).map(|t| t.get(b"m")), Some(3));
        // Another slot is leaving: these totals left out the one before.
        assert!(n.ready(0, b"b", 8).is_none());
        assert!(n.ready(1, b"b", 7).is_none());
    }

    #[test]
    fn a_command_filter_finds_the_excluded_slot_in_any_database() {
        let mut n = N::default();
        n.put(2, b"b", next(7, &[], None));
        assert!(n.has_named(b"b"));
        assert!(!n.has_named(b"c"));
        assert!(n.excludes_slot(b"b", &slot_key(b"b", 7)));
        assert!(!n.excludes_slot(b"b", &slot_key(b"b", 8)));
        assert!(!n.excludes_slot(b"c", &slot_key(b"c", 7)));
    }

    #[test]
    fn a_replica_marks_the_members_its_primary_changed_in_every_database() {
        let mut n = N::default();
        n.put(0, b"b", next(7, &[("m", 3)], None));
        n.put(1, b"b", next(7, &[("m", 3)], None));
        n.put(1, b"c", next(7, &[("m", 3)], None));
        n.mark_dirty(b"b", vec![b"m".to_vec(), b"n".to_vec()]);
        n.mark_dirty(b"z", vec![b"m".to_vec()]);
        for db in [0, 1] {
            let dirty = n.get(db, b"b").map(|next| next.dirty.len());
            assert_eq!(dirty, Some(2));
        }
        assert_eq!(n.get(1, b"c").map(|next| next.dirty.len()), Some(0));
    }

    #[test]
    fn dropped_totals_are_freed_in_steps() {
        let mut n = N::default();
        let rows: Vec<(String, i64)> = (0..600).map(|i| (format!("m{i}"), i)).collect();
        let rows: Vec<(&str, i64)> = rows.iter().map(|(m, t)| (m.as_str(), *t)).collect();
        n.put(0, b"b", next(7, &rows, None));
        let held = n.bytes();
        assert!(held > 0);
        n.drop(0, b"b");
        assert!(!n.any());
        assert!(n.has_discarded());
        let mut steps = 0;
        while n.has_discarded() {
            n.free_discarded(100);
            steps += 1;
        }
        assert!(steps > 1, "freed at once");
        assert_eq!(n.bytes(), 0);
        // Dropping what is not there is nothing.
        n.drop(0, b"b");
        n.drop(5, b"b");
        assert!(!n.has_discarded());
    }

    #[test]
    fn flush_drops_only_its_databases() {
        let mut n = N::default();
        n.put(0, b"a", next(1, &[("m", 1)], None));
        n.put(1, b"b", next(1, &[("m", 1)], None));
        n.drop_where(|d| d == 0);
        assert!(n.get(0, b"a").is_none());
        assert!(n.get(1, b"b").is_some());
        n.drop_where(|_| true);
        assert!(!n.any());
    }
}
