//! What tally says about itself: its version (from `Cargo.toml`) and, for every command,
//! the documentation `COMMAND DOCS` answers (summary, complexity, argument tree), which
//! `redis-cli` turns into argument hints and `commands.json` repeats.
//!
//! Pure data, no Redis imports: `cmdinfo` hands it to the server when it registers each
//! command of the command table, and refuses to load when a command has no entry here.
//! The argument trees follow each command's parser (options the parser takes in any order
//! are listed in one order, as Redis's own docs do).

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
    const fn new(name: &'static CStr, kind: Kind) -> Arg {
        Arg {
            name,
            kind,
            token: None,
            optional: false,
            multiple: false,
            args: &[],
        }
    }

    const fn optional(self) -> Arg {
        Arg {
            optional: true,
            ..self
        }
    }

    const fn multiple(self) -> Arg {
        Arg {
            multiple: true,
            ..self
        }
    }

    const fn token(self, token: &'static CStr) -> Arg {
        Arg {
            token: Some(token),
            ..self
        }
    }
}

/// The first key of every command (key spec 0).
const KEY: Arg = Arg::new(c"key", Kind::Key(0));

/// `numkeys key [key ...]` of the commands over several keys (key spec 0, counted).
const NUMKEYS: Arg = integer(c"numkeys");
const KEYS: Arg = Arg::new(c"key", Kind::Key(0)).multiple();

const fn integer(name: &'static CStr) -> Arg {
    Arg::new(name, Kind::Integer)
}

const fn double(name: &'static CStr) -> Arg {
    Arg::new(name, Kind::Double)
}

const fn string(name: &'static CStr) -> Arg {
    Arg::new(name, Kind::String)
}

/// A keyword alone, named after it in lower case.
const fn pure_token(name: &'static CStr, token: &'static CStr) -> Arg {
    Arg::new(name, Kind::PureToken).token(token)
}

const fn block(name: &'static CStr, args: &'static [Arg]) -> Arg {
    Arg {
        args,
        ..Arg::new(name, Kind::Block)
    }
}

/// `[AT ts]`: the event or query time, Unix milliseconds.
const AT: Arg = integer(c"ts").token(c"AT").optional();

/// `[WINDOW dur]` of the reads that merge the latest slots or periods.
const WINDOW: Arg = string(c"dur").token(c"WINDOW").optional();

/// `[FROM ts]` and `[TO ts]` of the range reads.
const FROM: Arg = integer(c"from_ts").token(c"FROM").optional();
const TO: Arg = integer(c"to_ts").token(c"TO").optional();

/// One command's documentation.
#[derive(Debug)]
pub struct Doc {
    /// The command's name, as registered (lower case).
    pub command: &'static CStr,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    /// The arguments after the command name.
    pub args: &'static [Arg],
}

/// The documentation of `command` (its registered name), if it has any.
pub fn doc_of(command: &CStr) -> Option<&'static Doc> {
    DOCS.iter().find(|doc| doc.command == command)
}

