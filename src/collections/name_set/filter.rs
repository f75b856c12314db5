//! The counting filter in front of the tracked names' exact sets, and the screening of a
//! name that the keyspace callback reads without a borrow of the set.
//!
//! Owns: that filter. May not touch: Redis (pure).

use super::ids::{hash_and_find, IdSet};

/// Cells of [`IdFilter`] at least, and at most: past the largest size the filter stops
/// growing and answers "maybe" more often (the exact sets behind it stay exact).
const FILTER_MIN_CELLS: usize = 1 << 12;
pub(super) const FILTER_MAX_CELLS: usize = 1 << 21;
/// Cells per id the filter keeps at least, below its largest size: with two cells an id,
/// about 5% of other ids find both of theirs taken.
const FILTER_CELLS_PER_ID: usize = 8;
/// The most ids the filter counts anew, or uncounts when a set is emptied, in one step.
pub(super) const FILTER_MAX_STEP: usize = FILTER_MAX_CELLS / FILTER_CELLS_PER_ID;
/// Ids a step of a recount counts at least (whole shards of the sets). Counting all
/// 131,072 ids at once held one insert 4.6 ms; in steps, the slowest insert of 1M new
/// names is 0.6 ms, of 10M 1.1 ms (a set's shard growing, see `ids.rs`), on the 2-core
/// machine loaded (`measured.rs`).
pub(super) const RECOUNT_STEP_IDS: usize = 4_096;
/// Bytes of the new filter a step of a recount fills with zeros first: the ids' random
/// cells would touch every page of it (2 MB at the largest size) in the first step, and
/// the system's first touch of a page costs a few us.
const RECOUNT_STEP_BYTES: usize = 64 << 10;

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
///
/// It grows (or counts again after giving up) in steps: a new filter is filled a shard of
/// the sets at a time ([`Self::recount_some`]) while the old one answers, and the ids that
/// come and go meanwhile count in the new one too once their shard is counted there.
#[derive(Default)]
pub struct IdFilter {
    /// One bit per cell: its count is not zero. Empty while no id is counted (or the
    /// filter gave up); else a power of two of words.
    bits: Vec<u64>,
    /// The count of each cell (64 per word of `bits`), read only when ids come and go.
    pub(super) counts: Vec<u8>,
    /// The filter answers "maybe" for every id: it was given up.
    pub(super) given_up: bool,
    /// The filter being filled, which replaces this one when every shard is counted.
    pub(super) next: Option<Box<Recount>>,
}

/// A filter being filled: first with zeros, up to `cells`; then the ids of the sets'
/// shards below `shard` are counted in it.
pub(super) struct Recount {
    bits: Vec<u64>,
    counts: Vec<u8>,
    cells: usize,
    shard: usize,
}

impl IdFilter {
    pub const fn new() -> Self {
        IdFilter {
            bits: Vec::new(),
            counts: Vec::new(),
            given_up: false,
            next: None,
        }
    }

    /// The block of `id` (its low bits) in a filter of `mask + 1` blocks, and its two
    /// cells there (two sets of six high bits); the cells may be one.
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
    /// can count them again) and no recount is under way: then [`Self::start_recount`].
    pub fn wants_recount(&self, total: usize) -> bool {
        if self.next.is_some() {
            false
        } else if self.given_up {
            total <= FILTER_MAX_STEP
        } else {
            self.counts.len() < Self::cells_for(total)
        }
    }

    /// Begins counting the sets' ids (`total` of them) anew, in a filter of the size they
    /// want; this one answers until [`Self::recount_some`] has counted every shard.
    pub fn start_recount(&mut self, total: usize) {
        let cells = Self::cells_for(total);
        self.next = Some(Box::new(Recount {
            bits: Vec::with_capacity(cells / 64),
            counts: Vec::with_capacity(cells),
            cells,
            shard: 0,
        }));
    }

    /// Counts whole shards of `sets` into the filter being filled, `step_ids` ids or more
    /// (the last shards, however few); the filled filter then takes over.
    pub fn recount_some(&mut self, sets: &[IdSet], step_ids: usize) {
        let Some(next) = &mut self.next else {
            return;
        };
        // Zeros first (a small filter's all in this step, and its counting too).
        let zeros = (next.cells - next.counts.len()).min(RECOUNT_STEP_BYTES);
        next.counts.resize(next.counts.len() + zeros, 0);
        let words = (next.cells / 64 - next.bits.len()).min((RECOUNT_STEP_BYTES - zeros) / 8);
        next.bits.resize(next.bits.len() + words, 0);
        if next.counts.len() < next.cells || next.bits.len() < next.cells / 64 {
            return;
        }
        let mut counted = 0;
        while counted < step_ids && next.shard < IdSet::shard_count() {
            for set in sets {
                for (&id, _) in set.shard_entries(next.shard) {
                    bump(&mut next.bits, &mut next.counts, id, true);
                    counted += 1;
                }
            }
            next.shard += 1;
        }
        if next.shard >= IdSet::shard_count() {
            if let Some(done) = self.next.take() {
                self.bits = done.bits;
                self.counts = done.counts;
                self.given_up = false;
            }
        }
    }

    /// Counts an id that joined its set; `shard` is its shard in the sets.
    pub fn add(&mut self, id: u64, shard: usize) {
        self.bump(id, shard, true);
    }

    /// Uncounts an id that left its set; `shard` is its shard in the sets.
    pub fn remove(&mut self, id: u64, shard: usize) {
        self.bump(id, shard, false);
    }

    /// Uncounts the `leaving` ids (with their shards) of a set that is being emptied, or
    /// gives up if they are too many to go through in one step.
    pub fn remove_all(&mut self, ids: impl Iterator<Item = (u64, usize)>, leaving: usize) {
        if leaving > FILTER_MAX_STEP {
            *self = IdFilter::new();
            self.given_up = true;
        } else {
            ids.for_each(|(id, shard)| self.remove(id, shard));
        }
    }

    /// Counts `id` up or down here (unless given up) and in the filter being filled if
    /// its shard is counted there already.
    fn bump(&mut self, id: u64, shard: usize, up: bool) {
        if !self.given_up {
            bump(&mut self.bits, &mut self.counts, id, up);
        }
        if let Some(next) = &mut self.next {
            if shard < next.shard {
                bump(&mut next.bits, &mut next.counts, id, up);
            }
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        let next = self
            .next
            .as_ref()
            .map_or(0, |n| n.bits.capacity() * 8 + n.counts.capacity());
        self.bits.capacity() * 8 + self.counts.capacity() + next
    }
}

/// Counts `id` up or down in a filter's `bits` and `counts`.
fn bump(bits: &mut [u64], counts: &mut [u8], id: u64, up: bool) {
    if bits.is_empty() {
        // No filter yet: the first recount counts the id.
        return;
    }
    let (block, first, second) = IdFilter::cells(id, bits.len().wrapping_sub(1));
    for cell in [first, second] {
        let at = block * 64 + cell as usize;
        let Some(count) = counts.get_mut(at) else {
            continue;
        };
        *count = match (*count, up) {
            (u8::MAX, _) => u8::MAX,
            (n, true) => n + 1,
            (n, false) => n.saturating_sub(1),
        };
        if let Some(word) = bits.get_mut(block) {
            if *count == 0 {
                *word &= !(1u64 << cell);
            } else {
                *word |= 1u64 << cell;
            }
        }
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
