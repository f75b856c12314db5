//! What tally says about itself: its version (from `Cargo.toml`), and the form of a
//! command's documentation that `COMMAND DOCS` answers (summary, complexity, argument
//! tree), which `redis-cli` turns into argument hints and `commands.json` repeats: the
//! types, the builders and arguments the commands share, and the check of a tree.
//!
//! Pure data, no Redis imports. Each command's [`Doc`] sits beside its handler in
//! `src/<family>/commands/`, named by the command's line of the table (`command!`), so a
//! command without one does not compile; `command!` runs [`check`] on it at compile time,
//! and `cmdinfo` hands it to the server when it registers the command. An argument tree
//! follows its command's parser (options the parser takes in any order are listed in one
//! order, as Redis's own docs do).

use std::ffi::CStr;

/// The module version, as in `Cargo.toml` (`0.1.0`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// [`VERSION`] as a C string, for `since` and `INFO tally`. A `const`: the match below is
/// evaluated by the compiler, so a version with a NUL byte stops the build and nothing of
/// it runs in the server.
pub const VERSION_C: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(version) => version,
        Err(_) => panic!("the package version contains a NUL byte"),
    };

/// The version as Redis modules number it (`MODULE LIST`): major * 10000 + minor * 100 +
/// patch, so 0.1.0 is 100 and 1.2.3 is 10203.
pub const VERSION_NUMBER: i32 = version_number(
    env!("CARGO_PKG_VERSION_MAJOR"),
    env!("CARGO_PKG_VERSION_MINOR"),
    env!("CARGO_PKG_VERSION_PATCH"),
);

/// `major * 10000 + minor * 100 + patch` of three decimal parts; evaluated at compile time,
/// where a part that is not a number below 100 (major: below 100000) stops the build.
const fn version_number(major: &str, minor: &str, patch: &str) -> i32 {
    let (major, minor, patch) = (decimal(major), decimal(minor), decimal(patch));
    assert!(
        major < 100_000 && minor < 100 && patch < 100,
        "version part out of range"
    );
    major * 10_000 + minor * 100 + patch
}

const fn decimal(text: &str) -> i32 {
    let bytes = text.as_bytes();
    assert!(!bytes.is_empty(), "empty version part");
    let mut value: i32 = 0;
    let mut i = 0;
    while i < bytes.len() {
        let digit = bytes[i];
        assert!(
            digit.is_ascii_digit(),
            "version part is not a decimal number"
        );
        value = value * 10 + (digit - b'0') as i32;
        assert!(value < 1_000_000, "version part too large");
        i += 1;
    }
    value
}

/// The type of a command argument, as `COMMAND DOCS` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A key; the number is the index of its key spec in the command's registration.
    Key(i32),
    Integer,
    Double,
    String,
    /// A keyword alone (`EMPTY`, `WITHSCORES`): the argument's `token`.
    PureToken,
    /// Several arguments given together (`window max`).
    Block,
    /// One of several arguments.
    OneOf,
}

/// One argument of a command (or of a block).
#[derive(Clone, Copy, Debug)]
pub struct Arg {
    /// The argument's name: the placeholder of the command's syntax in the README
    /// (`ts`, `dur`, `res:samples`), qualified where a command has two of one kind
    /// (`from_ts`, `to_ts`), since clients generate code from the names.
    pub name: &'static CStr,
    pub kind: Kind,
    /// The keyword before the value (`AT` in `AT ts`), if any.
    pub token: Option<&'static CStr>,
    pub optional: bool,
    pub multiple: bool,
    /// The arguments of a block or one-of.
    pub args: &'static [Arg],
}

impl Arg {
    pub const fn new(name: &'static CStr, kind: Kind) -> Arg {
        Arg {
            name,
            kind,
            token: None,
            optional: false,
            multiple: false,
            args: &[],
        }
    }

    pub const fn optional(self) -> Arg {
        Arg {
            optional: true,
            ..self
        }
    }

    pub const fn multiple(self) -> Arg {
        Arg {
            multiple: true,
            ..self
        }
    }

    pub const fn token(self, token: &'static CStr) -> Arg {
        Arg {
            token: Some(token),
            ..self
        }
    }
}

/// The first key of every command (key spec 0).
pub const KEY: Arg = Arg::new(c"key", Kind::Key(0));

