//! The lifecycle jobs of boards made of several keys, queued in order until they run: what
//! a keyspace event asks for (`rank/commands/lifecycle.rs`, where writing keys is not
//! allowed), and what the queue makes of a board's name until then (a rename not yet
//! carried out, a board about to be removed, a meta about to be put back).
//!
//! Owns: the queue and how names resolve through it. May not touch: Redis (pure; the
//! command layer runs the jobs).

use std::mem::size_of;
use std::os::raw::c_int;

use super::meta::Meta;

/// Work on a board's keys that a keyspace event asked for.
#[derive(Clone, Debug, PartialEq)]
pub enum Job {
    /// The main key `base` was deleted, expired, evicted or overwritten: remove its parts.
    Delete { db: c_int, base: Vec<u8> },
    /// `from` was renamed to `to`: drop `to`'s old parts, move `from`'s.
    Rename {
        db: c_int,
        from: Vec<u8>,
        to: Vec<u8>,
    },
    /// A part of `base` expired or was evicted: the board cannot stay consistent, remove it
    /// whole (no user is behind expiry or eviction).
    RemoveWhole { db: c_int, base: Vec<u8> },
    /// A user deleted or renamed away the meta of a known board: put it back.
    RestoreMeta {
        db: c_int,
        base: Vec<u8>,
        meta: Meta,
    },
    /// A part was edited natively: record the quarantine in the meta hash itself
    /// (`_edited`), so it survives a restart or a failover.
    MarkEdited { db: c_int, base: Vec<u8> },
}

impl Job {
    pub fn db(&self) -> c_int {
        match self {
            Job::Delete { db, .. }
            | Job::Rename { db, .. }
            | Job::RemoveWhole { db, .. }
            | Job::RestoreMeta { db, .. }
            | Job::MarkEdited { db, .. } => *db,
        }
    }

    /// SWAPDB: the job follows its database.
    fn swap_db(&mut self, swap: impl Fn(c_int) -> c_int) {
        match self {
            Job::Delete { db, .. }
            | Job::Rename { db, .. }
            | Job::RemoveWhole { db, .. }
            | Job::RestoreMeta { db, .. }
            | Job::MarkEdited { db, .. } => *db = swap(*db),
        }
    }
}

/// What the queued jobs make of the board at a name.
#[derive(Debug, PartialEq)]
pub enum Resolution {
    /// Its derived keys are at this base: the name itself, or the old name of a rename
    /// whose job has not run yet.
    At(Vec<u8>),
    /// A queued job removes it: whole (a part expired or was evicted; the sorted set at
    /// the name is that board's and goes too), or its parts after a DEL of its sorted set.
    Removed { whole: bool },
}

/// The jobs not run yet, in the order the events came.
#[derive(Default)]
pub struct JobQueue {
    jobs: Vec<Job>,
}

impl JobQueue {
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    pub fn push(&mut self, job: Job) {
        self.jobs.push(job);
    }

    /// Every queued job, in order, leaving the queue empty.
    pub fn take(&mut self) -> Vec<Job> {
        std::mem::take(&mut self.jobs)
    }

    pub fn clear(&mut self) {
        self.jobs.clear();
    }

    /// The key at `name` in `db` was replaced by another one (a RENAME onto it): a queued
    /// removal of the board there whole keeps to that board's parts, for the sorted set
    /// at `name` is no longer its own.
    pub fn overwritten(&mut self, db: c_int, name: &[u8]) {
        for job in &mut self.jobs {
            if let Job::RemoveWhole { db: d, base } = job {
                if *d == db && base.as_slice() == name {
                    *job = Job::Delete {
                        db,
                        base: std::mem::take(base),
                    };
                }
            }
        }
    }

    /// What the queued jobs make of the board at `name` in `db`: followed back through
    /// the renames queued after its last removal.
    pub fn resolve(&self, db: c_int, name: &[u8]) -> Resolution {
        let mut current = name.to_vec();
        for job in self.jobs.iter().rev() {
            match job {
                Job::Rename { db: d, from, to } if *d == db && *to == current => {
                    current = from.clone();
                }
                Job::Rename { db: d, from, .. } if *d == db && *from == current => {
                    return Resolution::Removed { whole: false }
                }
                Job::Delete { db: d, base } if *d == db && *base == current => {
                    return Resolution::Removed { whole: false }
                }
                Job::RemoveWhole { db: d, base } if *d == db && *base == current => {
                    return Resolution::Removed { whole: true }
                }
                _ => {}
            }
        }
        Resolution::At(current)
    }

    /// Where the derived keys of `name` are right now: `name` itself, the old name of a
    /// rename whose job has not run yet, or `None` if they belong to a removed board.
    pub fn resolve_base(&self, db: c_int, name: &[u8]) -> Option<Vec<u8>> {
        match self.resolve(db, name) {
            Resolution::At(base) => Some(base),
            Resolution::Removed { .. } => None,
        }
    }

