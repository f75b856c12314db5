//! Effects sent to replicas and the AOF: the only way anything tally does replicates.
//!
//! Commands that read the clock are never propagated as typed: each records the plain
//! writes it made (absolute values, not increments) as native commands in an [`Effects`]
//! and emits them, so a replica or an AOF reload holds exactly the primary's data. Several
//! effects of one command or timer pass reach the replica wrapped in MULTI/EXEC by Redis.
//!
//! Everything goes through [`Effects`]: recorded commands ([`Effects::command`], and
//! [`Batch`], one command of many entries started by its first), or one command sent at
//! once with no buffer in between ([`Effects::send`] of bytes, [`Effects::send_strings`]
//! of module strings the server takes by reference). [`HashEffects`] records one hash's
//! writes as module strings: the counter and STATS write paths made those strings for
//! their own writes, and handing them over spares a copy of every field and value on the
//! hottest paths.
//!
//! Owns: `RedisModule_Replicate`. May not touch: keys.

use std::ffi::CStr;
use std::marker::PhantomData;
use std::os::raw::c_char;

use redis_module::raw::RedisModuleString;
use redis_module::{Context, RedisString};

use crate::host::server::api;
use crate::host::store::RStr;

/// A module string lent to a replicated command: made only from a string that outlives
/// `'a` (an [`RStr`] tally owns, a command's argument), so whatever is handed to
/// `RedisModule_Replicate` is alive, and no safe function here takes a raw pointer.
#[derive(Clone, Copy)]
pub struct Arg<'a>(*mut RedisModuleString, PhantomData<&'a RedisModuleString>);

impl Arg<'_> {
    fn as_ptr(self) -> *mut RedisModuleString {
        self.0
    }
}

impl<'a> From<&'a RStr> for Arg<'a> {
    fn from(s: &'a RStr) -> Arg<'a> {
        Arg(s.as_ptr(), PhantomData)
    }
}

impl<'a> From<&'a RedisString> for Arg<'a> {
    fn from(s: &'a RedisString) -> Arg<'a> {
        Arg(s.inner, PhantomData)
    }
}

/// Native write commands, recorded in order; arguments live in one buffer so recording
/// allocates little.
#[derive(Default)]
pub struct Effects {
    bytes: Vec<u8>,
    /// End offset in `bytes` of each argument.
    arg_ends: Vec<usize>,
    /// Name and end index in `arg_ends` of each command.
    commands: Vec<(&'static CStr, usize)>,
}

impl Effects {
    pub fn new() -> Effects {
        Effects::default()
    }

    /// Starts a command; add its arguments with [`Effects::arg`] / [`Effects::int`].
    pub fn command(&mut self, name: &'static CStr) -> &mut Effects {
        self.commands.push((name, self.arg_ends.len()));
        self
    }

    pub fn arg(&mut self, bytes: &[u8]) -> &mut Effects {
        self.bytes.extend_from_slice(bytes);
        self.push_arg_end();
        self
    }

    pub fn int(&mut self, value: i64) -> &mut Effects {
        crate::args::push_i64(&mut self.bytes, value);
        self.push_arg_end();
        self
    }

    fn push_arg_end(&mut self) {
        self.arg_ends.push(self.bytes.len());
        if let Some(last) = self.commands.last_mut() {
            last.1 = self.arg_ends.len();
        }
    }

    /// `name key field value ...` in one go.
    pub fn keyed(&mut self, name: &'static CStr, key: &[u8], args: &[&[u8]]) -> &mut Effects {
        self.command(name).arg(key);
        for arg in args {
            self.arg(arg);
        }
        self
    }

    /// Sends every recorded command, in order, and forgets them.
    pub fn emit(&mut self, ctx: &Context) {
        let mut first_arg = 0;
        let mut start = 0;
        for &(name, end_arg) in &self.commands {
            let ends = self.arg_ends.get(first_arg..end_arg).unwrap_or(&[]);
            let args = ends.iter().map(|&end| {
                let arg = self.bytes.get(start..end).unwrap_or(&[]);
                start = end;
                arg
            });
            replicate_all(ctx, name, args);
            first_arg = end_arg;
        }
        self.bytes.clear();
        self.arg_ends.clear();
        self.commands.clear();
    }
}

impl Effects {
    /// Sends one command whose arguments are at hand as bytes (a key's new value and
    /// expiry), with no buffer recorded in between.
    pub fn send(ctx: &Context, name: &CStr, args: &[&[u8]]) {
        replicate(ctx, name, args);
    }