/// `numkeys key [key ...]` of the commands over several keys (key spec 0, counted).
pub const NUMKEYS: Arg = integer(c"numkeys");
pub const KEYS: Arg = Arg::new(c"key", Kind::Key(0)).multiple();

pub const fn integer(name: &'static CStr) -> Arg {
    Arg::new(name, Kind::Integer)
}

pub const fn double(name: &'static CStr) -> Arg {
    Arg::new(name, Kind::Double)
}

pub const fn string(name: &'static CStr) -> Arg {
    Arg::new(name, Kind::String)
}

/// A keyword alone, named after it in lower case.
pub const fn pure_token(name: &'static CStr, token: &'static CStr) -> Arg {
    Arg::new(name, Kind::PureToken).token(token)
}

pub const fn block(name: &'static CStr, args: &'static [Arg]) -> Arg {
    Arg {
        args,
        ..Arg::new(name, Kind::Block)
    }
}

/// `[AT ts]`: the event or query time, Unix milliseconds.
pub const AT: Arg = integer(c"ts").token(c"AT").optional();

/// `[WINDOW dur]` of the reads that merge the latest slots or periods.
pub const WINDOW: Arg = string(c"dur").token(c"WINDOW").optional();

/// `[FROM ts]` and `[TO ts]` of the range reads.
pub const FROM: Arg = integer(c"from_ts").token(c"FROM").optional();
pub const TO: Arg = integer(c"to_ts").token(c"TO").optional();

/// One command's documentation (its name is the command table's).
#[derive(Debug)]
pub struct Doc {
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    /// The arguments after the command name.
    pub args: &'static [Arg],
}

/// Stops the build (`command!` evaluates it in a `const` for every command) when the
/// command `name` or its documentation breaks a rule the server checks in
/// `RedisModule_SetCommandInfo` (a violation there makes the module refuse to load) or
/// one of tally's: a lower-case name, a summary, a complexity in O() notation, the key
/// first (or right after `numkeys` for a command of counted keys), every key naming one
/// of the command's `key_specs` key specs.
pub const fn check(name: &CStr, doc: &Doc, key_specs: usize) {
    let mut rest = name.to_bytes();
    if rest.is_empty() {
        fail(name, "a command without a name");
    }
    while let [byte, after @ ..] = rest {
        if byte.is_ascii_uppercase() {
            fail(name, "a command name is registered in lower case");
        }
        rest = after;
    }
    if doc.summary.to_bytes().is_empty() {
        fail(name, "a command without a summary");
    }
    if !matches!(doc.complexity.to_bytes(), [b'O', b'(', _, ..]) {
        fail(name, "a complexity starts with O(");
    }
    let first = match doc.args {
        [Arg {
            kind: Kind::Integer,
            ..
        }, second, ..] => second,
        [first, ..] => first,
        [] => fail(name, "a command without arguments has no key"),
    };
    if !matches!(first.kind, Kind::Key(0)) {
        fail(
            name,
            "the first argument (after numkeys) is the key of key spec 0",
        );
    }
    check_args(name, doc.args, key_specs);
}

/// [`check`] of one list of arguments and the lists below it.
const fn check_args(name: &CStr, mut args: &[Arg], key_specs: usize) {
    if args.is_empty() {
        fail(name, "an empty block or one-of");
    }
    while let [arg, rest @ ..] = args {
        if arg.name.to_bytes().is_empty() {
            fail(name, "a nameless argument");
        }
        match arg.kind {
            Kind::Block | Kind::OneOf => check_args(name, arg.args, key_specs),
            _ if !arg.args.is_empty() => fail(
                name,
                "sub-arguments of an argument that is no block or one-of",
            ),
            _ => {}
        }
        if matches!(arg.kind, Kind::PureToken) && arg.token.is_none() {
            fail(name, "a pure token without its token");
        }
        if let Kind::Key(index) = arg.kind {
            if index < 0 || index as usize >= key_specs {
                fail(
                    name,
                    "a key argument names a key spec the command does not have",
                );
            }
        }
        args = rest;
    }
}

