//! Server-side expiry: an in-memory schedule of keys that have slots to expire, and the
//! one module timer that works through it in bounded ticks.
//!
//! * Writes tell the schedule when their key next has work (`schedule`).
//! * Each tick (at most `tally.expire-budget-us` of work, like Redis's own active expire
//!   cycle) visits the due keys; the family code trims them and replicates the effects.
//!   With work left the next tick comes after 1 ms, otherwise at the next due time
//!   (at most 100 ms away).
//! * Timers act only on a primary that is not loading: replicas get the effects.
//! * A flush empties the schedule at once; the entries it held are freed by the ticks
//!   (on every server), a bounded amount per tick.
//! * The schedule lives in memory only. On the first tick as a primary (start-up, after a
//!   load, after promotion) a bounded incremental SCAN of every database finds the tally
//!   objects again, so expiry resumes without any client action. Keys that arrive by
//!   RESTORE/MIGRATE/RENAME/COPY/MOVE are scheduled from keyspace events.
//!
//! Owns: the schedule and the timer. May not touch: the families (it calls them through
//! the [`Visitor`] given to [`start`]) or raw module calls (`server`, `store::scan`).

use std::cell::{Cell, RefCell};
use std::os::raw::c_int;
use std::time::Duration;

use redis_module::{Context, NotifyEvent};

use crate::collections::due_queue::{DueQueue, Popped};
use crate::host::config;
use crate::host::server::{
    is_acting_primary, monotonic_us, now_ms, replica_traffic_paused, selected_db, DbGuard,
};
use crate::host::store::scan::KeyspaceCursor;

/// What visiting a key found.
pub enum Visit {
    /// The key has more work at this time.
    DueAt(i64),
    /// The budget ran out in the middle of this key: come back at once.
    Unfinished,
    /// Nothing left to expire (or not a tally object any more): forget it.
    Done,
}

/// Counters shown by `INFO tally`.
#[derive(Default, Clone, Copy)]
pub struct Stats {
    pub timer_ticks: u64,
    pub slots_expired: u64,
    pub last_tick_us: u64,
    pub max_tick_us: u64,
    pub keys_visited: u64,
}

struct ScanState {
    db: c_int,
    cursor: KeyspaceCursor,
}

/// What the timer calls to do the families' work; given to [`start`] by the command
/// layer, so this module knows nothing of the families.
#[derive(Clone, Copy)]
pub struct Visitor {
    /// Trims the key `name` of the selected database at `now`, within the deadline (µs).
    pub visit: fn(ctx: &Context, name: &[u8], now: i64, deadline_us: u64) -> Visit,
    /// True if `name` holds an object that has slots to expire (for the start-up scan).
    pub is_object: fn(ctx: &Context, name: &[u8]) -> bool,
    /// Frees, until the deadline (µs), what the families set aside to free in steps (a
    /// flush may leave no key to visit); true when nothing is left.
    pub release: fn(deadline_us: u64) -> bool,
}

impl Default for Visitor {
    fn default() -> Self {
        Visitor {
            visit: |_, _, _, _| Visit::Done,
            is_object: |_, _| false,
            release: |_| true,
        }
    }
}

#[derive(Default)]
struct Schedule {
    /// The keys and when each next has work.
    due: DueQueue,
    scan: Option<ScanState>,
    was_primary: bool,
    stats: Stats,
}

thread_local! {
    // Module commands, timers and events all run on Redis's main thread.
    static SCHEDULE: RefCell<Schedule> = RefCell::new(Schedule::default());
    static VISITOR: Cell<Visitor> = Cell::new(Visitor::default());
}

const IDLE_TICK_MS: i64 = 100;
const NUM_DBS_TO_SCAN_MAX: c_int = 1 << 16;
/// What the first visit of a tick may take even when the budget is smaller (or spent).
const MIN_STEP_US: u64 = 200;
/// Schedule entries no longer current that one pop may drop before the tick looks at its
/// clock again (each costs a hash lookup).
const STALE_PER_POP: usize = 1024;

fn with_schedule<T>(f: impl FnOnce(&mut Schedule) -> T) -> T {
    SCHEDULE.with(|s| f(&mut s.borrow_mut()))
}