    /// Sends one command whose arguments are module strings, each taken by reference (see
    /// [`replicate_strings`]).
    pub fn send_strings<'a>(ctx: &Context, name: &CStr, args: impl Iterator<Item = Arg<'a>>) {
        replicate_strings(ctx, name, args);
    }
}

/// Arguments a command may have to be passed from the stack (every hot path has fewer).
const STACK_ARGS: usize = 19;

/// [`replicate`] of arguments as they come, gathered on the stack when they fit.
fn replicate_all<'a>(ctx: &Context, name: &CStr, args: impl Iterator<Item = &'a [u8]>) {
    let empty: &[u8] = &[];
    gathered::<_, STACK_ARGS>(empty, args, |args| replicate(ctx, name, args));
}

/// Calls `f` with the items of `items` in a slice: on the stack when at most `N` of them
/// come (every hot path), else in a Vec. `empty` fills the unused stack slots.
fn gathered<T: Copy, const N: usize>(
    empty: T,
    items: impl Iterator<Item = T>,
    f: impl FnOnce(&mut [T]),
) {
    let mut stack = [empty; N];
    let mut count = 0;
    let mut heap = Vec::new();
    for item in items {
        if heap.is_empty() {
            if let Some(slot) = stack.get_mut(count) {
                *slot = item;
                count += 1;
                continue;
            }
            heap.extend_from_slice(&stack);
        }
        heap.push(item);
    }
    if heap.is_empty() {
        f(stack.get_mut(..count).unwrap_or_default());
    } else {
        f(&mut heap);
    }
}

/// Matches an argument slice against fixed arities, passing each argument as a buffer
/// and its length (format `b` per argument).
macro_rules! replicate_buffers {
    ($c:expr, $name:expr, $args:expr, $fallback:expr; $($format:literal [$($a:ident)*],)*) => {
        match $args {
            $(
                [$($a),*] => {
                    // SAFETY: live context; the format has one `b` per argument, each
                    // matched by a pointer to `len` readable bytes and that length; the
                    // server copies what it needs.
                    unsafe {
                        api!(RedisModule_Replicate)(
                            $c,
                            $name,
                            $format.as_ptr(),
                            $($a.as_ptr().cast::<c_char>(), $a.len()),*
                        )
                    };
                }
            )*
            _ => $fallback,
        }
    };
}

