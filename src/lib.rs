//! tally: time-windowed counters, leaderboards and statistics on native Redis keys.
//!
//! Layers:
//! * pure arithmetic and formats, no Redis imports: `args`, `layout`, `window`, `moments`,
//!   `sketch`, `error`, `shown` (replies formatted once), `collections` (the data
//!   structures tally writes itself); `cmddocs` (the version, and the form of a
//!   command's documentation and its check; each command's own sits beside its handler);
//! * the FFI layer in `host/`, the only code with raw module calls: `server` (API check,
//!   clock, databases, role), `events` (keyspace and server events, tracked names),
//!   `store` (keys, hashes, sorted sets, scans, ACL), `replicate` (effects), `reply`,
//!   `cmdinfo` (command table entries, registration), `config`;
//! * `expiry`: the schedule (a `collections::due_queue`) and the one timer, calling the
//!   families through a visitor;
//! * `family`: what the registry needs of each family, and what a family needs of the
//!   others (the caches' budget, forgetting a deleted key), through the installed table;
//! * the families, one folder each with the same inner shape: `counter/`, `rank/`,
//!   `stats/`, `throttle/`, each a pure `model/` (no Redis imports) beside its `commands/`
//!   (the adapters that touch keys);
//! * `registry`: the family table and the hooks the server events and the timer call.
//!
//! The pure modules forbid `unsafe`; every `unsafe` block elsewhere says why it is sound
//! (a `SAFETY:` comment, which clippy checks).
#![warn(clippy::undocumented_unsafe_blocks)]

#[forbid(unsafe_code)]
pub mod args;
#[forbid(unsafe_code)]
pub mod cmddocs;
#[forbid(unsafe_code)]
pub mod collections;
pub mod counter;
#[forbid(unsafe_code)]
pub mod error;
#[forbid(unsafe_code)]
pub mod layout;
#[forbid(unsafe_code)]
pub mod moments;
pub mod rank;
#[forbid(unsafe_code)]
pub mod shown;
#[forbid(unsafe_code)]
pub mod sketch;
pub mod stats;
pub mod throttle;
#[forbid(unsafe_code)]
pub mod window;

#[cfg(test)]
mod layering;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod testutil;

#[cfg(not(test))]
mod expiry;
#[cfg(not(test))]
mod family;
#[cfg(not(test))]
mod host;
#[cfg(not(test))]
mod registry;

/// The Redis-facing part: module registration, configs and init. Left out of
/// `cargo test`, whose plain test binary has no server to allocate from.
#[cfg(not(test))]
mod module {
    use redis_module::configuration::ConfigurationFlags;
    use redis_module::{redis_module, Context, RedisString, Status};

    use crate::host::server::DEFRAG_NOTICE;
    use crate::host::{cmdinfo, config, events, server};
    use crate::{expiry, registry};

    fn init(ctx: &Context, args: &[RedisString]) -> Status {
        server::restore_defrag_api();
        crate::family::install(&registry::FAMILIES);
        let checked = server::check_api()
            .and_then(|()| config::validate_module_args(args, family_config))
            // First, so a name already taken fails the load before anything is registered.
            .and_then(|()| register_cell_compat(ctx))
            .and_then(|()| {
                registry::FAMILIES
                    .iter()
                    .flat_map(|family| family.commands)
                    .try_for_each(|command| cmdinfo::register(ctx, command))
            })
            // Last, once nothing else can fail: subscriptions and the timer.
            .and_then(|()| events::register_hooks(ctx, registry::HOOKS));
        if let Err(e) = checked {
            ctx.log_warning(&format!("tally: {e}; not loading"));
            return Status::Err;
        }
        expiry::start(ctx, registry::EXPIRY_VISITOR);
        Status::Ok
    }

    /// The families' own configs, for the check of load arguments.
    fn family_config(name: &str, value: &[u8]) -> Option<bool> {
        crate::counter::commands::family_config::accepts(name, value)
            .or_else(|| crate::stats::commands::family_config::accepts(name, value))
    }

    /// `CL.THROTTLE`, when loaded with `throttle-cell-compat yes`. The server refuses a
    /// command name another module (redis-cell) registered: the load fails and says why.
    fn register_cell_compat(ctx: &Context) -> Result<(), String> {
        if !config::throttle_cell_compat() {
            return Ok(());
        }
        crate::throttle::commands::CELL_COMMANDS
            .iter()
            .try_for_each(|command| cmdinfo::register(ctx, command))
            .map_err(|e| {
                format!(
                    "throttle-cell-compat: {e}: the name CL.THROTTLE is taken (is redis-cell \
                     loaded? unload it, or load tally without throttle-cell-compat)"
                )
            })
    }

    redis_module! {
        name: "tally",
        version: crate::cmddocs::VERSION_NUMBER,
        allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
        // Not a data type: the load step that keeps a harmless notice out of the warnings
        // (see `server::DefragNotice`).
        data_types: [DEFRAG_NOTICE],
        init: init,
        commands: [],
        configurations: [
            i64: [
                ["stats-keep", &crate::stats::commands::family_config::STATS_KEEP, 24, 1, crate::stats::model::MAX_KEEP, ConfigurationFlags::DEFAULT, None],
                ["expire-budget-us", &config::EXPIRE_BUDGET_US, 1000, 10, 1_000_000, ConfigurationFlags::DEFAULT, None],
                ["cache-max-memory", &config::CACHE_MAX_MEMORY, config::DEFAULT_CACHE_MAX_MEMORY, 0, i64::MAX, ConfigurationFlags::MEMORY, None],
            ],
            string: [
                ["counter-resolutions", &*crate::counter::commands::family_config::COUNTER_RESOLUTIONS, crate::counter::commands::family_config::DEFAULT_COUNTER_RESOLUTIONS, ConfigurationFlags::DEFAULT, None],
                ["max-future", &config::MAX_FUTURE, "1m", ConfigurationFlags::DEFAULT, None],
                ["rank-window", &config::RANK_WINDOW, "24h", ConfigurationFlags::DEFAULT, None],
                ["rank-slot", &config::RANK_SLOT, "1h", ConfigurationFlags::DEFAULT, None],
                ["stats-period", &crate::stats::commands::family_config::STATS_PERIOD, "1h", ConfigurationFlags::DEFAULT, None],
            ],
            bool: [
                ["check-caches", &config::CHECK_CACHES, false, ConfigurationFlags::DEFAULT, None],
                ["throttle-cell-compat", &config::THROTTLE_CELL_COMPAT, false, ConfigurationFlags::IMMUTABLE, None],
            ],
            enum: [],
            module_args_as_configuration: true,
        ]
    }
}