/// Called by writes: `key` (in the caller's database) has work at `due`.
pub fn schedule(ctx: &Context, key: &[u8], due: i64) {
    let db = selected_db(ctx);
    with_schedule(|s| s.due.insert(db, key, due));
}

/// A key tally was tracking is gone (deleted by tally itself or by anyone): forget it, so
/// the schedule stays proportional to the live tally objects.
pub fn unschedule(ctx: &Context, key: &[u8]) {
    let db = selected_db(ctx);
    with_schedule(|s| s.due.remove(db, key));
}

/// FLUSHDB / FLUSHALL (`db` = -1): every entry of the flushed databases goes.
pub fn forget_db(db: c_int) {
    with_schedule(|s| s.due.clear_db(db));
}

/// Keyspace events: a key that arrived under a new name or from elsewhere is visited
/// soon; a key that went away, or was overwritten with a value of another type, leaves
/// the schedule (which must stay proportional to the live tally objects).
pub fn on_keyspace_event(ctx: &Context, class: NotifyEvent, event: &str, key: &[u8]) {
    match event {
        "restore" | "rename_to" | "copy_to" | "move_to" => schedule(ctx, key, 0),
        "del" | "expired" | "evicted" | "rename_from" | "move_from" => unschedule(ctx, key),
        _ if class.intersects(
            NotifyEvent::STRING
                | NotifyEvent::LIST
                | NotifyEvent::SET
                | NotifyEvent::ZSET
                | NotifyEvent::STREAM,
        ) =>
        {
            unschedule(ctx, key)
        }
        _ => {}
    }
}

/// SWAPDB a b: scheduled keys of one database now live in the other.
pub fn swap_dbs(a: c_int, b: c_int) {
    with_schedule(|s| s.due.swap_dbs(a, b));
}

pub fn stats() -> (Stats, usize, usize, bool) {
    let now = now_ms();
    with_schedule(|s| {
        let backlog = s.due.backlog(now);
        (s.stats, s.due.tracked(), backlog, s.scan.is_some())
    })
}

/// Starts the timer chain; called once from the module's init.
pub fn start(ctx: &Context, visitor: Visitor) {
    VISITOR.with(|v| v.set(visitor));
    arm(ctx, 1);
}

fn visitor() -> Visitor {
    VISITOR.with(Cell::get)
}

fn arm(ctx: &Context, delay_ms: i64) {
    let delay = Duration::from_millis(delay_ms.clamp(1, IDLE_TICK_MS) as u64);
    ctx.create_timer(delay, tick, ());
}

fn tick(ctx: &Context, _: ()) {
    let started = monotonic_us();
    with_schedule(|s| s.stats.timer_ticks += 1);
    let budget = config::expire_budget_us().max(1) as u64;
    let deadline = started + budget;
    // What a flush set aside is freed on every server (replicas flush and load too).
    let released = release_retired(deadline) && (visitor().release)(deadline);
    let idle = if released { IDLE_TICK_MS } else { 1 };
    if !is_acting_primary(ctx) {
        with_schedule(|s| s.was_primary = false);
        record_tick(started);
        arm(ctx, idle);
        return;
    }
    // `CLIENT PAUSE` and a cluster manual failover pause writes so that replicas catch up
    // with the primary's offset; Redis's own active expiry waits too. Replicating effects
    // now would keep the offsets apart, and Redis 7.0 aborts on it (assertion in
    // propagatePendingCommands, seen with a replica attached). Wait for the pause to end.
    if replica_traffic_paused() {
        record_tick(started);
        arm(ctx, idle);
        return;
    }
    let became_primary = with_schedule(|s| !std::mem::replace(&mut s.was_primary, true));
    if became_primary {
        begin_scan();
    }
    let now = now_ms();
    let db_guard = DbGuard::new(ctx);
    // Each tick makes progress whatever the budget: its first visit may always take up to
    // MIN_STEP_US (a visit that cannot start within its deadline answers "unfinished", and
    // a budget smaller than opening one key would otherwise never trim anything).
    let mut first = true;
    while first || monotonic_us() < deadline {
        let (db, key) = match with_schedule(|s| s.due.pop_due_bounded(now, STALE_PER_POP)) {
            Popped::Due(db, key) => (db, key),
            // Dropping entries no longer current is this tick's progress: the clock decides
            // whether it goes on.
            Popped::Skipped => {
                first = false;
                continue;
            }
            Popped::Nothing => break,
        };
        if !db_guard.select(db) {
            continue;
        }
        let visit_deadline = if first {
            deadline.max(monotonic_us() + MIN_STEP_US)
        } else {
            deadline
        };
        first = false;
        let visit = (visitor().visit)(ctx, &key, now, visit_deadline);
        with_schedule(|s| {
            s.stats.keys_visited += 1;
            match visit {
                Visit::DueAt(due) => s.due.insert(db, &key, due),
                Visit::Unfinished => s.due.insert(db, &key, now),
                Visit::Done => {}
            }
        });
    }
    // The start-up scan takes at least one step per tick (it only schedules keys).
    scan_step(ctx, &db_guard, deadline, now);
    drop(db_guard);
    record_tick(started);
    let next = with_schedule(|s| {
        if s.scan.is_some() || !released {
            return 1;
        }
        match s.due.first_due() {
            Some(due) => due.saturating_sub(now_ms()),
            None => IDLE_TICK_MS,
        }
    });
    arm(ctx, next);
}