    /// The meta the last queued job for `base` puts back at `base|meta`, if any.
    pub fn pending_restore(&self, db: c_int, base: &[u8]) -> Option<Meta> {
        self.jobs.iter().rev().find_map(|job| match job {
            Job::RestoreMeta {
                db: d,
                base: b,
                meta,
            } if *d == db && b == base => Some(*meta),
            _ => None,
        })
    }

    /// Keeps the jobs of the databases `keep` says (a flush drops the others).
    pub fn retain_dbs(&mut self, keep: impl Fn(c_int) -> bool) {
        self.jobs.retain(|job| keep(job.db()));
    }

    /// SWAPDB: every job follows its database (`swap` maps a database to its new number).
    pub fn swap_dbs(&mut self, swap: impl Fn(c_int) -> c_int) {
        for job in &mut self.jobs {
            job.swap_db(&swap);
        }
    }

    /// Bytes the queue holds (its jobs' names live on the heap too, and are few).
    pub fn bytes(&self) -> usize {
        self.jobs.capacity() * size_of::<Job>()
    }
}

/// The lifecycle's memory between keyspace events and the jobs they queue.
#[derive(Default)]
pub struct LifecycleMemory {
    /// Jobs queued by keyspace events, in order.
    pub jobs: JobQueue,
    /// The key of the last `rename_from` event, waiting for its `rename_to`.
    pub rename_from: Option<(c_int, Vec<u8>)>,
    /// The Redis 7.0 job timer is armed.
    pub job_timer_armed: bool,
    /// > 0 while tally itself runs a command (UNLINK, RENAME of parts): its events are ours.
    pub own_calls: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delete(db: c_int, base: &str) -> Job {
        Job::Delete {
            db,
            base: base.into(),
        }
    }

    fn rename(db: c_int, from: &str, to: &str) -> Job {
        Job::Rename {
            db,
            from: from.into(),
            to: to.into(),
        }
    }

    fn remove_whole(db: c_int, base: &str) -> Job {
        Job::RemoveWhole {
            db,
            base: base.into(),
        }
    }

    fn restore(db: c_int, base: &str, window: i64) -> Job {
        Job::RestoreMeta {
            db,
            base: base.into(),
            meta: Meta::new(window, 1000),
        }
    }

    fn queued(jobs: impl IntoIterator<Item = Job>) -> JobQueue {
        let mut queue = JobQueue::default();
        jobs.into_iter().for_each(|job| queue.push(job));
        queue
    }

    fn at(name: &str) -> Resolution {
        Resolution::At(name.into())
    }

    #[test]
    fn with_nothing_queued_a_name_is_its_own_base() {
        let queue = JobQueue::default();
        assert!(queue.is_empty());
        assert_eq!(queue.resolve(0, b"b"), at("b"));
        assert_eq!(queue.resolve_base(0, b"b"), Some(b"b".to_vec()));
        assert_eq!(queue.pending_restore(0, b"b"), None);
    }

    #[test]
    fn a_rename_while_its_job_is_queued_reads_the_parts_under_the_old_name() {
        let queue = queued([rename(0, "a", "b")]);
        assert_eq!(queue.resolve(0, b"b"), at("a"));
        // The old name has no board any more: its parts move to the new one.
        assert_eq!(queue.resolve(0, b"a"), Resolution::Removed { whole: false });
        // Another name, or the same name in another database, is untouched.
        assert_eq!(queue.resolve(0, b"c"), at("c"));
        assert_eq!(queue.resolve(1, b"b"), at("b"));
        assert_eq!(queue.resolve(1, b"a"), at("a"));
    }

    #[test]
    fn a_key_renamed_onto_a_board_being_removed_whole_is_not_removed_with_it() {
        let mut queue = queued([remove_whole(0, "x"), remove_whole(1, "x")]);
        queue.overwritten(0, b"x");
        queue.push(rename(0, "y", "x"));
        // x's old parts go; the sorted set now at x is y's, and y's parts come to it.
        let jobs = queue.take();
        assert!(matches!(&jobs[0], Job::Delete { db: 0, base } if base == b"x"));
        // The same name in another database is still removed whole.
        assert!(matches!(&jobs[1], Job::RemoveWhole { db: 1, base } if base == b"x"));
        assert_eq!(jobs.len(), 3);
    }

    #[test]
    fn renames_in_a_chain_lead_back_to_the_first_name() {
        let queue = queued([
            rename(0, "a", "b"),
            rename(0, "b", "c"),
            rename(0, "c", "d"),
        ]);
        assert_eq!(queue.resolve_base(0, b"d"), Some(b"a".to_vec()));
        for gone in ["a", "b", "c"] {
            assert_eq!(queue.resolve_base(0, gone.as_bytes()), None, "{gone}");
        }
    }

