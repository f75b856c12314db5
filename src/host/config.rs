//! Module configs (`CONFIG GET/SET tally.*`, `loadmodule ... name value`). Duration and
//! resolution configs are strings validated on every set, so a bad value is refused by
//! `CONFIG SET` and never reaches a command.
//!
//! Owns: the module's configs. May not touch: keys or commands.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Mutex, MutexGuard};

use redis_module::configuration::ConfigurationContext;
use redis_module::{ConfigurationValue, RedisError, RedisString};

use crate::args::{parse_duration, parse_i64, MAX_DURATION_MS};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

thread_local! {
    /// The string each string config last handed to the server, by the config's address.
    /// Configs are read on the main thread only (the server calls getters under its lock).
    static SHOWN: RefCell<Vec<(usize, RedisString)>> = const { RefCell::new(Vec::new()) };
}

/// The string a string config's getter returns for `text`. The server copies the string a
/// getter returns and never frees it: the module keeps ownership. So each config keeps the
/// last string it showed (replaced, and the old one freed, only when the text changes) and
/// returns a handle that does not own it: the crate passes the handle's pointer on without
/// freeing it. (A fresh string per call leaked one per `CONFIG GET`.) So the getters below
/// are for the server only: dropping what they return would free the kept string.
fn show(config: usize, text: &str) -> RedisString {
    SHOWN.with_borrow_mut(|shown| {
        let at = match shown.iter().position(|(owner, _)| *owner == config) {
            Some(at) => at,
            None => {
                shown.push((config, RedisString::create(None, text)));
                shown.len() - 1
            }
        };
        match shown.get_mut(at) {
            Some((_, kept)) => {
                if kept.as_slice() != text.as_bytes() {
                    *kept = RedisString::create(None, text);
                }
                RedisString::from_redis_module_string(std::ptr::null_mut(), kept.inner)
            }
            // Not reached: `at` was just found or pushed.
            None => RedisString::create(None, text),
        }
    })
}

/// A duration config: used as milliseconds, shown as it was set (`24h` stays `24h`).
pub struct DurationConfig {
    ms: AtomicI64,
    text: Mutex<Option<String>>,
    default_text: &'static str,
    /// The longest value accepted (a duration's own limit, or less where the config is
    /// multiplied by another).
    max_ms: i64,
}

impl DurationConfig {
    const fn new(ms: i64, default_text: &'static str) -> Self {
        Self::at_most(ms, default_text, MAX_DURATION_MS)
    }

    pub const fn at_most(ms: i64, default_text: &'static str, max_ms: i64) -> Self {
        DurationConfig {
            ms: AtomicI64::new(ms),
            text: Mutex::new(None),
            default_text,
            max_ms,
        }
    }

    /// The value of `text` in milliseconds, if it is a duration this config accepts.
    pub fn parse(&self, text: &[u8]) -> crate::error::Result<i64> {
        match parse_duration(text)? {
            ms if ms <= self.max_ms => Ok(ms),
            _ => Err(crate::error::Error::InvalidDuration(
                String::from_utf8_lossy(text).into_owned(),
            )),
        }
    }

    pub fn ms(&self) -> i64 {
        self.ms.load(Ordering::Relaxed)
    }
}

impl ConfigurationValue<RedisString> for DurationConfig {
    fn get(&self, _ctx: &ConfigurationContext) -> RedisString {
        let text = lock(&self.text).clone();
        show(
            std::ptr::from_ref(self) as usize,
            text.as_deref().unwrap_or(self.default_text),
        )
    }

    fn set(&self, _ctx: &ConfigurationContext, value: RedisString) -> Result<(), RedisError> {
        let ms = self
            .parse(value.as_slice())
            .map_err(|e| RedisError::String(e.to_string()))?;
        self.ms.store(ms, Ordering::Relaxed);
        *lock(&self.text) = Some(value.to_string_lossy());
        Ok(())
    }
}

/// A config shown and set as text and used as the value `T` its family parses it into
/// (the counters' default resolutions): refused by `CONFIG SET` when it does not parse.
pub struct TextConfig<T: 'static> {
    value: Mutex<T>,
    parse: fn(&str) -> Result<T, String>,
    format: fn(&T) -> String,
}

impl<T: Clone> TextConfig<T> {
    pub const fn new(
        value: T,
        parse: fn(&str) -> Result<T, String>,
        format: fn(&T) -> String,
    ) -> TextConfig<T> {
        TextConfig {
            value: Mutex::new(value),
            parse,
            format,
        }
    }

