//! Replies, written with the module reply API so that maps keep their documented field
//! order and come out right in both protocols: a map is a RESP3 map or a flat RESP2
//! array, a double a RESP3 double or a RESP2 bulk string.

use std::os::raw::{c_char, c_long};

use redis_module::raw;
use redis_module::Context;

#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Ok,
    Int(i64),
    Double(f64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Reply>),
    /// Field/value pairs, in this order.
    Map(Vec<(&'static str, Reply)>),
}

impl Reply {
    /// `[a, b]` pairs as nested arrays.
    pub fn pairs(items: impl IntoIterator<Item = (Reply, Reply)>) -> Reply {
        Reply::Array(
            items
                .into_iter()
                .map(|(a, b)| Reply::Array(vec![a, b]))
                .collect(),
        )
    }

    /// Writes the reply to the client of `ctx`.
    pub fn send(&self, ctx: &Context) {
        let c = ctx.ctx;
        // Every RedisModule_Reply* function exists since Redis 6 (maps and doubles too),
        // so a missing one means a broken server: send nothing rather than panic.
        unsafe {
            match self {
                Reply::Ok => {
                    if let Some(f) = raw::RedisModule_ReplyWithSimpleString {
                        f(c, c"OK".as_ptr());
                    }
                }
                Reply::Int(v) => {
                    if let Some(f) = raw::RedisModule_ReplyWithLongLong {
                        f(c, *v);
                    }
                }
                Reply::Double(v) => {
                    if let Some(f) = raw::RedisModule_ReplyWithDouble {
                        f(c, *v);
                    }
                }
                Reply::Bulk(bytes) => {
                    if let Some(f) = raw::RedisModule_ReplyWithStringBuffer {
                        f(c, bytes.as_ptr().cast::<c_char>(), bytes.len());
                    }
                }
                Reply::Nil => {
                    if let Some(f) = raw::RedisModule_ReplyWithNull {
                        f(c);
                    }
                }
                Reply::Array(items) => {
                    if let Some(f) = raw::RedisModule_ReplyWithArray {
                        f(c, items.len() as c_long);
                    }
                    items.iter().for_each(|item| item.send(ctx));
                }
                Reply::Map(fields) => {
                    if let Some(f) = raw::RedisModule_ReplyWithMap {
                        f(c, fields.len() as c_long);
                    }
                    for (name, value) in fields {
                        if let Some(f) = raw::RedisModule_ReplyWithStringBuffer {
                            f(c, name.as_ptr().cast::<c_char>(), name.len());
                        }
                        value.send(ctx);
                    }
                }
            }
        }
    }
}

/// Sends an error whose text starts with its code (`ERR ...`, `WRONGTYPE ...`).
pub fn send_error(ctx: &Context, text: &str) {
    // The text goes through a C string: make sure it has no NUL byte.
    let clean: String = text
        .chars()
        .map(|c| if c == '\0' { ' ' } else { c })
        .collect();
    if let Ok(cstr) = std::ffi::CString::new(clean) {
        if let Some(f) = unsafe { raw::RedisModule_ReplyWithError } {
            unsafe { f(ctx.ctx, cstr.as_ptr()) };
        }
    }
}
