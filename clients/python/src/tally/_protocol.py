"""The one layer that talks to redis-py, shared by the sync and the asyncio APIs.

Every operation is written once, as a generator (an *op*): it yields the list of
commands to send in one round trip and receives their replies, then returns the
parsed value. Two small drivers run an op: `run_sync` on a `redis.Redis` /
`redis.RedisCluster`, `run_async` (a coroutine) on their asyncio twins. So a
method is the same code for both kinds of client: it builds an op and hands it to
the driver of the client it was given.

The parsers accept every shape redis-py gives for tally's replies: RESP2 (maps
as flat arrays, doubles as bulk strings) and RESP3 (dicts and floats), with
`decode_responses` on (str) or off (bytes).
"""

from __future__ import annotations

import datetime
import inspect
from typing import Any, Callable, Generator, Iterable, Sequence, TypeVar, Union

T = TypeVar("T")

Command = tuple
"""One command: its name and arguments, as `execute_command` takes them."""

Op = Generator[Sequence[Command], list, T]
"""An operation: yields the commands of one round trip, receives their replies."""

Key = Union[str, bytes]
Duration = Union[int, str, bytes, datetime.timedelta]
Timestamp = Union[int, datetime.datetime]


def is_async_client(client: Any) -> bool:
    """True for `redis.asyncio.Redis` / `RedisCluster` (their commands are coroutines)."""
    return inspect.iscoroutinefunction(getattr(client, "execute_command", None))


class Tolerant(list):
    """Commands whose errors the op wants as values, even for a lone command."""


def _advance(op: Op[T], replies: list | None) -> tuple[Sequence[Command] | None, T | None]:
    """Feeds `replies` to `op`: its next round trip's commands, or `None` and its result."""
    try:
        return (next(op) if replies is None else op.send(replies)), None
    except StopIteration as done:
        return None, done.value


def _request(client: Any, commands: Sequence[Command]) -> tuple[Any, Callable[[Any], list]]:
    """Sends one round trip; returns what the client returned (a coroutine for an
    asyncio client) and how to turn its result into the list of replies.

    A lone command goes through `execute_command`, so its error is raised as is;
    several (or a `Tolerant` one) go in one pipeline whose errors come back as
    exception objects for the op to judge (a `CREATE` that finds the key already
    there is not a failure).
    """
    if len(commands) == 1 and not isinstance(commands, Tolerant):
        return client.execute_command(*commands[0]), lambda reply: [reply]
    pipe = client.pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command)
    return pipe.execute(raise_on_error=False), list


def run_sync(client: Any, op: Op[T]) -> T:
    """Runs `op` on a synchronous client, one round trip per yield."""
    commands, result = _advance(op, None)
    while commands is not None:
        sent, replies = _request(client, commands)
        commands, result = _advance(op, replies(sent))
    return result  # type: ignore[return-value]


async def run_async(client: Any, op: Op[T]) -> T:
    """`run_sync` for asyncio clients."""
    commands, result = _advance(op, None)
    while commands is not None:
        sent, replies = _request(client, commands)
        commands, result = _advance(op, replies(await sent))
    return result  # type: ignore[return-value]


def single(command: Command, parse: Callable[[Any], T]) -> Op[T]:
    """The op of one command whose reply is parsed by `parse`."""
    replies = yield [command]
    return parse(replies[0])


def raise_errors(replies: Iterable[Any]) -> None:
    """Raises the first error among a pipeline's replies."""
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply


# ---------------------------------------------------------------- arguments ----


def duration(value: Duration) -> Any:
    """A duration argument: `int` milliseconds, a tally duration text (`"5s"`,
    `"24h"`) or a `datetime.timedelta` (whole milliseconds)."""
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    if isinstance(value, bool) or not isinstance(value, (int, str, bytes)):
        raise TypeError(f"a duration is an int (ms), a str like '5s' or a timedelta, not {value!r}")
    return value


def period(value: Duration) -> Any:
    """TSTHROTTLE.ALLOW's period: a duration with its unit (milliseconds are sent as
    `<n>ms`), since the server refuses a bare number there."""
    d = duration(value)
    return f"{d}ms" if isinstance(d, int) else d


def timestamp(value: Timestamp) -> int:
    """A timestamp argument: Unix milliseconds, or an aware `datetime`."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise ValueError("a datetime timestamp must be timezone-aware")
        return round(value.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"a timestamp is an int (Unix ms) or an aware datetime, not {value!r}")
    return value


def at(value: Timestamp | None) -> tuple:
    """The optional `AT ts` of a command."""
    return () if value is None else ("AT", timestamp(value))


def window(value: Duration | None) -> tuple:
    """The optional `WINDOW dur` of a read."""
    return () if value is None else ("WINDOW", duration(value))


# ------------------------------------------------------------------ replies ----


def text(value: Any) -> str:
    """A reply word (a map's field name) as `str`, whatever `decode_responses` is."""
    return value.decode() if isinstance(value, bytes) else str(value)


def ok(reply: Any) -> None:
    """`OK` replies become `None` (redis-py gives `b"OK"`, `"OK"` or `True`)."""
    return None


def integer(reply: Any) -> int:
    return int(reply)


def optional_int(reply: Any) -> int | None:
    return None if reply is None else int(reply)


def number(reply: Any) -> float:
    """A double: a RESP3 double arrives as `float`, a RESP2 bulk string as text."""
    return float(reply)


def integers(reply: Any) -> list[int]:
    """One integer (a one-window `SUM`) or an array of them, always as a list."""
    if isinstance(reply, (list, tuple)):
        return [int(x) for x in reply]
    return [int(reply)]


def int_pairs(reply: Any) -> list[tuple[int, int]]:
    """An array of `[slot_start, count]` rows."""
    return [(int(start), int(count)) for start, count in reply]


def pairs(reply: Any) -> list[tuple[Any, Any]]:
    """`[a, b]` pairs whether they come nested (RESP3) or flat (RESP2)."""
    if reply and isinstance(reply[0], (list, tuple)):
        return [(a, b) for a, b in reply]
    return list(zip(reply[0::2], reply[1::2]))


def mapping(reply: Any) -> dict[str, Any] | None:
    """A map reply (a dict in RESP3, a flat array in RESP2) with `str` field names."""
    if reply is None:
        return None
    items = reply.items() if isinstance(reply, dict) else pairs(reply)
    return {text(k): v for k, v in items}
