//! RANK command family (stub: being implemented).

use redis_module::{Context, RedisString};

use crate::error::{Error, Result};
use crate::expiry::Visit;
use crate::reply::Reply;
use crate::store::Key;

/// Family word that starts the `_tally` marker value of this family's hashes.
pub const FAMILY: &str = "rank";

pub fn create(_ctx: &Context, _name: &RedisString, _rest: &[&[u8]]) -> Result<Reply> {
    Err(Error::Invalid("not implemented yet".into()))
}

pub fn incrby(_ctx: &Context, _name: &RedisString, _rest: &[&[u8]]) -> Result<Reply> {
    Err(Error::Invalid("not implemented yet".into()))
}

pub fn top(_ctx: &Context, _name: &RedisString, _rest: &[&[u8]]) -> Result<Reply> {
    Err(Error::Invalid("not implemented yet".into()))
}

pub fn score(_ctx: &Context, _name: &RedisString, _rest: &[&[u8]]) -> Result<Reply> {
    Err(Error::Invalid("not implemented yet".into()))
}

pub fn rank(_ctx: &Context, _name: &RedisString, _rest: &[&[u8]]) -> Result<Reply> {
    Err(Error::Invalid("not implemented yet".into()))
}

pub fn info(_ctx: &Context, _name: &RedisString, _rest: &[&[u8]]) -> Result<Reply> {
    Err(Error::Invalid("not implemented yet".into()))
}

/// Timer visit of a scheduled key whose `_tally` marker starts with [`FAMILY`].
pub fn expire(_ctx: &Context, _key: &Key, _name: &[u8], _marker: &[u8], _now: i64, _deadline_us: u64) -> Visit {
    Visit::Done
}

/// Keyspace events (del, expired, rename_from, rename_to, ...) on any key.
pub fn on_keyspace_event(_ctx: &Context, _event: &str, _key: &[u8]) {}
