//! tally: time-windowed counters, leaderboards and statistics on native Redis keys.
//!
//! Layers: pure arithmetic (`args`, `window`, `counter`, `moments`, `sketch`) with no
//! Redis imports; `store` is the only code that opens keys; `replicate` emits effects;
//! `expiry` owns the one timer; `commands/` has one file per command family.

pub mod args;
pub mod counter;
pub mod error;
pub mod limit;
pub mod moments;
pub mod rank;
pub mod sketch;
pub mod stats;
pub mod window;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod testutil;

#[cfg(not(test))]
mod cmdinfo;
#[cfg(not(test))]
mod commands;
#[cfg(not(test))]
mod config;
#[cfg(not(test))]
mod expiry;
#[cfg(not(test))]
mod replicate;
#[cfg(not(test))]
mod reply;
#[cfg(not(test))]
mod store;

/// The Redis-facing part: command table, configs, init and `INFO tally`. Left out of
/// `cargo test`, whose plain test binary has no server to allocate from.
#[cfg(not(test))]
mod module {
    use std::os::raw::c_int;

    use redis_module::configuration::ConfigurationFlags;
    use redis_module::{raw, redis_module, Context, RedisResult, RedisString, Status};

    use crate::cmdinfo::{self, KeyAt, KeySpec, INSERT, READ, UPDATE};
    use crate::commands::{counter, rank, run, stats};
    use crate::config;

    /// Declares a command handler: `name(ctx, args)` runs `body` through `run`, which checks
    /// that at least `min_args` arguments (command name included) were given.
    macro_rules! handler {
        ($name:ident, $min_args:expr, $body:path) => {
            fn $name(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
                run(ctx, args, $min_args, $body)
            }
        };
    }

    handler!(tscounter_create, 2, counter::create);
    handler!(tscounter_incrby, 3, counter::incrby);
    handler!(tscounter_incr, 2, counter::incr);
    handler!(tscounter_sum, 3, counter::sum);
    handler!(tscounter_range, 3, counter::range);
    handler!(tscounter_info, 2, counter::info);
    handler!(tsrank_create, 2, rank::create);
    handler!(tsrank_incrby, 4, rank::incrby);
    handler!(tsrank_top, 3, rank::top);
    handler!(tsrank_score, 3, rank::score);
    handler!(tsrank_rank, 3, rank::rank);
    handler!(tsrank_info, 2, rank::info);
    handler!(stats_create, 2, stats::create);
    handler!(stats_add, 3, stats::add);
    handler!(stats_get, 2, stats::get);
    handler!(stats_quantile, 3, stats::quantile);
    handler!(stats_range, 2, stats::range);
    handler!(stats_info, 2, stats::info);

    /// Arity (negative: at least) and key specs of every command.
    fn command_table() -> Vec<(&'static str, c_int, Vec<KeySpec>)> {
        let key = |flags| {
            vec![KeySpec {
                at: KeyAt::Index(1),
                flags,
            }]
        };
        vec![
            ("tscounter.create", -2, key(INSERT)),
            ("tscounter.incrby", -3, key(UPDATE)),
            ("tscounter.incr", -2, key(UPDATE)),
            ("tscounter.sum", -3, key(READ)),
            ("tscounter.range", -3, key(READ)),
            ("tscounter.info", 2, key(READ)),
            ("tsrank.create", -2, key(INSERT)),
            ("tsrank.incrby", -4, key(UPDATE)),
            ("tsrank.top", -3, key(READ)),
            ("tsrank.score", 3, key(READ)),
            ("tsrank.rank", 3, key(READ)),
            ("tsrank.info", 2, key(READ)),
            ("stats.create", -2, key(INSERT)),
            (
                "stats.add",
                -3,
                vec![
                    KeySpec {
                        at: KeyAt::Index(1),
                        flags: UPDATE,
                    },
                    // REPORT rankkey: a declared key, so cluster routing, CROSSSLOT and
                    // ACL checks cover it. Values are numbers, never the word REPORT.
                    KeySpec {
                        at: KeyAt::AfterKeyword(c"REPORT", 3),
                        flags: UPDATE,
                    },
                ],
            ),
            ("stats.get", -2, key(READ)),
            ("stats.quantile", -3, key(READ)),
            ("stats.range", -2, key(READ)),
            ("stats.info", 2, key(READ)),
        ]
    }

