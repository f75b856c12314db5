//! The server around tally: the module API functions it needs (checked once at load),
//! the clock, the selected database, the node's role and the command filter. The events
//! the server tells tally of are `events.rs`.
//!
//! Owns: raw calls that are not about keys, replies or command info. May not touch:
//! keys (that is `store`), command logic (the hooks only forward to `commands`).

use std::cell::Cell;
use std::os::raw::c_int;

use redis_module::{raw, Context, ContextFlags};

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
    RedisModule_CommandFilterArgGet,
    RedisModule_CommandFilterArgsCount,
    RedisModule_CreateCommand,
    RedisModule_CreateString,
    RedisModule_CreateStringFromLongLong,
    RedisModule_DeleteKey,
    RedisModule_FreeModuleUser,
    RedisModule_FreeServerInfo,
    RedisModule_FreeString,
    RedisModule_GetCommand,
    RedisModule_GetContextFlags,
    RedisModule_GetCurrentUserName,
    RedisModule_GetExpire,
    RedisModule_RetainString,
    RedisModule_GetModuleUserFromUserName,
    RedisModule_GetSelectedDb,
    RedisModule_GetServerInfo,
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
    RedisModule_RegisterCommandFilter,
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
    RedisModule_ServerInfoGetFieldC,
    RedisModule_SetAbsExpire,
    RedisModule_SetCommandInfo,
    RedisModule_StringDMA,
    RedisModule_StringPtrLen,
    RedisModule_StringTruncate,
    RedisModule_SubscribeToKeyspaceEvents,
    RedisModule_SubscribeToServerEvent,
    RedisModule_UnlinkKey,
    RedisModule_UnregisterCommandFilter,
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

// -------------------------------------------------------------------- defrag callbacks

/// Whether [`DefragNotice`] stood in for `RedisModule_RegisterDefragCallbacks`.
static DEFRAG_STAND_IN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A step of the load for servers without defrag callbacks (Redis 7.0 and 7.1). The crate's
/// load step logs their absence as a warning, though tally registers no defrag callback
/// and loses nothing: this says it at verbose level instead and stands in for the missing
/// function until `init` ([`restore_defrag_api`]). Named in `redis_module!`'s data types,
/// the only hook that runs between `RedisModule_Init` and that check.
pub struct DefragNotice;

pub static DEFRAG_NOTICE: DefragNotice = DefragNotice;

impl DefragNotice {
    /// The hook `redis_module!` calls for a data type; creates none.
    ///
    /// # Safety
    ///
    /// `ctx` is the context of the module's load (`RedisModule_OnLoad`), called on the main
    /// thread after `RedisModule_Init`.
    pub unsafe fn create_data_type(
        &self,
        ctx: *mut raw::RedisModuleCtx,
    ) -> Result<(), &'static str> {
        // SAFETY: a function-pointer static `RedisModule_Init` has just set; the load runs
        // on the main thread and nothing else reads or writes it meanwhile.
        if unsafe { raw::RedisModule_RegisterDefragCallbacks }.is_none() {
            Context::new(ctx).log_verbose(
                "tally: this server has no defrag callbacks (before Redis 7.2); tally \
                 registers none, so nothing is lost",
            );
            // SAFETY: as above. The stand-in is never called: tally registers no defrag
            // start or end function, so the crate skips the registration, and `init` puts
            // the original `None` back before anything else runs.
            unsafe { raw::RedisModule_RegisterDefragCallbacks = Some(no_defrag_callbacks) };
            DEFRAG_STAND_IN.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }
}

/// The stand-in: refuses, as a server without the function would.
unsafe extern "C" fn no_defrag_callbacks(
    _ctx: *mut raw::RedisModuleCtx,
    _start: raw::RedisModuleDefragFunc,
    _end: raw::RedisModuleDefragFunc,
) -> c_int {
    raw::REDISMODULE_ERR as c_int
}

