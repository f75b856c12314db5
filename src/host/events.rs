//! What the server tells tally: keyspace events (screened first against the names of
//! the keys tally may hold state for, which it tracks here), flush, SWAPDB and loading
//! events, and `INFO tally`; each forwarded to the hooks the command layer registers.
//!
//! Owns: the keyspace and server event callbacks and the tracked names. May not touch:
//! keys (that is `store`), command logic (the hooks only forward to `commands`).

use std::cell::{Cell, RefCell};
use std::ffi::{c_void, CStr};
use std::os::raw::{c_char, c_int};

use redis_module::{raw, Context, NotifyEvent};

use crate::collections::name_set::{self, NameSet};
use crate::host::server::{api, borrowed_bytes};

// ---------------------------------------------------------------------- tracked keys

thread_local! {
    /// The keys tally may hold state for, per database: every key tally opened that
    /// existed or was opened for writing (a derived key as its object), and every key that
    /// arrived under a new name, until it is deleted, expired, evicted, renamed or moved
    /// away, or its database flushed. The keyspace callback reads [`SCREEN`] first.
    static TRACKED: RefCell<Tracked> = const { RefCell::new(Tracked(NameSet::new())) };
    /// What the keyspace callback reads for every event of the server: a view of
    /// [`TRACKED`] (taken again after every change to it) and the byte of derived names.
    /// A plain cell of plain data: reading it costs no borrow and no check of a
    /// thread-local's state.
    static SCREEN: Cell<Screen> = const {
        Cell::new(Screen {
            view: ScreenView::EMPTY,
            part_byte: 0,
        })
    };
}

thread_local! {
    /// The name of the keyspace event tally is raising (null when none): the callback
    /// turns it away first, since tally's own writes keep its state in step themselves
    /// (every hot write raises one).
    static RAISING: Cell<*const c_char> = const { Cell::new(std::ptr::null()) };
}

/// Runs `raise`, which raises the keyspace event `event` (through the module API), with
/// the keyspace callback told that the event is tally's own.
pub fn raise_own_event<T>(event: &CStr, raise: impl FnOnce() -> T) -> T {
    let before = RAISING.with(|r| r.replace(event.as_ptr()));
    let result = raise();
    RAISING.with(|r| r.set(before));
    result
}

#[derive(Clone, Copy)]
struct Screen {
    view: ScreenView,
    part_byte: u8,
}

/// What [`name_set::screen_with`] reads ([`NameSet::screen_parts`]), copied out of the set: the
/// ids' seeds and where the filter's `mask + 1` words are.
#[derive(Clone, Copy)]
struct ScreenView {
    seed: (u64, u64),
    words: *const u64,
    mask: usize,
}

impl ScreenView {
    /// The view of a set that keeps no name.
    const EMPTY: ScreenView = ScreenView {
        seed: (0, 0),
        words: name_set::NO_NAMES.as_ptr(),
        mask: 0,
    };

    fn of(names: &NameSet) -> ScreenView {
        let (seed, words) = names.screen_parts();
        ScreenView {
            seed,
            words: words.as_ptr(),
            mask: words.len().wrapping_sub(1),
        }
    }
}

/// The tracked names. Gone (at the thread's end) they leave no view of them behind.
struct Tracked(NameSet);

impl Drop for Tracked {
    fn drop(&mut self) {
        let _ = SCREEN.try_with(|s| {
            s.set(Screen {
                view: ScreenView::EMPTY,
                ..s.get()
            })
        });
    }
}

/// Runs `f` on the tracked names, and gives the keyspace callback a view of them as they
/// are after it unless `f` says they did not change (even if `f` panics: the view must
/// never outlive what it shows). The borrow never nests (`f` calls nothing back), so it
/// always succeeds; were it to fail, the names would stay as they are.
fn with_tracked(f: impl FnOnce(&mut NameSet) -> bool) {
    struct Republish<'a>(&'a mut NameSet, bool);
    impl Drop for Republish<'_> {
        fn drop(&mut self) {
            if self.1 {
                let view = ScreenView::of(self.0);
                SCREEN.with(|s| s.set(Screen { view, ..s.get() }));
            }
        }
    }
    TRACKED.with(|t| {
        if let Ok(mut t) = t.try_borrow_mut() {
            let mut names = Republish(&mut t.0, true);
            names.1 = f(names.0);
        }
    });
}