    extern "C" fn info_func(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
        let (stats, tracked, backlog, scanning) = crate::expiry::stats();
        let add_section = unsafe { raw::RedisModule_InfoAddSection };
        let add_field = unsafe { raw::RedisModule_InfoAddFieldLongLong };
        let (Some(add_section), Some(add_field)) = (add_section, add_field) else {
            return;
        };
        unsafe { add_section(ctx, std::ptr::null_mut()) };
        let mirrored = crate::commands::mirror::mirrored_slots();
        let fields: [(&std::ffi::CStr, i64); 9] = [
            (c"tracked_objects", tracked as i64),
            (c"timer_ticks", stats.timer_ticks as i64),
            (c"keys_visited", stats.keys_visited as i64),
            (c"slots_expired", stats.slots_expired as i64),
            (c"last_tick_us", stats.last_tick_us as i64),
            (c"max_tick_us", stats.max_tick_us as i64),
            (c"expiry_backlog", backlog as i64),
            (c"scan_in_progress", i64::from(scanning)),
            (c"mirrored_slots", mirrored as i64),
        ];
        for (name, value) in fields {
            unsafe { add_field(ctx, name.as_ptr(), value) };
        }
    }

    /// Flushes, SWAPDB and loading replace data behind tally's back: drop the counter
    /// mirrors and what is known of the affected databases; after a load or SWAPDB a
    /// fresh scan finds the tally objects again.
    unsafe extern "C" fn on_server_event(
        _ctx: *mut raw::RedisModuleCtx,
        event: raw::RedisModuleEvent,
        subevent: u64,
        data: *mut std::os::raw::c_void,
    ) {
        crate::commands::mirror::forget_all();
        if event.id == raw::REDISMODULE_EVENT_FLUSHDB {
            // SAFETY: the server passes a RedisModuleFlushInfo with FLUSHDB events.
            let db = unsafe { data.cast::<raw::RedisModuleFlushInfo>().as_ref() }
                .map_or(-1, |info| info.dbnum);
            crate::expiry::forget_db(db);
            crate::commands::rank::forget_db(db);
        } else if event.id == raw::REDISMODULE_EVENT_SWAPDB {
            // SAFETY: the server passes a RedisModuleSwapDbInfo with SWAPDB events.
            if let Some(info) = unsafe { data.cast::<raw::RedisModuleSwapDbInfo>().as_ref() } {
                crate::expiry::swap_dbs(info.dbnum_first, info.dbnum_second);
                crate::commands::rank::swap_dbs(info.dbnum_first, info.dbnum_second);
            }
            crate::expiry::request_scan();
        } else if event.id == raw::REDISMODULE_EVENT_LOADING {
            crate::expiry::forget_db(-1);
            crate::commands::rank::forget_all();
            if subevent == raw::REDISMODULE_SUBEVENT_LOADING_ENDED {
                crate::expiry::request_scan();
            }
        }
    }

    fn subscribe_server_events(ctx: &Context) {
        let Some(subscribe) = (unsafe { raw::RedisModule_SubscribeToServerEvent }) else {
            return;
        };
        for id in [
            raw::REDISMODULE_EVENT_FLUSHDB,
            raw::REDISMODULE_EVENT_SWAPDB,
            raw::REDISMODULE_EVENT_LOADING,
        ] {
            let event = raw::RedisModuleEvent { id, dataver: 1 };
            unsafe { subscribe(ctx.ctx, event, Some(on_server_event)) };
        }
    }