/// Sends one command. Commands of up to 19 arguments (every hot path) pass their buffers
/// straight to the server, which makes its argument strings once; longer ones go as a
/// vector of module strings.
fn replicate(ctx: &Context, name: &CStr, args: &[&[u8]]) {
    let c = ctx.ctx;
    let name = name.as_ptr();
    let vector = || {
        let strings: Vec<RStr> = args.iter().filter_map(|a| RStr::new(a)).collect();
        let mut argv: Vec<_> = strings.iter().map(RStr::as_ptr).collect();
        // SAFETY: "v" takes an array of live module strings and its length.
        unsafe {
            api!(RedisModule_Replicate)(c, name, c"v".as_ptr(), argv.as_mut_ptr(), argv.len())
        };
    };
    replicate_buffers!(c, name, args, vector();
        c"b" [a0],
        c"bb" [a0 a1],
        c"bbb" [a0 a1 a2],
        c"bbbb" [a0 a1 a2 a3],
        c"bbbbb" [a0 a1 a2 a3 a4],
        c"bbbbbb" [a0 a1 a2 a3 a4 a5],
        c"bbbbbbb" [a0 a1 a2 a3 a4 a5 a6],
        c"bbbbbbbb" [a0 a1 a2 a3 a4 a5 a6 a7],
        c"bbbbbbbbb" [a0 a1 a2 a3 a4 a5 a6 a7 a8],
        c"bbbbbbbbbb" [a0 a1 a2 a3 a4 a5 a6 a7 a8 a9],
        c"bbbbbbbbbbb" [a0 a1 a2 a3 a4 a5 a6 a7 a8 a9 a10],
        c"bbbbbbbbbbbb" [a0 a1 a2 a3 a4 a5 a6 a7 a8 a9 a10 a11],
        c"bbbbbbbbbbbbb" [a0 a1 a2 a3 a4 a5 a6 a7 a8 a9 a10 a11 a12],
        c"bbbbbbbbbbbbbb" [a0 a1 a2 a3 a4 a5 a6 a7 a8 a9 a10 a11 a12 a13],
        c"bbbbbbbbbbbbbbb" [a0 a1 a2 a3 a4 a5 a6 a7 a8 a9 a10 a11 a12 a13 a14],
        c"bbbbbbbbbbbbbbbb" [a0 a1 a2 a3 a4 a5 a6 a7 a8 a9 a10 a11 a12 a13 a14 a15],
        c"bbbbbbbbbbbbbbbbb" [a0 a1 a2 a3 a4 a5 a6 a7 a8 a9 a10 a11 a12 a13 a14 a15 a16],
        c"bbbbbbbbbbbbbbbbbb" [a0 a1 a2 a3 a4 a5 a6 a7 a8 a9 a10 a11 a12 a13 a14 a15 a16 a17],
        c"bbbbbbbbbbbbbbbbbbb" [a0 a1 a2 a3 a4 a5 a6 a7 a8 a9 a10 a11 a12 a13 a14 a15 a16 a17 a18],
    );
}

/// One batched command `name key arg ...` (a `ZADD` or `ZREM` of many members, an `HDEL`
/// of many fields), started by its first entry: a step that changes nothing sends nothing.
pub struct Batch<'a> {
    name: &'static CStr,
    key: &'a [u8],
    pub effects: Effects,
    started: bool,
}

impl<'a> Batch<'a> {
    pub fn new(name: &'static CStr, key: &'a [u8]) -> Self {
        Batch {
            name,
            key,
            effects: Effects::new(),
            started: false,
        }
    }

    /// The effects to add this entry's arguments to.
    pub fn entry(&mut self) -> &mut Effects {
        if !std::mem::replace(&mut self.started, true) {
            self.effects.command(self.name).arg(self.key);
        }
        &mut self.effects
    }
}

/// The writes one operation made to one hash key: recorded while the operation runs, then
/// sent as `DEL`, or as `HDEL`/`HSET` in the order they were made.
///
/// Fields and values are kept as module strings: the server takes them into the
/// replicated command as they are (a reference each, no copy), so a write path that made
/// a value string for its own `RedisModule_HashSet`, or keeps its field names, hands the
/// same strings over.
#[derive(Default)]
pub struct HashEffects {
    /// `(field, value)` in write order; no value for a delete. Empty until the first write
    /// is recorded, which takes the spare buffer (reads record none).
    writes: Vec<(RStr, Option<RStr>)>,
    deleted_key: bool,
}

/// Largest buffer of writes kept for the next command (a counter write records eight).
const KEPT_WRITES_CAPACITY: usize = 64;

thread_local! {
    /// The buffer of the last effects dropped, empty, for the next command (every write
    /// records its effects: no allocation for them on the hot paths).
    static SPARE_WRITES: std::cell::Cell<Vec<(RStr, Option<RStr>)>> =
        const { std::cell::Cell::new(Vec::new()) };
}

impl Drop for HashEffects {
    fn drop(&mut self) {
        let mut writes = std::mem::take(&mut self.writes);
        if (1..=KEPT_WRITES_CAPACITY).contains(&writes.capacity()) {
            // Frees the strings recorded; the buffer stays.
            writes.clear();
            let _ = SPARE_WRITES.try_with(|spare| spare.set(writes));
        }
    }
}

impl HashEffects {
    pub fn set(&mut self, field: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        if let (Some(field), Some(value)) = (RStr::new(field.as_ref()), RStr::new(value.as_ref())) {
            self.record(field, Some(value));
        }
    }

