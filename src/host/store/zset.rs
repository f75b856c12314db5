//! Sorted-set operations on an open [`Key`] (the crate wraps none of them): score, add,
//! remove, and walks in both directions. A walk borrows the key mutably, so only one
//! range iterator can be open on a key at a time (the server keeps one per key). The
//! positional reads the module API lacks (a member's rank, a range by rank, a count by
//! score), O(log N) in the server's skiplist, run as the native commands
//! ([`zrevrank`], [`zrevrange`], [`zcount_above`]).

use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, CallOptionsBuilder, CallReply, CallResult, Context};

use super::{Key, RStr};
use crate::host::server::api;

const OK: c_int = raw::REDISMODULE_OK as c_int;

impl Key {
    /// Score of `member` in a sorted set; `None` if absent (or not a sorted set).
    pub fn zscore(&self, member: &RStr) -> Option<f64> {
        if self.ptr.is_null() {
            return None;
        }
        let mut score = 0f64;
        // SAFETY: open key, live member string, valid out pointer.
        let status = unsafe { api!(RedisModule_ZsetScore)(self.ptr, member.as_ptr(), &mut score) };
        (status == OK).then_some(score)
    }

    /// Sets `member`'s score (adds the member if needed; creates the key if empty).
    pub fn zadd(&self, member: &RStr, score: f64) -> bool {
        if self.ptr.is_null() {
            return false;
        }
        // SAFETY: open key, live member string; NULL flags pointers are allowed.
        let status =
            unsafe { api!(RedisModule_ZsetAdd)(self.ptr, score, member.as_ptr(), ptr::null_mut()) };
        status == OK
    }

    /// Removes `member`; true if it was there. An emptied sorted set disappears.
    pub fn zrem(&self, member: &RStr) -> bool {
        if self.ptr.is_null() {
            return false;
        }
        let mut deleted: c_int = 0;
        // SAFETY: open key, live member string, valid out pointer.
        let status = unsafe { api!(RedisModule_ZsetRem)(self.ptr, member.as_ptr(), &mut deleted) };
        status == OK && deleted != 0
    }

    /// Walks a sorted set from the highest score down, ties by member descending: the
    /// order of `ZREVRANGE`. Empty for a missing key or another type.
    pub fn zrev_iter(&mut self) -> ZsetWalk<'_> {
        ZsetWalk::start(self, Direction::Down)
    }

    /// Walks a sorted set from the lowest score up, ties by member ascending: the order
    /// of `ZRANGE`. Empty for a missing key or another type.
    pub fn zfwd_iter(&mut self) -> ZsetWalk<'_> {
        ZsetWalk::start(self, Direction::Up)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Up,
    Down,
}

/// A walk over a sorted set; stops the server's range iterator on drop.
pub struct ZsetWalk<'a> {
    key: &'a mut Key,
    direction: Direction,
    started: bool,
    done: bool,
}

impl ZsetWalk<'_> {
    fn start(key: &mut Key, direction: Direction) -> ZsetWalk<'_> {
        let (lo, hi) = (f64::NEG_INFINITY, f64::INFINITY);
        // SAFETY: open key; the score range is inclusive and unbounded. A key of another
        // type answers an error status and no iterator is started.
        let status = unsafe {
            match direction {
                _ if key.ptr.is_null() => raw::REDISMODULE_ERR as c_int,
                Direction::Down => api!(RedisModule_ZsetLastInScoreRange)(key.ptr, lo, hi, 0, 0),
                Direction::Up => api!(RedisModule_ZsetFirstInScoreRange)(key.ptr, lo, hi, 0, 0),
            }
        };
        let started = status == OK;
        ZsetWalk {
            key,
            direction,
            started,
            done: !started,
        }
    }

    /// The next `(member, score)` with the member still as a module string.
    pub fn next_str(&mut self) -> Option<(RStr, f64)> {
        if self.done {
            return None;
        }
        let key = self.key.ptr;
        // SAFETY: the range iterator of this open key is started (and ours alone: the
        // walk holds the key mutably).
        if unsafe { api!(RedisModule_ZsetRangeEndReached)(key) } != 0 {
            self.done = true;
            return None;
        }
        let mut score = 0f64;
        // SAFETY: as above; returns a new string we own, or NULL.
        let element = unsafe { api!(RedisModule_ZsetRangeCurrentElement)(key, &mut score) };
        // SAFETY: as above (ours to free).
        let Some(element) = (unsafe { RStr::owned(element) }) else {
            self.done = true;
            return None;
        };
        // SAFETY: as above.
        let moved = unsafe {
            match self.direction {
                Direction::Down => api!(RedisModule_ZsetRangePrev)(key),
                Direction::Up => api!(RedisModule_ZsetRangeNext)(key),
            }
        };
        if moved == 0 {
            self.done = true;
        }
        Some((element, score))
    }
}