/// Records the duration of the tick that began at `started` (for `INFO tally`): this
/// timer's ticks, and those of a replica's leaderboard timer.
pub(crate) fn record_tick(started: u64) {
    let elapsed = monotonic_us().saturating_sub(started);
    with_schedule(|s| {
        s.stats.last_tick_us = elapsed;
        s.stats.max_tick_us = s.stats.max_tick_us.max(elapsed);
    });
}

/// Frees, until `deadline`, schedule entries a flush set aside; true when none are left.
fn release_retired(deadline: u64) -> bool {
    // Small steps, so that the deadline is checked often enough.
    const STEP_ENTRIES: usize = 512;
    loop {
        if with_schedule(|s| s.due.release_some(STEP_ENTRIES)) {
            return true;
        }
        if monotonic_us() >= deadline {
            return false;
        }
    }
}

/// Records slots removed by a visit (for `INFO tally`).
pub fn count_expired(n: u64) {
    with_schedule(|s| s.stats.slots_expired += n);
}

/// Asks for a fresh scan of the keyspace (after a load or SWAPDB). It starts at the next
/// tick as a primary.
pub fn request_scan() {
    with_schedule(|s| {
        s.was_primary = false;
        // A scan in progress walks databases whose contents just changed: start over.
        s.scan = None;
    });
}

fn begin_scan() {
    with_schedule(|s| {
        if s.scan.is_none() {
            s.scan = Some(ScanState {
                db: 0,
                cursor: KeyspaceCursor::new(),
            });
        }
    });
}

/// Walks the keyspace a little (at least one step), scheduling every tally object it finds
/// for a visit now.
fn scan_step(ctx: &Context, db_guard: &DbGuard, deadline: u64, now: i64) {
    let mut first = true;
    while first || monotonic_us() < deadline {
        first = false;
        // The cursor leaves the schedule while it runs: the scan callback must not find
        // the schedule borrowed.
        let Some(mut scan) = with_schedule(|s| s.scan.take()) else {
            return;
        };
        if scan.db >= NUM_DBS_TO_SCAN_MAX || !db_guard.select(scan.db) {
            // Past the last database: the scan is complete.
            return;
        }
        let mut names: Vec<Vec<u8>> = Vec::new();
        let more = scan.cursor.step(ctx, |name| names.push(name.to_vec()));
        let is_object = visitor().is_object;
        for name in names {
            if is_object(ctx, &name) {
                with_schedule(|s| s.due.insert(scan.db, &name, now));
            }
        }
        if !more {
            scan.cursor.restart();
            scan.db += 1;
        }
        with_schedule(|s| {
            // A request_scan meanwhile (it cannot happen inside a tick, but be safe)
            // wins over this one.
            if s.was_primary && s.scan.is_none() {
                s.scan = Some(scan);
            }
        });
    }
}