    #[test]
    fn a_rename_back_and_forth_ends_where_it_started() {
        let queue = queued([rename(0, "a", "b"), rename(0, "b", "a")]);
        assert_eq!(queue.resolve(0, b"a"), at("a"));
        assert_eq!(queue.resolve(0, b"b"), Resolution::Removed { whole: false });
    }

    #[test]
    fn a_board_deleted_then_created_again_under_its_name_is_not_followed_past_the_delete() {
        // `a` deleted, then `x` renamed onto `a`: `a`'s parts are `x`'s.
        let queue = queued([delete(0, "a"), rename(0, "x", "a")]);
        assert_eq!(queue.resolve(0, b"a"), at("x"));
        // Deleted after the rename onto it: the delete removes what the rename put there.
        let queue = queued([rename(0, "x", "a"), delete(0, "a")]);
        assert_eq!(queue.resolve(0, b"a"), Resolution::Removed { whole: false });
    }

    #[test]
    fn a_board_removed_whole_says_so_even_through_a_rename() {
        let queue = queued([rename(0, "a", "b"), remove_whole(0, "a")]);
        // The removal came after the rename was queued: it removes what was at `a` then.
        assert_eq!(queue.resolve(0, b"a"), Resolution::Removed { whole: true });
        let queue = queued([remove_whole(0, "a"), rename(0, "a", "b")]);
        assert_eq!(queue.resolve(0, b"b"), Resolution::Removed { whole: true });
        assert_eq!(queue.resolve_base(0, b"b"), None);
    }

    #[test]
    fn a_deleted_board_renamed_away_resolves_as_removed_under_its_new_name() {
        let queue = queued([delete(0, "a"), rename(0, "a", "b")]);
        assert_eq!(queue.resolve(0, b"b"), Resolution::Removed { whole: false });
    }

    #[test]
    fn the_last_meta_queued_for_a_board_is_the_one_put_back() {
        let queue = queued([
            restore(0, "b", 60_000),
            restore(1, "b", 120_000),
            restore(0, "c", 180_000),
            restore(0, "b", 240_000),
        ]);
        assert_eq!(
            queue.pending_restore(0, b"b").map(|m| m.window),
            Some(240_000)
        );
        assert_eq!(
            queue.pending_restore(1, b"b").map(|m| m.window),
            Some(120_000)
        );
        assert_eq!(
            queue.pending_restore(0, b"c").map(|m| m.window),
            Some(180_000)
        );
        assert_eq!(queue.pending_restore(2, b"b"), None);
        // A restore does not move a board.
        assert_eq!(queue.resolve(0, b"b"), at("b"));
    }

    #[test]
    fn a_flush_drops_the_jobs_of_its_database_and_swapdb_moves_them() {
        let mut queue = queued([
            delete(0, "a"),
            rename(1, "x", "y"),
            Job::MarkEdited {
                db: 2,
                base: b"e".to_vec(),
            },
        ]);
        queue.swap_dbs(|d| match d {
            0 => 1,
            1 => 0,
            d => d,
        });
        assert_eq!(queue.resolve(1, b"a"), Resolution::Removed { whole: false });
        assert_eq!(queue.resolve(0, b"a"), at("a"));
        assert_eq!(queue.resolve(0, b"y"), at("x"));
        queue.retain_dbs(|d| d != 1);
        assert_eq!(queue.resolve(1, b"a"), at("a"));
        let left: Vec<c_int> = queue.take().iter().map(Job::db).collect();
        assert_eq!(left, vec![0, 2]);
        assert!(queue.is_empty());
    }

    #[test]
    fn taking_the_jobs_keeps_their_order_and_empties_the_queue() {
        let jobs = vec![delete(0, "a"), rename(0, "b", "c"), remove_whole(0, "d")];
        let mut queue = queued(jobs.clone());
        assert!(queue.bytes() >= 3 * size_of::<Job>());
        assert_eq!(queue.take(), jobs);
        assert!(queue.is_empty());
        assert_eq!(queue.resolve(0, b"c"), at("c"));
        queue.push(delete(0, "c"));
        queue.clear();
        assert!(queue.is_empty());
    }

    #[test]
    fn a_part_expiring_lazily_inside_a_write_makes_the_board_read_as_removed() {
        // The write opened `b|slot|7`, which expired: the event queued the removal of the
        // whole board while the write still holds its name. The write sees it before
        // writing (and starts over on an empty board), and so does a rename of `b`'s
        // sorted set queued after it.
        let mut queue = JobQueue::default();
        assert_eq!(queue.resolve_base(0, b"b"), Some(b"b".to_vec()));
        queue.push(remove_whole(0, "b"));
        assert_eq!(queue.resolve(0, b"b"), Resolution::Removed { whole: true });
        queue.push(rename(0, "b", "c"));
        assert_eq!(queue.resolve(0, b"c"), Resolution::Removed { whole: true });
        // Once the jobs ran, the names are free again.
        queue.take();
        assert_eq!(queue.resolve(0, b"b"), at("b"));
        assert_eq!(queue.resolve(0, b"c"), at("c"));
    }
}