/// What the keyspace callback learns of a key name before it asks for the database.
#[derive(Clone, Copy)]
enum Seen {
    /// Tracked in no database: the filter of all databases turned it away.
    No,
    /// Perhaps tracked: the exact set of the event's database decides.
    Maybe(u64),
}

/// In one pass over `name`: whether it may be tracked in some database, and whether it
/// contains the byte every derived key's name contains.
#[inline(always)]
fn screen(name: &[u8]) -> (Seen, bool) {
    let Screen { view, part_byte } = SCREEN.with(Cell::get);
    // SAFETY: `block <= mask`, and the view's `mask + 1` words are live and current: the
    // view was taken of `TRACKED` after its last change (`with_tracked`), and `TRACKED`
    // leaves the empty view (a static word) when it goes.
    let word = |block: usize| unsafe { *view.words.add(block) };
    let screened = name_set::screen_with(view.seed, view.mask, word, name, part_byte);
    (
        screened.maybe.map_or(Seen::No, Seen::Maybe),
        screened.marked,
    )
}

/// True if events on the name `seen` in database `db` must reach the families (also when
/// the set is busy, which it never is here: the long way is always correct).
fn is_tracked(db: c_int, seen: Seen) -> bool {
    match seen {
        Seen::No => false,
        Seen::Maybe(id) => {
            TRACKED.with(|t| t.try_borrow().map_or(true, |t| t.0.contains_id(db, id)))
        }
    }
}

/// tally opened `name` in `db` (or it arrived there): its keyspace events must reach
/// the families from now on. A derived key is tracked as the object it belongs to.
pub fn track(db: c_int, name: &[u8]) {
    let name = (hooks().owner_of)(name).unwrap_or(name);
    // Most opens are of a key tracked already (often the one opened last, which the set
    // tells without a lookup): the view is taken again only when the set changed.
    with_tracked(|t| t.insert(db, name));
}

/// tally deleted `name` itself (no event tells the callback): it needs tracking no more.
pub fn untrack(db: c_int, name: &[u8]) {
    if (hooks().owner_of)(name).is_none() {
        with_tracked(|t| {
            t.remove(db, name);
            true
        });
    }
}

/// How many keys are tracked and the bytes that takes.
pub fn tracked_keys() -> (usize, usize) {
    TRACKED.with(|t| t.try_borrow().map_or((0, 0), |t| (t.0.len(), t.0.bytes())))
}

// ------------------------------------------------------------------------------ hooks

/// What tally does when the server tells it something; given to [`register_hooks`] by
/// the command layer, so this module knows nothing of the families.
#[derive(Clone, Copy)]
pub struct Hooks {
    /// A keyspace event on `key` in the selected database, for a key tally tracks (see
    /// [`track`]), a derived key (`owner_of`), or a key arriving under a new name.
    pub keyspace_event: fn(ctx: &Context, class: NotifyEvent, event: &str, key: &[u8]),
    /// The object a derived key belongs to, if `name` is one: its events always reach
    /// `keyspace_event`, and opening it tracks the object's own name.
    pub owner_of: fn(name: &[u8]) -> Option<&[u8]>,
    /// A byte every derived key's name contains: `owner_of` is asked only about names
    /// that contain it.
    pub part_byte: u8,
    /// FLUSHDB of `db`, or FLUSHALL (`db` = -1).
    pub flushed: fn(db: c_int),
    /// SWAPDB `a` `b`.
    pub swapped: fn(a: c_int, b: c_int),
    /// An RDB/AOF load starts (`ended` false) or ends (`ended` true).
    pub loading: fn(ended: bool),
    /// The fields of `INFO tally`.
    pub info: fn() -> Vec<(&'static CStr, i64)>,
}

impl Hooks {
    /// Hooks that do nothing (before [`register_hooks`]).
    const NONE: Hooks = Hooks {
        keyspace_event: |_, _, _, _| {},
        owner_of: |_| None,
        part_byte: 0,
        flushed: |_| {},
        swapped: |_, _| {},
        loading: |_| {},
        info: Vec::new,
    };
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks::NONE
    }
}

thread_local! {
    // Hooks run on Redis's main thread. Built in a `const`: every keyspace event reads it,
    // and a lazily started thread-local checks its state on each read.
    static HOOKS: Cell<Hooks> = const { Cell::new(Hooks::NONE) };
}

fn hooks() -> Hooks {
    HOOKS.with(Cell::get)
}