    /// Keyspace notifications tally follows: every class, since a key may leave the
    /// family by being overwritten with any type.
    extern "C" fn on_keyspace_notification(
        ctx: *mut raw::RedisModuleCtx,
        class: c_int,
        event: *const std::os::raw::c_char,
        key: *mut raw::RedisModuleString,
    ) -> c_int {
        if event.is_null() {
            return raw::REDISMODULE_OK as c_int;
        }
        // SAFETY: the server passes a NUL-terminated event name valid for this call.
        let event = unsafe { std::ffi::CStr::from_ptr(event) };
        let Ok(event) = event.to_str() else {
            return raw::REDISMODULE_OK as c_int;
        };
        let key = crate::store::str_bytes(key);
        let ctx = Context::new(ctx);
        let class = redis_module::NotifyEvent::from_bits_truncate(class);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crate::commands::on_keyspace_event(&ctx, class, event, key)
        }));
        raw::REDISMODULE_OK as c_int
    }

    /// Subscribed in `init`, after the module arguments were validated: the server does
    /// not undo subscriptions of a module whose load fails, and a dangling one would
    /// crash it at the next event.
    fn subscribe_keyspace_events(ctx: &Context) -> Status {
        use redis_module::NotifyEvent as E;
        let classes = E::GENERIC
            | E::STRING
            | E::LIST
            | E::SET
            | E::HASH
            | E::ZSET
            | E::EXPIRED
            | E::EVICTED
            | E::STREAM;
        let Some(subscribe) = (unsafe { raw::RedisModule_SubscribeToKeyspaceEvents }) else {
            return Status::Err;
        };
        // SAFETY: `ctx` is the module's load context; the callback lives as long as the
        // module.
        let status = unsafe { subscribe(ctx.ctx, classes.bits(), Some(on_keyspace_notification)) };
        if status == raw::REDISMODULE_OK as c_int {
            Status::Ok
        } else {
            Status::Err
        }
    }

    fn init(ctx: &Context, args: &[RedisString]) -> Status {
        if let Err(e) = config::validate_module_args(args) {
            ctx.log_warning(&format!("tally: {e}; not loading"));
            return Status::Err;
        }
        for (name, arity, keys) in command_table() {
            if let Err(e) = cmdinfo::set(ctx, name, arity, &keys) {
                ctx.log_warning(&format!("tally: {e}"));
                return Status::Err;
            }
            let writes = keys.first().is_some_and(|k| k.flags != READ);
            cmdinfo::set_acl_category(ctx, name, writes);
        }
        if let Some(register) = unsafe { raw::RedisModule_RegisterInfoFunc } {
            unsafe { register(ctx.ctx, Some(info_func)) };
        }
        // Last, once nothing can fail any more: subscriptions and the timer.
        if subscribe_keyspace_events(ctx) == Status::Err {
            ctx.log_warning("tally: cannot subscribe to keyspace events; not loading");
            return Status::Err;
        }
        subscribe_server_events(ctx);
        crate::expiry::start(ctx);
        Status::Ok
    }

    redis_module! {
        name: "tally",
        version: 1,
        allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
        data_types: [],
        init: init,
        commands: [
            ["tscounter.create", tscounter_create, "write deny-oom", 1, 1, 1, ""],
            ["tscounter.incrby", tscounter_incrby, "write deny-oom", 1, 1, 1, ""],
            ["tscounter.incr", tscounter_incr, "write deny-oom", 1, 1, 1, ""],
            ["tscounter.sum", tscounter_sum, "readonly", 1, 1, 1, ""],
            ["tscounter.range", tscounter_range, "readonly", 1, 1, 1, ""],
            ["tscounter.info", tscounter_info, "readonly", 1, 1, 1, ""],
            ["tsrank.create", tsrank_create, "write deny-oom", 1, 1, 1, ""],
            ["tsrank.incrby", tsrank_incrby, "write deny-oom", 1, 1, 1, ""],
            ["tsrank.top", tsrank_top, "readonly", 1, 1, 1, ""],
            ["tsrank.score", tsrank_score, "readonly", 1, 1, 1, ""],
            ["tsrank.rank", tsrank_rank, "readonly", 1, 1, 1, ""],
            ["tsrank.info", tsrank_info, "readonly", 1, 1, 1, ""],
            ["stats.create", stats_create, "write deny-oom", 1, 1, 1, ""],
            ["stats.add", stats_add, "write deny-oom getkeys-api", 1, 1, 1, ""],
            ["stats.get", stats_get, "readonly", 1, 1, 1, ""],
            ["stats.quantile", stats_quantile, "readonly", 1, 1, 1, ""],
            ["stats.range", stats_range, "readonly", 1, 1, 1, ""],
            ["stats.info", stats_info, "readonly", 1, 1, 1, ""],
        ],
        configurations: [
            i64: [
                ["stats-keep", &config::STATS_KEEP, 24, 1, 10_000, ConfigurationFlags::DEFAULT, None],
                ["expire-budget-us", &config::EXPIRE_BUDGET_US, 1000, 10, 1_000_000, ConfigurationFlags::DEFAULT, None],
            ],
            string: [
                ["counter-resolutions", &*config::COUNTER_RESOLUTIONS, config::DEFAULT_COUNTER_RESOLUTIONS, ConfigurationFlags::DEFAULT, None],
                ["max-future", &config::MAX_FUTURE, "1m", ConfigurationFlags::DEFAULT, None],
                ["rank-window", &config::RANK_WINDOW, "24h", ConfigurationFlags::DEFAULT, None],
                ["rank-slot", &config::RANK_SLOT, "1h", ConfigurationFlags::DEFAULT, None],
                ["stats-period", &config::STATS_PERIOD, "1h", ConfigurationFlags::DEFAULT, None],
            ],
            bool: [],
            enum: [],
            module_args_as_configuration: true,
        ]
    }
}
