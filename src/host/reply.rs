//! Replies, written with the module reply API so that maps keep their documented field
//! order and come out right in both protocols: a map is a RESP3 map or a flat RESP2
//! array, a double a RESP3 double or a RESP2 bulk string.
//!
//! Owns: the reply calls. May not touch: keys, command logic.

use std::cell::RefCell;
use std::os::raw::{c_char, c_int, c_long};
use std::rc::Rc;

use redis_module::Context;

use crate::args::push_f64;
use crate::host::server::api;
use crate::host::store::RStr;
use crate::shown::ShownSummary;

thread_local! {
    /// The text of a RESP2 double, reused (a summary sends eight).
    static DOUBLE_TEXT: RefCell<String> = RefCell::new(String::with_capacity(32));
}

/// Replies an integer.
pub fn reply_int(ctx: &Context, value: i64) {
    // SAFETY: `ctx.ctx` is the live context of the current command.
    unsafe { api!(RedisModule_ReplyWithLongLong)(ctx.ctx, value) };
}

/// The client's protocol, asked of the server when a reply first needs it.
enum Protocol {
    Unknown,
    Resp2,
    Resp3,
}

impl Protocol {
    fn is_resp3(&mut self, ctx: &Context) -> bool {
        if let Protocol::Unknown = self {
            // SAFETY: `ctx.ctx` is the live context of the current command.
            let flags = unsafe { api!(RedisModule_GetContextFlags)(ctx.ctx) };
            let resp3 = flags & redis_module::raw::REDISMODULE_CTX_FLAGS_RESP3 as c_int != 0;
            *self = if resp3 {
                Protocol::Resp3
            } else {
                Protocol::Resp2
            };
        }
        matches!(self, Protocol::Resp3)
    }
}

#[derive(Debug, PartialEq)]
pub enum Reply {
    Ok,
    Int(i64),
    Double(f64),
    Bulk(Vec<u8>),
    /// A module string the server made (a sorted-set member), sent without a copy.
    Str(RStr),
    Nil,
    Array(Vec<Reply>),
    /// An array of integers (window sums), without a `Reply` per element.
    Ints(Vec<i64>),
    /// Field/value pairs, in this order.
    Map(Vec<(&'static str, Reply)>),
    /// STATS.GET's map (`count`, then the doubles) from a cached summary whose texts are
    /// formatted already: sent without building a `Map` (no allocation per reply).
    Summary(Rc<ShownSummary>),
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
        self.send_in(ctx, &mut Protocol::Unknown);
    }

    /// [`Reply::send`], with the client's protocol asked at most once per reply.
    fn send_in(&self, ctx: &Context, protocol: &mut Protocol) {
        let c = ctx.ctx;
        // SAFETY (every call below): `c` is the live context of the current command; the
        // buffers passed with their lengths are valid for the call (the server copies
        // them), and C strings are NUL-terminated literals.
        match self {
            // SAFETY: as above.
            Reply::Ok => unsafe {
                api!(RedisModule_ReplyWithSimpleString)(c, c"OK".as_ptr());
            },
            Reply::Int(v) => reply_int(ctx, *v),
            Reply::Double(v) => {
                if v.is_finite() && !protocol.is_resp3(ctx) {
                    // RESP2 has no double: Redis would send `%.17g` text as a bulk
                    // string, whose printf costs more than the rest of a STATS.GET.
                    // The shortest text that reads back as the same double is as exact.
                    DOUBLE_TEXT.with_borrow_mut(|text| {
                        text.clear();
                        push_f64(text, *v);
                        bulk(ctx, text.as_bytes());
                    });
                } else {
                    double(ctx, *v);
                }
            }
            Reply::Bulk(bytes) => bulk(ctx, bytes),
            // SAFETY: as above; the string is live for the call.
            Reply::Str(s) => unsafe {
                api!(RedisModule_ReplyWithString)(c, s.as_ptr());
            },
            // SAFETY: as above.
            Reply::Nil => unsafe {
                api!(RedisModule_ReplyWithNull)(c);
            },
            Reply::Array(items) => {
                // SAFETY: as above.
                unsafe { api!(RedisModule_ReplyWithArray)(c, items.len() as c_long) };
                items.iter().for_each(|item| item.send_in(ctx, protocol));
            }
            Reply::Ints(values) => {
                // SAFETY: as above.
                unsafe { api!(RedisModule_ReplyWithArray)(c, values.len() as c_long) };
                for &v in values {
                    // SAFETY: as above.
                    unsafe { api!(RedisModule_ReplyWithLongLong)(c, v) };
                }
            }
            Reply::Map(fields) => {
                // SAFETY: as above.
                unsafe { api!(RedisModule_ReplyWithMap)(c, fields.len() as c_long) };
                for (name, value) in fields {
                    bulk(ctx, name.as_bytes());
                    value.send_in(ctx, protocol);
                }
            }
            Reply::Summary(summary) => {
                let fields = 1 + summary.doubles.len();
                // SAFETY: as above.
                unsafe { api!(RedisModule_ReplyWithMap)(c, fields as c_long) };
                bulk(ctx, b"count");
                let count = i64::try_from(summary.count).unwrap_or(i64::MAX);
                // SAFETY: as above.
                unsafe { api!(RedisModule_ReplyWithLongLong)(c, count) };
                let resp3 = protocol.is_resp3(ctx);
                for (name, v, text) in &summary.doubles {
                    bulk(ctx, name.as_bytes());
                    if v.is_finite() && !resp3 {
                        bulk(ctx, text.as_bytes());
                    } else {
                        double(ctx, *v);
                    }
                }
            }
        }
    }
}

/// Sends `bytes` as a bulk string.
fn bulk(ctx: &Context, bytes: &[u8]) {
    // SAFETY: live context of the current command; the server copies the buffer.
    unsafe {
        api!(RedisModule_ReplyWithStringBuffer)(
            ctx.ctx,
            bytes.as_ptr().cast::<c_char>(),
            bytes.len(),
        )
    };
}

/// Sends a double the protocol's way (RESP3 double, RESP2 `%.17g` bulk string).
fn double(ctx: &Context, v: f64) {
    // SAFETY: live context of the current command.
    unsafe { api!(RedisModule_ReplyWithDouble)(ctx.ctx, v) };
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
