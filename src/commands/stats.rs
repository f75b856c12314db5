//! STATS command family (stub: being implemented).

use redis_module::{Context, RedisString};

use crate::error::{Error, Result};
use crate::expiry::Visit;
use crate::reply::Reply;
use crate::store::Key;

/// Family word that starts the `_tally` marker value of this family's hashes.
pub const FAMILY: &str = "stats";

pub fn create(_ctx: &Context, _name: &RedisString, _rest: &[&[u8]]) -> Result<Reply> {
    Err(Error::Invalid("not implemented yet".into()))
}

pub fn add(_ctx: &Context, _name: &RedisString, _rest: &[&[u8]]) -> Result<Reply> {
    Err(Error::Invalid("not implemented yet".into()))
}

pub fn get(_ctx: &Context, _name: &RedisString, _rest: &[&[u8]]) -> Result<Reply> {
    Err(Error::Invalid("not implemented yet".into()))
}

pub fn quantile(_ctx: &Context, _name: &RedisString, _rest: &[&[u8]]) -> Result<Reply> {
    Err(Error::Invalid("not implemented yet".into()))
}

pub fn range(_ctx: &Context, _name: &RedisString, _rest: &[&[u8]]) -> Result<Reply> {
    Err(Error::Invalid("not implemented yet".into()))
}

pub fn info(_ctx: &Context, _name: &RedisString, _rest: &[&[u8]]) -> Result<Reply> {
    Err(Error::Invalid("not implemented yet".into()))
}

/// Timer visit of a scheduled key whose `_tally` marker starts with [`FAMILY`].
pub fn expire(_ctx: &Context, _key: &Key, _name: &[u8], _marker: &[u8], _now: i64, _deadline_us: u64) -> Visit {
    Visit::Done
}