/// The keyspace event classes tally needs. A tally object is a hash (and a leaderboard's
/// sorted sets); it changes or leaves by a hash or sorted-set command, a generic one (DEL,
/// RENAME, RESTORE, COPY, MOVE, EXPIRE ...), an expiry or an eviction, or by being
/// overwritten with another type, which only SET and friends (STRING) and SUNIONSTORE and
/// friends (SET) do. List and stream commands refuse a key of another type (WRONGTYPE),
/// so their events are never about a tally object: those classes stay unsubscribed.
pub fn keyspace_classes() -> NotifyEvent {
    NotifyEvent::GENERIC
        | NotifyEvent::STRING
        | NotifyEvent::SET
        | NotifyEvent::HASH
        | NotifyEvent::ZSET
        | NotifyEvent::EXPIRED
        | NotifyEvent::EVICTED
}

/// Registers `INFO tally`, and subscribes to the keyspace event classes tally needs and
/// to flush, SWAPDB and loading events. Called last in `init`, once nothing else can
/// fail: the server does not undo subscriptions of a module whose load fails, and a
/// dangling one would crash it at the next event.
pub fn register_hooks(ctx: &Context, registered: Hooks) -> Result<(), String> {
    HOOKS.with(|h| h.set(registered));
    SCREEN.with(|s| {
        s.set(Screen {
            part_byte: registered.part_byte,
            ..s.get()
        })
    });
    // SAFETY: live load context; the callback lives as long as the module.
    unsafe { api!(RedisModule_RegisterInfoFunc)(ctx.ctx, Some(info_func)) };
    let classes = keyspace_classes();
    // SAFETY: as above.
    let status = unsafe {
        api!(RedisModule_SubscribeToKeyspaceEvents)(
            ctx.ctx,
            classes.bits(),
            Some(on_keyspace_notification),
        )
    };
    if status != raw::REDISMODULE_OK as c_int {
        return Err("cannot subscribe to keyspace events".into());
    }
    for id in [
        raw::REDISMODULE_EVENT_FLUSHDB,
        raw::REDISMODULE_EVENT_SWAPDB,
        raw::REDISMODULE_EVENT_LOADING,
    ] {
        let event = raw::RedisModuleEvent { id, dataver: 1 };
        // SAFETY: as above; the event ids exist since Redis 6.
        unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx.ctx, event, Some(on_server_event)) };
    }
    Ok(())
}

extern "C" fn info_func(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    // SAFETY: the info context the server passes for this call.
    unsafe { api!(RedisModule_InfoAddSection)(ctx, std::ptr::null_mut()) };
    // SAFETY: as above, with NUL-terminated static strings (shown as `tally_version`).
    unsafe {
        api!(RedisModule_InfoAddFieldCString)(
            ctx,
            c"version".as_ptr(),
            crate::cmddocs::VERSION_C.as_ptr(),
        )
    };
    for (name, value) in (hooks().info)() {
        // SAFETY: as above, with a NUL-terminated field name.
        unsafe { api!(RedisModule_InfoAddFieldLongLong)(ctx, name.as_ptr(), value) };
    }
}

/// Every keyspace event of the subscribed classes on the whole server comes here, so an
/// event on a key that is not tally's must cost next to nothing: one pass over the name
/// hashes it for the tracked names' filter (one 64-bit word of one cache line) and finds
/// whether it contains the byte of derived names; a name neither tracked nor derived,
/// with an event that is not generic, is turned away there, before the database is asked,
/// before any allocation, string conversion or key open. Everything else is in
/// [`screened_event`].
extern "C" fn on_keyspace_notification(
    ctx: *mut raw::RedisModuleCtx,
    class: c_int,
    event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    if event.is_null() || event == RAISING.with(Cell::get) {
        return raw::REDISMODULE_OK as c_int;
    }
    // SAFETY: the server lends the key name for this call.
    let key = unsafe { borrowed_bytes(key) };
    let (seen, marked) = screen(key);
    let class = NotifyEvent::from_bits_truncate(class);
    // A generic event (DEL, RENAME, RESTORE ...) on another key may bring a tally object
    // under a new name: those are read further on.
    if matches!(seen, Seen::No) && !marked && !class.contains(NotifyEvent::GENERIC) {
        return raw::REDISMODULE_OK as c_int;
    }
    // SAFETY: the callback's own context and event name, checked non-NULL above.
    unsafe { screened_event(ctx, class, event, key, seen, marked) }
}