    /// Sets `field` (a name the caller keeps: shared, not copied) to `value`.
    pub fn set_strings(&mut self, field: &RStr, value: RStr) {
        self.record(field.share(), Some(value));
    }

    pub fn del(&mut self, field: impl AsRef<[u8]>) {
        if let Some(field) = RStr::new(field.as_ref()) {
            self.record(field, None);
        }
    }

    /// Deletes `field`, a module string the caller made (taken over, not copied).
    pub fn del_string(&mut self, field: RStr) {
        self.record(field, None);
    }

    #[inline]
    fn record(&mut self, field: RStr, value: Option<RStr>) {
        if self.writes.capacity() == 0 {
            self.take_spare();
        }
        self.writes.push((field, value));
    }

    /// The first write takes the buffer the last command left.
    #[cold]
    fn take_spare(&mut self) {
        self.writes = SPARE_WRITES
            .try_with(std::cell::Cell::take)
            .unwrap_or_default();
        // Room for a counter write (eight fields) at once, without growing.
        self.writes.reserve(12);
    }

    /// The whole key went away: nothing else needs sending.
    pub fn delete_key(&mut self) {
        self.deleted_key = true;
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && !self.deleted_key
    }

    /// Number of writes recorded.
    pub fn len(&self) -> usize {
        self.writes.len()
    }

    /// The `(field, value)` of each set recorded from the `first`-th write on.
    pub fn sets_since(&self, first: usize) -> impl Iterator<Item = (&RStr, &RStr)> {
        let writes = self.writes.get(first..).unwrap_or_default();
        writes
            .iter()
            .filter_map(|(field, value)| Some((field, value.as_ref()?)))
    }

    /// Sends the writes to `key`: `DEL`, or each run of sets as one `HSET` and each run of
    /// deletes as one `HDEL`, in the order they were made (so a field written twice ends
    /// as on the primary; the usual write is one `HDEL` of trimmed slots, then one `HSET`).
    pub fn emit(&self, ctx: &Context, key: &[u8]) {
        if self.deleted_key {
            replicate(ctx, c"DEL", &[key]);
            return;
        }
        if let Some(key) = RStr::new(key) {
            self.emit_to(ctx, &key);
        }
    }

    /// [`HashEffects::emit`] with the key name as a module string (a command's argument:
    /// no copy of the name is made).
    pub fn emit_to<'a>(&self, ctx: &Context, key: impl Into<Arg<'a>>) {
        let key = key.into();
        if self.deleted_key {
            replicate_strings(ctx, c"DEL", std::iter::once(key));
            return;
        }
        let mut rest = self.writes.as_slice();
        while let Some((_, first)) = rest.first() {
            let deleting = first.is_none();
            let run = rest
                .iter()
                .position(|(_, v)| v.is_none() != deleting)
                .unwrap_or(rest.len());
            let (writes, after) = rest.split_at(run);
            if deleting {
                let fields = writes.iter().map(|(f, _)| Arg::from(f));
                replicate_strings(ctx, c"HDEL", std::iter::once(key).chain(fields));
            } else {
                replicate_sets(ctx, key, writes);
            }
            rest = after;
        }
    }
}

/// `HSET key field value ...` of a run of sets, gathered with a plain loop (a counter write
/// sends seven pairs: iterator adapters cost more than the copying).
fn replicate_sets(ctx: &Context, key: Arg<'_>, writes: &[(RStr, Option<RStr>)]) {
    let mut a = [std::ptr::null_mut(); STACK_STRINGS];
    let mut count = 0;
    let mut push = |arg: Arg<'_>| match a.get_mut(count) {
        Some(slot) => {
            *slot = arg.as_ptr();
            count += 1;
            true
        }
        None => false,
    };
    let mut fits = push(key);
    for (field, value) in writes {
        if let Some(value) = value {
            fits = fits && push(field.into()) && push(value.into());
        }
    }
    if fits {
        // SAFETY: the first `count` strings of `a` come from `Arg`s, alive for this call.
        unsafe { replicate_array(ctx, c"HSET", &a, count) };
    } else {
        let pairs = writes.iter().filter_map(|(f, v)| Some((f, v.as_ref()?)));
        let args = pairs.flat_map(|(f, v)| [Arg::from(f), Arg::from(v)]);
        replicate_strings(ctx, c"HSET", std::iter::once(key).chain(args));
    }
}