/// Panics with `<name>: <rule>`, so the compiler's error names the command whose line of
/// the table failed (a `const` panic formats one `&str` and nothing else, hence the text
/// is put together here, cut at 160 bytes).
const fn fail(name: &CStr, rule: &str) -> ! {
    let mut text = [0u8; 160];
    let mut len = 0;
    let mut parts: [&[u8]; 3] = [name.to_bytes(), b": ", rule.as_bytes()];
    let mut part = 0;
    while part < parts.len() {
        while let [byte, rest @ ..] = parts[part] {
            if len < text.len() {
                text[len] = *byte;
                len += 1;
            }
            parts[part] = rest;
        }
        part += 1;
    }
    match std::str::from_utf8(text.split_at(len).0) {
        Ok(text) => panic!("{}", text),
        // A name cut inside a character: the rule alone.
        Err(_) => panic!("{}", rule),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_numbers_follow_the_redis_convention() {
        assert_eq!(version_number("0", "1", "0"), 100);
        assert_eq!(version_number("1", "2", "3"), 10203);
        assert_eq!(version_number("12", "34", "56"), 123456);
        assert_eq!(VERSION_C.to_str(), Ok(VERSION));
    }

    /// A tree with every kind of argument, the way STATS.ADD's is built.
    const FULL: Doc = Doc {
        summary: c"Do everything",
        complexity: c"O(1)",
        args: &[
            KEY,
            double(c"value").multiple(),
            AT,
            block(
                c"report",
                &[
                    Arg::new(c"rankkey", Kind::Key(1)),
                    string(c"member"),
                    Arg {
                        args: &[pure_token(c"mean", c"MEAN"), pure_token(c"max", c"MAX")],
                        ..Arg::new(c"stat", Kind::OneOf)
                    }
                    .token(c"BY")
                    .optional(),
                ],
            )
            .token(c"REPORT")
            .optional(),
        ],
    };

    /// Checked at compile time, as the command table checks every command's.
    const _: () = check(c"test.full", &FULL, 2);

    /// [`FULL`] with `args` instead of its own.
    fn with(args: &'static [Arg]) -> Doc {
        Doc { args, ..FULL }
    }

    #[test]
    fn well_formed_documentation_passes() {
        check(c"test.full", &FULL, 2);
        check(
            c"test.counted",
            &with(const { &[NUMKEYS, KEYS, WINDOW] }),
            1,
        );
        check(c"test.range", &with(const { &[KEY, FROM, TO] }), 1);
    }

    #[test]
    #[should_panic(expected = "test.Full: a command name is registered in lower case")]
    fn an_upper_case_name_fails() {
        check(c"test.Full", &FULL, 2);
    }

    #[test]
    #[should_panic(expected = "summary")]
    fn an_empty_summary_fails() {
        check(
            c"test.x",
            &Doc {
                summary: c"",
                ..FULL
            },
            2,
        );
    }

    #[test]
    #[should_panic(expected = "O(")]
    fn a_complexity_not_in_o_notation_fails() {
        check(
            c"test.x",
            &Doc {
                complexity: c"constant",
                ..FULL
            },
            2,
        );
    }

    #[test]
    #[should_panic(expected = "key spec 0")]
    fn a_tree_not_starting_with_the_key_fails() {
        check(c"test.x", &with(const { &[string(c"member"), KEY] }), 1);
    }

    #[test]
    #[should_panic(expected = "key spec the command does not have")]
    fn a_key_without_its_key_spec_fails() {
        check(c"test.full", &FULL, 1);
    }

    #[test]
    #[should_panic(expected = "empty block")]
    fn an_empty_block_fails() {
        check(c"test.x", &with(const { &[KEY, block(c"limit", &[])] }), 1);
    }

    #[test]
    #[should_panic(expected = "nameless")]
    fn a_nameless_argument_fails() {
        check(c"test.x", &with(const { &[KEY, integer(c"")] }), 1);
    }

    #[test]
    #[should_panic(expected = "sub-arguments")]
    fn sub_arguments_of_a_plain_argument_fail() {
        let args = const {
            &[
                KEY,
                Arg {
                    args: &[integer(c"max")],
                    ..string(c"window")
                },
            ]
        };
        check(c"test.x", &with(args), 1);
    }

    #[test]
    #[should_panic(expected = "without its token")]
    fn a_pure_token_without_its_token_fails() {
        check(
            c"test.x",
            &with(const { &[KEY, Arg::new(c"empty", Kind::PureToken)] }),
            1,
        );
    }
}
