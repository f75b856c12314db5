//! The server around tally: the module API functions it needs (checked once at load),
//! the clock, the selected database, the node's role, and the hooks tally registers
//! (keyspace and server events, `INFO tally`).
//!
//! Owns: raw calls that are not about keys, replies or command info. May not touch:
//! keys (that is `store`), command logic (the hooks only forward to `commands`).

use std::cell::Cell;
use std::ffi::{c_void, CStr};
use std::os::raw::{c_char, c_int};

use redis_module::{raw, Context, ContextFlags, NotifyEvent};

/// The module API function `$name` (a `RedisModule_*` symbol), known to be present.
macro_rules! api {
    ($name:ident) => {{
        // SAFETY: `server::check_api` fails the module load unless every symbol in
        // `required_api!` is present, and the unit test `every_module_api_function_called_is_checked_at_load`
        // keeps that list complete; the statics are written once, before `init`.
        #[allow(unused_unsafe)]
        let function = unsafe { redis_module::raw::$name.unwrap_unchecked() };
        function
    }};
}
pub(crate) use api;

/// Declares the module API functions tally calls (through `api!`) and generates the
/// load-time check that they exist.
macro_rules! required_api {
    ($($name:ident),* $(,)?) => {
        /// The required module API functions the server does not provide.
        fn missing_api() -> Vec<&'static str> {
            let mut missing = Vec::new();
            $(
                // SAFETY: reads a function-pointer static the crate set during
                // `RedisModule_Init`; nothing writes it afterwards.
                if unsafe { raw::$name }.is_none() {
                    missing.push(stringify!($name));
                }
            )*
            missing
        }
    };
}

// Every function here exists since Redis 7.0 (and in every Valkey).
required_api! {
    RedisModule_ACLCheckKeyPermissions,
    RedisModule_AvoidReplicaTraffic,
    RedisModule_CloseKey,
    RedisModule_CreateCommand,
    RedisModule_CreateString,
    RedisModule_CreateStringFromLongLong,
    RedisModule_DeleteKey,
    RedisModule_FreeModuleUser,
    RedisModule_FreeString,
    RedisModule_GetCommand,
    RedisModule_GetContextFlags,
    RedisModule_GetCurrentUserName,
    RedisModule_GetExpire,
    RedisModule_RetainString,
    RedisModule_GetModuleUserFromUserName,
    RedisModule_GetSelectedDb,
    RedisModule_HashGet,
    RedisModule_HashSet,
    RedisModule_InfoAddFieldCString,
    RedisModule_InfoAddFieldLongLong,
    RedisModule_InfoAddSection,
    RedisModule_IsKeysPositionRequest,
    RedisModule_KeyAtPos,
    RedisModule_KeyType,
    RedisModule_Milliseconds,
    RedisModule_MonotonicMicroseconds,
    RedisModule_NotifyKeyspaceEvent,
    RedisModule_OpenKey,
    RedisModule_RegisterInfoFunc,
    RedisModule_Replicate,
    RedisModule_ReplyWithArray,
    RedisModule_ReplyWithDouble,
    RedisModule_ReplyWithError,
    RedisModule_ReplyWithLongLong,
    RedisModule_ReplyWithMap,
    RedisModule_ReplyWithNull,
    RedisModule_ReplyWithSimpleString,
    RedisModule_ReplyWithString,
    RedisModule_ReplyWithStringBuffer,
    RedisModule_Scan,
    RedisModule_ScanCursorCreate,
    RedisModule_ScanCursorDestroy,
    RedisModule_ScanCursorRestart,
    RedisModule_ScanKey,
    RedisModule_SelectDb,
    RedisModule_SetCommandInfo,
    RedisModule_StringPtrLen,
    RedisModule_SubscribeToKeyspaceEvents,
    RedisModule_SubscribeToServerEvent,
    RedisModule_UnlinkKey,
    RedisModule_ValueLength,
    RedisModule_ZsetAdd,
    RedisModule_ZsetFirstInScoreRange,
    RedisModule_ZsetLastInScoreRange,
    RedisModule_ZsetRangeCurrentElement,
    RedisModule_ZsetRangeEndReached,
    RedisModule_ZsetRangeNext,
    RedisModule_ZsetRangePrev,
    RedisModule_ZsetRangeStop,
    RedisModule_ZsetRem,
    RedisModule_ZsetScore,
}

