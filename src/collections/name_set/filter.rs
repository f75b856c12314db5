//! The counting filter in front of the tracked names' exact sets, and the screening of a
//! name that the keyspace callback reads without a borrow of the set.
//!
//! Owns: that filter. May not touch: Redis (pure).

use super::ids::hash_and_find;

/// Cells of [`IdFilter`] at least, and at most: a filter grows by counting every id again
/// (in one step: at most 262,144 ids, a few ms), so past the largest size it stops growing
/// and answers "maybe" more often (the exact sets behind it stay exact).
const FILTER_MIN_CELLS: usize = 1 << 12;
pub(super) const FILTER_MAX_CELLS: usize = 1 << 21;
/// Cells per id the filter keeps at least, below its largest size: with two cells an id,
/// about 5% of other ids find both of theirs taken.
const FILTER_CELLS_PER_ID: usize = 8;
/// The most ids the filter counts anew, or uncounts, in one step.
pub(super) const FILTER_MAX_STEP: usize = FILTER_MAX_CELLS / FILTER_CELLS_PER_ID;

/// A counting filter of ids in front of the exact sets. Every id of every database counts
/// once in two cells of one 64-cell block; each cell has a bit, set while its count is not
/// zero, and the bits are all a lookup reads: one 64-bit word, so "no such id" costs a
/// few instructions and one cache line of an array of one byte per id (the sets would cost
/// a shard's header, its control bytes and the database's set). An id whose two bits are
/// set may be kept (the sets decide); any other is in no database.
///
/// Counts only drop when an id leaves its set, so the filter always covers the sets: a
/// count at 255 stays there (it no longer knows how many ids it holds), and when the ids
/// to uncount are too many for one step (a large database flushed), the filter gives up
/// and answers "maybe" for every id until the sets are small enough to count again.
#[derive(Default)]
pub struct IdFilter {
    /// One bit per cell: its count is not zero. Empty while no id is counted (or the
    /// filter gave up); else a power of two of words.
    bits: Vec<u64>,
    /// The count of each cell (64 per word of `bits`), read only when ids come and go.
    pub(super) counts: Vec<u8>,
    /// The filter answers "maybe" for every id: it was given up.
    pub(super) given_up: bool,
}

impl IdFilter {
    pub const fn new() -> Self {
        IdFilter {
            bits: Vec::new(),
            counts: Vec::new(),
            given_up: false,
        }
    }

    /// The block of `id` (its low bits) and its two cells there (two sets of six high
    /// bits); the cells may be one.
    #[inline(always)]
    fn cells_of(&self, id: u64) -> (usize, u32, u32) {
        Self::cells(id, self.bits.len().wrapping_sub(1))
    }

    /// [`Self::cells_of`] in a filter of `mask + 1` blocks.
    #[inline(always)]
    fn cells(id: u64, mask: usize) -> (usize, u32, u32) {
        (
            id as usize & mask,
            (id >> 52) as u32 & 63,
            (id >> 58) as u32,
        )
    }

    /// The filter's words, a power of two of them; one word of all bits set (any id may
    /// be kept) when the filter gave up, or has no words (never, while it counts ids).
    pub(super) fn words(&self) -> &[u64] {
        if self.given_up || self.bits.is_empty() {
            ANY_NAMES
        } else {
            &self.bits
        }
    }

    /// The cells for `total` ids.
    fn cells_for(total: usize) -> usize {
        total
            .saturating_mul(FILTER_CELLS_PER_ID)
            .next_power_of_two()
            .clamp(FILTER_MIN_CELLS, FILTER_MAX_CELLS)
    }

    /// True if the sets, now with `total` ids, want a larger filter (or a given-up filter
    /// can count them again): then [`Self::recount`] them, else [`Self::add`] the new one.
    pub fn wants_recount(&self, total: usize) -> bool {
        if self.given_up {
            total <= FILTER_MAX_STEP
        } else {
            self.counts.len() < Self::cells_for(total)
        }
    }

    /// Counts every id of the sets (`total` of them) anew.
    pub fn recount(&mut self, total: usize, ids: impl Iterator<Item = u64>) {
        let cells = Self::cells_for(total);
        self.given_up = false;
        self.bits = vec![0; cells / 64];
        self.counts = vec![0; cells];
        ids.for_each(|id| self.bump(id, true));
    }

    /// Counts an id that joined its set.
    pub fn add(&mut self, id: u64) {
        if !self.given_up {
            self.bump(id, true);
        }
    }

    /// Uncounts an id that left its set.
    pub fn remove(&mut self, id: u64) {
        if !self.given_up {
            self.bump(id, false);
        }
    }

    /// Uncounts the `leaving` ids of a set that is being emptied, or gives up if they are
    /// too many to go through in one step.
    pub fn remove_all(&mut self, ids: impl Iterator<Item = u64>, leaving: usize) {
        if leaving > FILTER_MAX_STEP {
            *self = IdFilter::new();
            self.given_up = true;
        } else {
            ids.for_each(|id| self.remove(id));
        }
    }

    fn bump(&mut self, id: u64, up: bool) {
        let (block, first, second) = self.cells_of(id);
        for cell in [first, second] {
            let at = block * 64 + cell as usize;
            let Some(count) = self.counts.get_mut(at) else {
                continue;
            };
            *count = match (*count, up) {
                (u8::MAX, _) => u8::MAX,
                (n, true) => n + 1,
                (n, false) => n.saturating_sub(1),
            };
            if let Some(bits) = self.bits.get_mut(block) {
                if *count == 0 {
                    *bits &= !(1u64 << cell);
                } else {
                    *bits |= 1u64 << cell;
                }
            }
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bits.capacity() * 8 + self.counts.capacity()
    }
}

/// The filter words of a set that keeps no name: every name is turned away.
pub const NO_NAMES: &[u64] = &[0];
/// The filter words of a filter that gave up: any name may be kept.
pub(super) const ANY_NAMES: &[u64] = &[u64::MAX];

/// A name's screening (its id if some database may keep it, and whether it contains
/// `mark`) from the parts it reads ([`NameSet::screen_parts`]): the ids'
/// seeds, and the filter's `mask + 1` words, read by `word` (block `0..=mask`). So a
/// caller may keep the parts where reading them costs no borrow of the set.
#[inline(always)]
pub fn screen_with(
    seed: (u64, u64),
    mask: usize,
    word: impl FnOnce(usize) -> u64,
    name: &[u8],
    mark: u8,
) -> Screened {
    let (id, marked) = hash_and_find(seed, name, mark);
    let (block, first, second) = IdFilter::cells(id, mask);
    let wanted = 1u64 << first | 1u64 << second;
    Screened {
        maybe: (word(block) & wanted == wanted).then_some(id),
        marked,
    }
}

/// What [`screen_with`] learns of a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Screened {
    /// The name's id, if some database may keep it ([`NameSet::contains_id`] decides).
    pub maybe: Option<u64>,
    /// The name contains the byte asked for.
    pub marked: bool,
}