    /// True when `text` is a value this config takes.
    pub fn accepts(&self, text: &str) -> bool {
        (self.parse)(text).is_ok()
    }

    pub fn get(&self) -> T {
        lock(&self.value).clone()
    }

    /// `f` of the value, without a copy.
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&lock(&self.value))
    }
}

impl<T: Clone + Send> ConfigurationValue<RedisString> for TextConfig<T> {
    fn get(&self, _ctx: &ConfigurationContext) -> RedisString {
        let text = (self.format)(&lock(&self.value));
        show(std::ptr::from_ref(self) as usize, &text)
    }

    fn set(&self, _ctx: &ConfigurationContext, value: RedisString) -> Result<(), RedisError> {
        let text = value.try_as_str()?;
        *lock(&self.value) = (self.parse)(text).map_err(RedisError::String)?;
        Ok(())
    }
}

pub static MAX_FUTURE: DurationConfig = DurationConfig::new(60_000, "1m");
pub static RANK_WINDOW: DurationConfig = DurationConfig::new(86_400_000, "24h");
pub static RANK_SLOT: DurationConfig = DurationConfig::new(3_600_000, "1h");
pub static EXPIRE_BUDGET_US: AtomicI64 = AtomicI64::new(1000);
/// `cache-max-memory`: bytes the read caches (counter mirrors, STATS windows) may hold
/// together; 0 turns them off. 4 MB holds the mirrors of about 2,500 hot counters of the
/// default resolutions: the counters written or read again and again.
pub static CACHE_MAX_MEMORY: AtomicI64 = AtomicI64::new(DEFAULT_CACHE_MAX_MEMORY);
pub const DEFAULT_CACHE_MAX_MEMORY: i64 = 4 << 20;
/// `check-caches`: every use of a verified leaderboard meta also reads the stored one and
/// compares (a mismatch is counted, logged and answered with an error). For tests.
pub static CHECK_CACHES: AtomicBool = AtomicBool::new(false);

/// `throttle-cell-compat`: also register redis-cell's `CL.THROTTLE` (a load argument only:
/// commands are registered at load).
pub static THROTTLE_CELL_COMPAT: AtomicBool = AtomicBool::new(false);

pub fn throttle_cell_compat() -> bool {
    THROTTLE_CELL_COMPAT.load(Ordering::Relaxed)
}

pub fn max_future_ms() -> i64 {
    MAX_FUTURE.ms()
}

pub fn expire_budget_us() -> i64 {
    EXPIRE_BUDGET_US.load(Ordering::Relaxed)
}

pub fn check_caches() -> bool {
    CHECK_CACHES.load(Ordering::Relaxed)
}

pub fn cache_max_memory() -> usize {
    usize::try_from(CACHE_MAX_MEMORY.load(Ordering::Relaxed)).unwrap_or(0)
}

/// Checks `loadmodule ... name value ...` arguments before anything starts, with
/// `family_config`, which answers for the families' own configs (`Some(accepted)`, `None`
/// for a name that is none of theirs). The SDK applies the arguments as config values but
/// does not stop the load when one is refused, and a module that Redis then unloads must
/// not leave a timer behind: a bad argument must fail the load.
pub fn validate_module_args(
    args: &[RedisString],
    family_config: fn(&str, &[u8]) -> Option<bool>,
) -> Result<(), String> {
    if !args.len().is_multiple_of(2) {
        return Err("module arguments must be name value pairs".into());
    }
    for pair in args.chunks_exact(2) {
        let (name, value) = match pair {
            [name, value] => (name.to_string_lossy(), value),
            _ => continue,
        };
        let value_text = value.to_string_lossy();
        let ok = match name.as_str() {
            "max-future" => MAX_FUTURE.parse(value.as_slice()).is_ok(),
            "rank-window" => RANK_WINDOW.parse(value.as_slice()).is_ok(),
            "rank-slot" => RANK_SLOT.parse(value.as_slice()).is_ok(),
            "check-caches" | "throttle-cell-compat" => {
                matches!(value.as_slice(), b"yes" | b"no")
            }
            // A plain byte count here (`CONFIG SET` also takes units such as `64mb`).
            "cache-max-memory" => parse_i64(value.as_slice()).is_ok_and(|v| v >= 0),
            "expire-budget-us" => {
                parse_i64(value.as_slice()).is_ok_and(|v| (10..=1_000_000).contains(&v))
            }
            other => family_config(other, value.as_slice())
                .ok_or_else(|| format!("unknown config '{name}'"))?,
        };
        if !ok {
            return Err(format!("invalid value '{value_text}' for '{name}'"));
        }
    }
    Ok(())
}