/// Called first in `init`: a server without one of the functions tally calls is refused
/// at load, so no call site needs a fallback.
pub fn check_api() -> Result<(), String> {
    let missing = missing_api();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the server lacks module API functions tally needs: {}",
            missing.join(", ")
        ))
    }
}

// ---------------------------------------------------------------------------- strings

/// The bytes of a module string the server lends for a call (a callback argument, an
/// argument vector entry).
///
/// # Safety
/// `s` must be NULL or a live module string that outlives `'a` and is not modified
/// meanwhile.
pub unsafe fn borrowed_bytes<'a>(s: *const raw::RedisModuleString) -> &'a [u8] {
    if s.is_null() {
        return &[];
    }
    let mut len = 0usize;
    // SAFETY: `s` is a live module string (caller's contract).
    let data = unsafe { api!(RedisModule_StringPtrLen)(s, &mut len) };
    if data.is_null() {
        return &[];
    }
    // SAFETY: the server returns the string's buffer of `len` bytes, alive as long as `s`.
    unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }
}

// ------------------------------------------------------------------------------ clock

/// The server's clock, in ms, read now: for timers and other work outside a command.
pub fn now_ms() -> i64 {
    // SAFETY: plain read of the server clock; no arguments.
    unsafe { api!(RedisModule_Milliseconds)() }
}

/// A command's now, in ms (what `AT` defaults to): the time the server took for the
/// command it is running, where the server offers it (`RedisModule_CachedMicroseconds`,
/// Redis 7.2+ and Valkey), else the clock read now (Redis 7.0).
///
/// Why: reading the wall clock costs about 0.02 us, a tenth of a one-window SUM. The
/// cached time is the one the server itself uses for the command (key expiry included),
/// taken when the outermost command started: every tally command of one MULTI/EXEC or
/// script sees the same now, as every key expiry in it does. Only for commands: in a
/// timer callback the cached time can be a whole event-loop iteration old.
pub fn command_now_ms() -> i64 {
    // SAFETY: reads a function-pointer static the crate set during `RedisModule_Init`
    // (absent on servers without the function); nothing writes it afterwards.
    match unsafe { raw::RedisModule_CachedMicroseconds } {
        // SAFETY: plain read of the server's cached time; no arguments.
        Some(cached_us) => unsafe { cached_us() }.div_euclid(1000),
        None => now_ms(),
    }
}

/// A monotonic clock for work budgets, in µs.
pub fn monotonic_us() -> u64 {
    // SAFETY: plain read of the server's monotonic clock; no arguments.
    unsafe { api!(RedisModule_MonotonicMicroseconds)() }
}

// -------------------------------------------------------------------------- databases

/// The database `ctx` works in.
pub fn selected_db(ctx: &Context) -> c_int {
    // SAFETY: `ctx.ctx` is the live context of the current call.
    unsafe { api!(RedisModule_GetSelectedDb)(ctx.ctx) }
}

fn select_db(ctx: &Context, db: c_int) -> bool {
    // SAFETY: `ctx.ctx` is the live context of the current call; a bad index is refused
    // by the server with an error status.
    (unsafe { api!(RedisModule_SelectDb)(ctx.ctx, db) }) == raw::REDISMODULE_OK as c_int
}

/// Works in another database for a while: selects it and selects the original one back
/// when dropped, so no early return leaves a timer or event context in the wrong one.
pub struct DbGuard<'a> {
    ctx: &'a Context,
    original: c_int,
}

impl<'a> DbGuard<'a> {
    pub fn new(ctx: &'a Context) -> DbGuard<'a> {
        DbGuard {
            ctx,
            original: selected_db(ctx),
        }
    }

    /// Selects `db`; false if the server refused it (no such database).
    pub fn select(&self, db: c_int) -> bool {
        select_db(self.ctx, db)
    }
}

impl Drop for DbGuard<'_> {
    fn drop(&mut self) {
        select_db(self.ctx, self.original);
    }
}

// ------------------------------------------------------------------------------- role

/// True on a primary that is not loading: only then may tally write on its own (timers,
/// lifecycle jobs); replicas receive the effects.
pub fn is_acting_primary(ctx: &Context) -> bool {
    let flags = ctx.get_flags();
    flags.contains(ContextFlags::MASTER) && !flags.contains(ContextFlags::LOADING)
}