/// Every command's documentation, in the command table's order.
pub static DOCS: &[Doc] = &[
    Doc {
        command: c"tscounter.create",
        summary: c"Create a multi-resolution counter",
        complexity: c"O(R) where R is the number of resolutions",
        args: &[
            KEY,
            string(c"res:samples")
                .token(c"RESOLUTIONS")
                .optional()
                .multiple(),
        ],
    },
    Doc {
        command: c"tscounter.incrby",
        summary: c"Add an increment to a counter at every resolution that keeps the time",
        complexity: c"O(R) where R is the number of resolutions, plus O(E) for the E slots that left their resolution's kept range since the counter was last trimmed",
        args: &[KEY, integer(c"increment"), AT],
    },
    Doc {
        command: c"tscounter.incr",
        summary: c"Add 1 to a counter at every resolution that keeps the time",
        complexity: c"O(R) where R is the number of resolutions, plus O(E) for the E slots that left their resolution's kept range since the counter was last trimmed",
        args: &[KEY, AT],
    },
    Doc {
        command: c"tscounter.sum",
        summary: c"Sum a counter over one or more windows ending now or at a given time",
        complexity: c"O(W * S) where W is the number of windows and S the number of slots a window covers at the resolution that answers it",
        args: &[KEY, string(c"window").multiple(), AT],
    },
    Doc {
        command: c"tscounter.range",
        summary: c"List a counter's slots at one resolution, oldest first",
        complexity: c"O(N) where N is the number of slots of the resolution between FROM and TO (at most its samples); with EMPTY, O(N) in the reply: one row per slot, zeros included",
        args: &[
            KEY,
            string(c"resolution"),
            FROM,
            TO,
            pure_token(c"empty", c"EMPTY").optional(),
        ],
    },
    Doc {
        command: c"tscounter.info",
        summary: c"Show a counter's resolutions, stored slots and memory",
        complexity: c"O(R) where R is the number of resolutions (a few probes of the hash each); O(F) in the F fields of the hash when native edits left the counter's bookkeeping out of step with it",
        args: &[KEY],
    },
    Doc {
        command: c"tscounter.limit",
        summary: c"Apply an increment only if every window's sum stays within its maximum",
        complexity: c"O(P + S) where P is the number of window/max pairs and S the number of slots the windows cover, plus TSCOUNTER.INCRBY's cost when the increment is applied",
        args: &[
            KEY,
            integer(c"increment"),
            block(c"limit", &[string(c"window"), integer(c"max")]).multiple(),
            AT,
            pure_token(c"details", c"DETAILS").optional(),
        ],
    },
    Doc {
        command: c"tscounter.mlimit",
        summary: c"Apply an increment to several counters only if every window of every counter stays within its maximum",
        complexity: c"O(K * (P + S)) where K is the number of keys, P the number of window/max pairs of a key and S the number of slots its windows cover, plus TSCOUNTER.INCRBY's cost per key when the increment is applied",
        args: &[
            NUMKEYS,
            KEYS,
            integer(c"increment"),
            block(
                c"key_limits",
                &[
                    integer(c"npairs"),
                    block(c"limit", &[string(c"window"), integer(c"max")]).multiple(),
                ],
            )
            .multiple(),
            AT,
            pure_token(c"details", c"DETAILS").optional(),
        ],
    },
    Doc {
        command: c"tscounter.msum",
        summary: c"Sum each window over several counters at once",
        complexity: c"O(K * W * S) where K is the number of keys, W the number of windows and S the number of slots a window covers: the cost of K TSCOUNTER.SUM calls",
        args: &[
            NUMKEYS,
            KEYS,
            string(c"window").multiple(),
            AT,
        ],
    },
    Doc {
        command: c"tsthrottle.allow",
        summary: c"Admit a request at a steady rate with a burst allowance (GCRA), storing the subject's next arrival time",
        complexity: c"O(1)",
        args: &[
            KEY,
            integer(c"max_burst"),
            integer(c"count"),
            string(c"period"),
            integer(c"q").token(c"QUANTITY").optional(),
            AT,
        ],
    },
    Doc {
        command: c"cl.throttle",
        summary: c"redis-cell's rate limit on TSTHROTTLE's keys (registered with throttle-cell-compat yes)",
        complexity: c"O(1)",
        args: &[
            KEY,
            integer(c"max_burst"),
            integer(c"count"),
            integer(c"period"),
            integer(c"quantity").optional(),
        ],
    },
    Doc {
        command: c"tsrank.create",
        summary: c"Create a sliding-window leaderboard",
        complexity: c"O(1)",
        args: &[
            KEY,
            string(c"window_dur").token(c"WINDOW").optional(),
            string(c"slot_dur").token(c"SLOT").optional(),
            integer(c"k").token(c"CAPACITY").optional(),
        ],
    },
    Doc {
        command: c"tsrank.incrby",
        summary: c"Add increments to members of a leaderboard in the slot of now or of a given time",
        complexity: c"O(M * log(N)) where M is the number of increment/member pairs and N the number of members; a board whose keys were edited by other commands is first rebuilt, O(C) in its stored counts; on a board with CAPACITY k, a write to a full slot whose order the server does not hold (after a restart or a failover) first reads the slot, O(k)",
        args: &[
            KEY,
            block(c"pair", &[integer(c"increment"), string(c"member")]).multiple(),
            AT,
        ],
    },
    Doc {
        command: c"tsrank.rem",
        summary: c"Remove members from a leaderboard: their totals and their counts in every slot",
        complexity: c"O(M * S) where M is the number of members and S the number of live slots; a board whose keys were edited by other commands is first rebuilt, O(C) in its stored counts",
        args: &[KEY, string(c"member").multiple()],
    },
    Doc {
        command: c"tsrank.top",
        summary: c"List a leaderboard's members with the highest totals over the window",
        complexity: c"O(log(N) + M) where N is the number of members and M is OFFSET + count; with a WINDOW shorter than the board's, or while a slot that left the window is being subtracted, O(C) in the counts of the slots read",
        args: &[
            KEY,
            integer(c"count"),
            integer(c"offset").token(c"OFFSET").optional(),
            pure_token(c"withscores", c"WITHSCORES").optional(),
            WINDOW,
        ],
    },
    Doc {
        command: c"tsrank.score",
        summary: c"Get a member's total over a leaderboard's window",
        complexity: c"O(1), plus O(P) for the P slots that left the window and are still being subtracted",
        args: &[KEY, string(c"member")],
    },
    Doc {
        command: c"tsrank.rank",
        summary: c"Get a member's rank in a leaderboard, 0 for the highest total; with TIES, how many members have a higher total",
        complexity: c"O(log(N)) where N is the number of members; O(N) while a slot that left the window is still being subtracted",
        args: &[
            KEY,
            string(c"member"),
            pure_token(c"ties", c"TIES").optional(),
        ],
    },
    Doc {
        command: c"tsrank.mscore",
        summary: c"Get several members' totals over a leaderboard's window",
        complexity: c"O(M) where M is the number of members asked, plus O(M * P) for the P slots that left the window and are still being subtracted",
        args: &[KEY, string(c"member").multiple()],
    },
    Doc {
        command: c"tsrank.around",
        summary: c"List a member and the members ranked just above and below it in a leaderboard",
        complexity: c"O(log(N) + M) where N is the number of members and M is count; O(N) while a slot that left the window is still being subtracted",
        args: &[
            KEY,
            string(c"member"),
            integer(c"count"),
            pure_token(c"withscores", c"WITHSCORES").optional(),
        ],
    },
    Doc {
        command: c"tsrank.info",
        summary: c"Show a leaderboard's window, slot, members and live slots",
        complexity: c"O(S) where S is the number of slots in the window, plus O(C) in the counts of slots that left the window and are still being subtracted",
        args: &[KEY],
    },
    Doc {
        command: c"tsrank.history",
        summary: c"List a member's counts per slot over a leaderboard's window, oldest first",
        complexity: c"O(S) where S is the number of slots in the window (or in WINDOW's duration)",
        args: &[KEY, string(c"member"), WINDOW],
    },
    Doc {
        command: c"stats.create",
        summary: c"Create a windowed statistics object",
        complexity: c"O(1)",
        args: &[
            KEY,
            string(c"dur").token(c"PERIOD").optional(),
            integer(c"n").token(c"KEEP").optional(),
        ],
    },
    Doc {
        command: c"stats.add",
        summary: c"Add values to the statistics of their period, optionally ranking the period by its mean or another statistic",
        complexity: c"O(V + B) where V is the number of values and B the number of quantile-sketch buckets of the period (its sketch is read and rewritten); with REPORT, plus O(log(N)) where N is the number of members of the ranking, and O(B) more to rank by a quantile (BY p50, p90 or p99)",
        args: &[
            KEY,
            double(c"value").multiple(),
            AT,
            block(
                c"report",
                &[
                    Arg::new(c"rankkey", Kind::Key(1)),
                    string(c"member"),
                    integer(c"n").token(c"KEEP").optional(),
                    Arg {
                        args: &[
                            pure_token(c"mean", c"MEAN"),
                            pure_token(c"max", c"MAX"),
                            pure_token(c"count", c"COUNT"),
                            pure_token(c"sum", c"SUM"),
                            pure_token(c"p50", c"P50"),
                            pure_token(c"p90", c"P90"),
                            pure_token(c"p99", c"P99"),
                        ],
                        ..Arg::new(c"stat", Kind::OneOf)
                    }
                    .token(c"BY")
                    .optional(),
                ],
            )
            .token(c"REPORT")
            .optional(),
        ],
    },
    Doc {
        command: c"stats.get",
        summary: c"Get count, sum, min, max, mean, stddev and percentiles over the current period or a window",
        complexity: c"O(P * B) where P is the number of periods merged (1 without WINDOW, at most 2000) and B the number of quantile-sketch buckets of a period",
        args: &[KEY, WINDOW],
    },
    Doc {
        command: c"stats.quantile",
        summary: c"Estimate quantiles over the current period or a window",
        complexity: c"O(P * B + Q * log(Q)) where P is the number of periods merged (1 without WINDOW, at most 2000), B the number of quantile-sketch buckets of a period and Q the number of quantiles",
        args: &[KEY, double(c"q").multiple(), WINDOW],
    },
    Doc {
        command: c"stats.cdf",
        summary: c"Estimate the share of values at or below each value over the current period or a window",
        complexity: c"O(P * B + V * log(V)) where P is the number of periods merged (1 without WINDOW, at most 2000), B the number of quantile-sketch buckets of a period and V the number of values",
        args: &[KEY, double(c"value").multiple(), WINDOW],
    },
    Doc {
        command: c"stats.range",
        summary: c"List the statistics of each stored period, oldest first",
        complexity: c"O(P * B) where P is the number of periods between FROM and TO and B the number of quantile-sketch buckets of a period",
        args: &[KEY, FROM, TO],
    },
    Doc {
        command: c"stats.info",
        summary: c"Show a statistics object's period, keep, stored periods and memory",
        complexity: c"O(min(F, K)) where F is the number of fields of the object's hash and K its KEEP (at most 2000)",
        args: &[KEY],
    },
    Doc {
        command: c"stats.mget",
        summary: c"Get count, sum, min, max, mean, stddev and percentiles over the values of several objects' windows",
        complexity: c"O(K * P * B) where K is the number of keys, P the number of periods merged per key (1 without WINDOW, at most 2000) and B the number of quantile-sketch buckets of a period: the cost of K STATS.QUANTILE calls",
        args: &[
            NUMKEYS,
            KEYS,
            WINDOW,
        ],
    },
    Doc {
        command: c"stats.mquantile",
        summary: c"Estimate quantiles over the values of several objects' windows",
        complexity: c"O(K * P * B + Q * log(Q)) where K is the number of keys, P the number of periods merged per key (1 without WINDOW, at most 2000), B the number of quantile-sketch buckets of a period and Q the number of quantiles",
        args: &[
            NUMKEYS,
            KEYS,
            double(c"q").multiple(),
            WINDOW,
        ],
    },
];

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

    #[test]
    fn each_command_is_documented_once() {
        for (i, doc) in DOCS.iter().enumerate() {
            let name = doc.command.to_string_lossy();
            assert!(
                DOCS.iter().skip(i + 1).all(|d| d.command != doc.command),
                "{name} twice"
            );
            assert!(doc_of(doc.command).is_some_and(|d| std::ptr::eq(d, doc)));
            assert!(!doc.command.to_bytes().iter().any(u8::is_ascii_uppercase));
            assert!(!doc.summary.is_empty() && doc.complexity.to_bytes().starts_with(b"O("));
        }
    }

    /// The rules the server checks in `RedisModule_SetCommandInfo` (a violation makes the
    /// module refuse to load), checked here too.
    #[test]
    fn argument_trees_are_well_formed() {
        fn check(command: &str, args: &[Arg]) {
            assert!(!args.is_empty(), "{command}: empty block");
            for arg in args {
                let name = arg.name.to_string_lossy();
                assert!(!arg.name.is_empty(), "{command}: nameless argument");
                match arg.kind {
                    Kind::Block | Kind::OneOf => check(command, arg.args),
                    _ => assert!(arg.args.is_empty(), "{command} {name}: sub-arguments"),
                }
                if arg.kind == Kind::PureToken {
                    assert!(arg.token.is_some(), "{command} {name}: no token");
                }
                if let Kind::Key(index) = arg.kind {
                    assert!(index >= 0, "{command} {name}: key spec index");
                }
            }
        }
        for doc in DOCS {
            let command = doc.command.to_string_lossy();
            // The key comes first, or right after `numkeys` for a command of counted keys.
            let first_key = match doc.args.first().map(|a| a.kind) {
                Some(Kind::Integer) => doc.args.get(1).map(|a| a.kind),
                first => first,
            };
            assert_eq!(first_key, Some(Kind::Key(0)), "{command}");
            check(&command, doc.args);
        }
    }
}