/// An event the callback could not turn away at once: the database decides whether the
/// key is tracked, and the families whether a marked name is a derived key.
///
/// # Safety
/// As [`keyspace_event`].
#[inline(never)]
unsafe fn screened_event(
    ctx: *mut raw::RedisModuleCtx,
    class: NotifyEvent,
    event: *const c_char,
    key: &[u8],
    seen: Seen,
    marked: bool,
) -> c_int {
    // SAFETY: the live context of this callback, set to the event's database.
    let db = unsafe { api!(RedisModule_GetSelectedDb)(ctx) };
    let tracked = is_tracked(db, seen);
    let derived = !tracked && marked && (hooks().owner_of)(key).is_some();
    if !tracked && !derived && !class.contains(NotifyEvent::GENERIC) {
        return raw::REDISMODULE_OK as c_int;
    }
    // SAFETY: the function's own contract.
    unsafe { keyspace_event(ctx, db, class, event, key, tracked, derived) }
}

/// The keyspace events that may concern tally: on a tracked key (`tracked`), a derived
/// key (`derived`), or a generic event on any other, in database `db`.
///
/// # Safety
/// `ctx` and `event` are the live context and the non-NULL, NUL-terminated event name of
/// the keyspace callback this is called from.
unsafe fn keyspace_event(
    ctx: *mut raw::RedisModuleCtx,
    db: c_int,
    class: NotifyEvent,
    event: *const c_char,
    key: &[u8],
    tracked: bool,
    derived: bool,
) -> c_int {
    let done = raw::REDISMODULE_OK as c_int;
    let hooks = hooks();
    // SAFETY: a NUL-terminated event name valid for this call (the function's contract).
    let event = unsafe { CStr::from_ptr(event) }.to_bytes();
    // A key that arrives under a new name (or a new database) may be a tally object: the
    // families look, and from now on its events come here.
    let arrives = matches!(event, b"restore" | b"rename_to" | b"copy_to" | b"move_to");
    // The source of a RENAME: its destination's event, next, needs to know it.
    if !tracked && !derived && !arrives && event != b"rename_from" {
        return done;
    }
    // Event names are ASCII (checked word by word: cheaper than UTF-8 validation).
    if !event.is_ascii() {
        return done;
    }
    // SAFETY: ASCII bytes are valid UTF-8.
    let event = unsafe { std::str::from_utf8_unchecked(event) };
    if arrives {
        track(db, key);
    }
    let context = Context::new(ctx);
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        (hooks.keyspace_event)(&context, class, event, key)
    }));
    // The key is gone: the families forgot it (a derived key's board stays tracked). A
    // string or set event on a key means it now holds a string or a set (SET, MSET,
    // SUNIONSTORE ... overwrite any type; every other command of those classes refuses a
    // hash or a sorted set): not tally's any more, so its events need not come the long
    // way. If tally opens it again, it is tracked again.
    let gone = matches!(
        event,
        "del" | "expired" | "evicted" | "rename_from" | "move_from"
    ) || class.intersects(NotifyEvent::STRING | NotifyEvent::SET);
    if gone && tracked {
        untrack(db, key);
    }
    done
}

unsafe extern "C" fn on_server_event(
    _ctx: *mut raw::RedisModuleCtx,
    event: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    let hooks = hooks();
    if event.id == raw::REDISMODULE_EVENT_FLUSHDB {
        // SAFETY: the server passes a RedisModuleFlushInfo with FLUSHDB events.
        let db = unsafe { data.cast::<raw::RedisModuleFlushInfo>().as_ref() }
            .map_or(-1, |info| info.dbnum);
        with_tracked(|t| {
            t.clear_db(db);
            true
        });
        (hooks.flushed)(db);
    } else if event.id == raw::REDISMODULE_EVENT_SWAPDB {
        // SAFETY: the server passes a RedisModuleSwapDbInfo with SWAPDB events.
        if let Some(info) = unsafe { data.cast::<raw::RedisModuleSwapDbInfo>().as_ref() } {
            with_tracked(|t| {
                t.swap_dbs(info.dbnum_first, info.dbnum_second);
                true
            });
            (hooks.swapped)(info.dbnum_first, info.dbnum_second);
        }
    } else if event.id == raw::REDISMODULE_EVENT_LOADING {
        // What tally knew of the data is dropped at the start and the end of a load; the
        // scan that follows opens (and so tracks) the tally objects again.
        with_tracked(|t| {
            t.clear_db(-1);
            true
        });
        (hooks.loading)(subevent == raw::REDISMODULE_SUBEVENT_LOADING_ENDED);
    }
}