/// True while `CLIENT PAUSE` or a manual failover holds writes so that replicas catch up.
/// Work that would replicate effects outside a command must wait: Redis 7.0 aborts on
/// effects propagated during such a pause.
pub fn replica_traffic_paused() -> bool {
    // SAFETY: no arguments; reads server state on the main thread.
    (unsafe { api!(RedisModule_AvoidReplicaTraffic)() }) != 0
}

// ------------------------------------------------------------------------------ hooks

/// What tally does when the server tells it something; given to [`register_hooks`] by
/// the command layer, so this module knows nothing of the families.
#[derive(Clone, Copy)]
pub struct Hooks {
    /// A keyspace event on `key` in the selected database (every class).
    pub keyspace_event: fn(ctx: &Context, class: NotifyEvent, event: &str, key: &[u8]),
    /// FLUSHDB of `db`, or FLUSHALL (`db` = -1).
    pub flushed: fn(db: c_int),
    /// SWAPDB `a` `b`.
    pub swapped: fn(a: c_int, b: c_int),
    /// An RDB/AOF load starts (`ended` false) or ends (`ended` true).
    pub loading: fn(ended: bool),
    /// The fields of `INFO tally`.
    pub info: fn() -> Vec<(&'static CStr, i64)>,
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks {
            keyspace_event: |_, _, _, _| {},
            flushed: |_| {},
            swapped: |_, _| {},
            loading: |_| {},
            info: Vec::new,
        }
    }
}

thread_local! {
    // Hooks run on Redis's main thread.
    static HOOKS: Cell<Hooks> = Cell::new(Hooks::default());
}

fn hooks() -> Hooks {
    HOOKS.with(Cell::get)
}

/// Registers `INFO tally`, and subscribes to keyspace events (every class, since a key
/// may leave a family by being overwritten with any type) and to flush, SWAPDB and
/// loading events. Called last in `init`, once nothing else can fail: the server does
/// not undo subscriptions of a module whose load fails, and a dangling one would crash
/// it at the next event.
pub fn register_hooks(ctx: &Context, registered: Hooks) -> Result<(), String> {
    HOOKS.with(|h| h.set(registered));
    // SAFETY: live load context; the callback lives as long as the module.
    unsafe { api!(RedisModule_RegisterInfoFunc)(ctx.ctx, Some(info_func)) };
    let classes = NotifyEvent::GENERIC
        | NotifyEvent::STRING
        | NotifyEvent::LIST
        | NotifyEvent::SET
        | NotifyEvent::HASH
        | NotifyEvent::ZSET
        | NotifyEvent::EXPIRED
        | NotifyEvent::EVICTED
        | NotifyEvent::STREAM;
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

extern "C" fn on_keyspace_notification(
    ctx: *mut raw::RedisModuleCtx,
    class: c_int,
    event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    if event.is_null() {
        return raw::REDISMODULE_OK as c_int;
    }
    // SAFETY: the server passes a NUL-terminated event name valid for this call.
    let event = unsafe { CStr::from_ptr(event) }.to_bytes();
    // Event names are ASCII (checked word by word: cheaper than UTF-8 validation, and
    // this runs for every keyspace event of the server).
    if !event.is_ascii() {
        return raw::REDISMODULE_OK as c_int;
    }
    // SAFETY: ASCII bytes are valid UTF-8.
    let event = unsafe { std::str::from_utf8_unchecked(event) };
    // SAFETY: the server lends the key name for this call.
    let key = unsafe { borrowed_bytes(key) };
    let ctx = Context::new(ctx);
    let class = NotifyEvent::from_bits_truncate(class);
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        (hooks().keyspace_event)(&ctx, class, event, key)
    }));
    raw::REDISMODULE_OK as c_int
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
        (hooks.flushed)(db);
    } else if event.id == raw::REDISMODULE_EVENT_SWAPDB {
        // SAFETY: the server passes a RedisModuleSwapDbInfo with SWAPDB events.
        if let Some(info) = unsafe { data.cast::<raw::RedisModuleSwapDbInfo>().as_ref() } {
            (hooks.swapped)(info.dbnum_first, info.dbnum_second);
        }
    } else if event.id == raw::REDISMODULE_EVENT_LOADING {
        (hooks.loading)(subevent == raw::REDISMODULE_SUBEVENT_LOADING_ENDED);
    }
}
