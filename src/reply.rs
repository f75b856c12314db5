//! Replies, written with the module reply API so that maps keep their documented field
//! order and come out right in both protocols: a map is a RESP3 map or a flat RESP2
//! array, a double a RESP3 double or a RESP2 bulk string.
//!
//! Owns: the reply calls. May not touch: keys, command logic.

use std::os::raw::{c_char, c_long};

use redis_module::Context;

use crate::server::api;

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
        // SAFETY (every call below): `c` is the live context of the current command; the
        // buffers passed with their lengths are valid for the call (the server copies
        // them), and C strings are NUL-terminated literals.
        match self {
            Reply::Ok => unsafe {
                api!(RedisModule_ReplyWithSimpleString)(c, c"OK".as_ptr());
            },
            // SAFETY: as above.
            Reply::Int(v) => unsafe {
                api!(RedisModule_ReplyWithLongLong)(c, *v);
            },
            // SAFETY: as above.
            Reply::Double(v) => unsafe {
                api!(RedisModule_ReplyWithDouble)(c, *v);
            },
            // SAFETY: as above.
            Reply::Bulk(bytes) => unsafe {
                api!(RedisModule_ReplyWithStringBuffer)(
                    c,
                    bytes.as_ptr().cast::<c_char>(),
                    bytes.len(),
                );
            },
            // SAFETY: as above.
            Reply::Nil => unsafe {
                api!(RedisModule_ReplyWithNull)(c);
            },
            Reply::Array(items) => {
                // SAFETY: as above.
                unsafe { api!(RedisModule_ReplyWithArray)(c, items.len() as c_long) };
                items.iter().for_each(|item| item.send(ctx));
            }
            Reply::Map(fields) => {
                // SAFETY: as above.
                unsafe { api!(RedisModule_ReplyWithMap)(c, fields.len() as c_long) };
                for (name, value) in fields {
                    // SAFETY: as above.
                    unsafe {
                        api!(RedisModule_ReplyWithStringBuffer)(
                            c,
                            name.as_ptr().cast::<c_char>(),
                            name.len(),
                        )
                    };
                    value.send(ctx);
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
        // SAFETY: live context of the current command, NUL-terminated text.
        unsafe { api!(RedisModule_ReplyWithError)(ctx.ctx, cstr.as_ptr()) };
    }
}