/// Puts back the API table as the server gave it (first thing in `init`).
pub fn restore_defrag_api() {
    if DEFRAG_STAND_IN.swap(false, std::sync::atomic::Ordering::Relaxed) {
        // SAFETY: the load runs on the main thread; the static held the stand-in set above.
        unsafe { raw::RedisModule_RegisterDefragCallbacks = None };
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

/// A command's now in µs, the same time as [`command_now_ms`] where the server caches it;
/// on Redis 7.0, which caches none for modules, the wall clock read now (the one the
/// server's own `mstime` reads).
pub fn command_now_us() -> i64 {
    // SAFETY: as in `command_now_ms`.
    match unsafe { raw::RedisModule_CachedMicroseconds } {
        // SAFETY: plain read of the server's cached time; no arguments.
        Some(cached_us) => unsafe { cached_us() },
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX)),
    }
}

/// How full the server is against `maxmemory` (1.0: at the limit; 0 without a limit).
pub fn used_memory_ratio() -> f32 {
    // SAFETY: reads a function-pointer static the crate set during `RedisModule_Init`
    // (absent on servers without the function); nothing writes it afterwards.
    match unsafe { raw::RedisModule_GetUsedMemoryRatio } {
        // SAFETY: no arguments; reads the server's memory counters.
        Some(ratio) => unsafe { ratio() },
        None => 0.0,
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

// --------------------------------------------------------------------- command filter

/// The arguments of a command about to be queued or run, lent to a command filter hook.
pub struct FilterArgs(*mut raw::RedisModuleCommandFilterCtx);

impl FilterArgs {
    pub fn len(&self) -> usize {
        // SAFETY: the filter context the server passes for this call.
        let n = unsafe { api!(RedisModule_CommandFilterArgsCount)(self.0) };
        usize::try_from(n).unwrap_or(0)
    }

    /// Argument `pos` (0: the command name); empty if there is none.
    pub fn get(&self, pos: usize) -> &[u8] {
        let Ok(pos) = c_int::try_from(pos) else {
            return &[];
        };
        // SAFETY: as above; the server answers NULL for a position out of range, and the
        // argument lives until the callback returns (this value does not outlive it).
        unsafe { borrowed_bytes(api!(RedisModule_CommandFilterArgGet)(self.0, pos)) }
    }
}

/// A registered command filter and the hook it calls.
type Filter = (*mut raw::RedisModuleCommandFilter, fn(&FilterArgs));

thread_local! {
    /// The registered command filter (main thread only).
    static FILTER: Cell<Option<Filter>> = const { Cell::new(None) };
}

/// Registers `hook` as a command filter (it sees every command of every client, the
/// primary's replication stream included, when it is queued or run; not tally's own
/// calls), or with `None` unregisters it. A filter costs every command on the server:
/// callers keep it only while they need it.
pub fn set_command_filter(ctx: &Context, hook: Option<fn(&FilterArgs)>) {
    let current = FILTER.with(Cell::get);
    match (current, hook) {
        (Some((_, old)), Some(new)) if old as usize == new as usize => {}
        (Some((filter, _)), _) => {
            // SAFETY: live context of this module; `filter` is the handle it registered.
            unsafe { api!(RedisModule_UnregisterCommandFilter)(ctx.ctx, filter) };
            FILTER.with(|f| f.set(None));
            if hook.is_some() {
                set_command_filter(ctx, hook);
            }
        }
        (None, Some(hook)) => {
            let flags = raw::REDISMODULE_CMDFILTER_NOSELF as c_int;
            // SAFETY: live context of this module; the callback lives as long as it.
            let filter = unsafe {
                api!(RedisModule_RegisterCommandFilter)(ctx.ctx, Some(on_command_filter), flags)
            };
            if !filter.is_null() {
                FILTER.with(|f| f.set(Some((filter, hook))));
            }
        }
        (None, None) => {}
    }
}

/// True while a command filter is registered.
pub fn has_command_filter() -> bool {
    FILTER.with(Cell::get).is_some()
}

unsafe extern "C" fn on_command_filter(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    if fctx.is_null() {
        return;
    }
    if let Some((_, hook)) = FILTER.with(Cell::get) {
        let args = FilterArgs(fctx);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&args)));
    }
}