impl Iterator for ZsetWalk<'_> {
    type Item = (Vec<u8>, f64);

    fn next(&mut self) -> Option<Self::Item> {
        self.next_str().map(|(m, s)| (m.as_bytes().to_vec(), s))
    }
}

impl Drop for ZsetWalk<'_> {
    fn drop(&mut self) {
        if self.started {
            // SAFETY: stops the iterator this walk started on its open key.
            unsafe { api!(RedisModule_ZsetRangeStop)(self.key.ptr) };
        }
    }
}

/// Runs a read-only sorted-set command on `name` through `RedisModule_Call` (errors as
/// replies: a key of another type answers nothing here).
fn zcall<'a>(ctx: &'a Context, command: &str, args: &[&[u8]]) -> CallResult<'a> {
    let options = CallOptionsBuilder::new().errors_as_replies().build();
    ctx.call_ext(command, &options, args)
}

/// `ZREVRANK name member`: `member`'s position in `ZREVRANGE`'s order (0 = highest),
/// `None` if absent.
pub fn zrevrank(ctx: &Context, name: &[u8], member: &[u8]) -> Option<usize> {
    match zcall(ctx, "ZREVRANK", &[name, member]) {
        Ok(CallReply::I64(rank)) => usize::try_from(rank.to_i64()).ok(),
        _ => None,
    }
}

/// `ZREVRANGE name start stop WITHSCORES`: the `(member, score)` rows at positions
/// `start ..= stop` of `ZREVRANGE`'s order (fewer past the end).
pub fn zrevrange(ctx: &Context, name: &[u8], start: usize, stop: usize) -> Vec<(Vec<u8>, f64)> {
    let (start, stop) = (start.to_string(), stop.to_string());
    let args: [&[u8]; 4] = [name, start.as_bytes(), stop.as_bytes(), b"WITHSCORES"];
    let Ok(CallReply::Array(rows)) = zcall(ctx, "ZREVRANGE", &args) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(rows.len() / 2);
    let mut items = rows.iter();
    while let (Some(Ok(member)), Some(Ok(score))) = (items.next(), items.next()) {
        let member = match member {
            CallReply::String(s) => s.as_bytes().to_vec(),
            _ => continue,
        };
        let score = match score {
            CallReply::String(s) => std::str::from_utf8(s.as_bytes())
                .ok()
                .and_then(|text| text.parse::<f64>().ok()),
            CallReply::Double(d) => Some(d.to_double()),
            _ => None,
        };
        if let Some(score) = score {
            out.push((member, score));
        }
    }
    out
}

/// `ZCOUNT name (score +inf`: how many members have a score strictly above `score`.
pub fn zcount_above(ctx: &Context, name: &[u8], score: i64) -> usize {
    let min = format!("({score}");
    match zcall(ctx, "ZCOUNT", &[name, min.as_bytes(), b"+inf"]) {
        Ok(CallReply::I64(count)) => usize::try_from(count.to_i64()).unwrap_or(0),
        _ => 0,
    }
}

/// `ZCOUNT name score score`: how many members have exactly `score`.
pub fn zcount_at(ctx: &Context, name: &[u8], score: i64) -> usize {
    let at = score.to_string();
    match zcall(ctx, "ZCOUNT", &[name, at.as_bytes(), at.as_bytes()]) {
        Ok(CallReply::I64(count)) => usize::try_from(count.to_i64()).unwrap_or(0),
        _ => 0,
    }
}