/// Module strings a replicated command may have to be passed from the stack.
const STACK_STRINGS: usize = 40;

/// One `s` per argument: the format of a command of `n` module strings is the last `n`
/// letters (and the NUL).
const STRING_FORMATS: &CStr = c"ssssssssssssssssssssssssssssssssssssssss";

/// Sends one command whose arguments are module strings (the server takes a reference to
/// each, no copy). Up to 40 arguments (every hot path) go as format `s` each, gathered
/// straight into the array passed from the stack: the server then sizes its argument
/// vector once (format `v` grows it twice).
fn replicate_strings<'a>(ctx: &Context, name: &CStr, mut args: impl Iterator<Item = Arg<'a>>) {
    let mut a = [std::ptr::null_mut(); STACK_STRINGS];
    let mut count = 0;
    for (slot, arg) in a.iter_mut().zip(&mut args) {
        *slot = arg.as_ptr();
        count += 1;
    }
    match args.next() {
        // SAFETY: the first `count` strings of `a` come from `Arg`s, alive for this call.
        None => unsafe { replicate_array(ctx, name, &a, count) },
        Some(more) => {
            let mut argv: Vec<_> = a.to_vec();
            argv.push(more.as_ptr());
            argv.extend(args.map(Arg::as_ptr));
            // SAFETY: every string of `argv` comes from an `Arg`, alive for this call.
            unsafe { replicate_vector(ctx, name, &mut argv) };
        }
    }
}

/// Sends the first `count` strings of `a` (the rest NULL: the server reads as many
/// arguments as the format names), with one `s` per argument.
///
/// # Safety
/// The first `count` pointers of `a` are live module strings.
unsafe fn replicate_array(
    ctx: &Context,
    name: &CStr,
    a: &[*mut RedisModuleString; STACK_STRINGS],
    count: usize,
) {
    let formats = STRING_FORMATS.to_bytes_with_nul();
    let format = formats
        .len()
        .checked_sub(count + 1)
        .and_then(|at| formats.get(at..));
    match format {
        Some(format) => {
            // SAFETY: live context; a NUL-terminated format of `count` letters `s`, each
            // matched by a live module string (the server reads as many arguments as the
            // format names and ignores the rest, all NULL).
            unsafe {
                api!(RedisModule_Replicate)(
                    ctx.ctx,
                    name.as_ptr(),
                    format.as_ptr().cast::<c_char>(),
                    a[0],
                    a[1],
                    a[2],
                    a[3],
                    a[4],
                    a[5],
                    a[6],
                    a[7],
                    a[8],
                    a[9],
                    a[10],
                    a[11],
                    a[12],
                    a[13],
                    a[14],
                    a[15],
                    a[16],
                    a[17],
                    a[18],
                    a[19],
                    a[20],
                    a[21],
                    a[22],
                    a[23],
                    a[24],
                    a[25],
                    a[26],
                    a[27],
                    a[28],
                    a[29],
                    a[30],
                    a[31],
                    a[32],
                    a[33],
                    a[34],
                    a[35],
                    a[36],
                    a[37],
                    a[38],
                    a[39],
                )
            };
        }
        None => {
            let mut argv = a.get(..count).unwrap_or_default().to_vec();
            // SAFETY: the caller's contract.
            unsafe { replicate_vector(ctx, name, &mut argv) };
        }
    }
}

/// Sends one command of any number of module strings (format `v`).
///
/// # Safety
/// Every pointer of `argv` is a live module string.
unsafe fn replicate_vector(ctx: &Context, name: &CStr, argv: &mut [*mut RedisModuleString]) {
    // SAFETY: live context; "v" takes an array of live module strings and its length
    // (the server takes a reference to each).
    unsafe {
        api!(RedisModule_Replicate)(
            ctx.ctx,
            name.as_ptr(),
            c"v".as_ptr(),
            argv.as_mut_ptr(),
            argv.len(),
        )
    };
}
