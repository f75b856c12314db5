package tally

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Leaderboard is a sliding-window leaderboard (TSRANK.*). Its key is a native sorted
// set of window totals; its slots live in keys derived from it (in a cluster the key
// needs a hash tag, "{likes}").
type Leaderboard struct {
	t   *Tally
	key string
}

// Key is the leaderboard's key.
func (b *Leaderboard) Key() string { return b.key }

// Entry is a member and a number: its window total in a ranking, its increment in
// IncrBy.
type Entry struct {
	Member string
	Score  int64
}

// BoardOptions are TSRANK.CREATE's settings; a zero field is the server's default.
type BoardOptions struct {
	// Window is the span ranked (default tally.rank-window, 24h), a whole number of
	// slots.
	Window time.Duration
	// Slot is the span counted together (default tally.rank-slot, 1h).
	Slot time.Duration
	// Capacity, when not 0, bounds the members kept per slot (CAPACITY k): trending
	// over millions of members in bounded memory, with estimates within
	// BoardInfo.Error of the true totals.
	Capacity int64
}

// Create is TSRANK.CREATE (its reply "OK"); "ERR key already exists" if it exists.
func (b *Leaderboard) Create(ctx context.Context, o BoardOptions) *Cmd[string] {
	call := newCall("TSRANK.CREATE", b.key)
	if o.Window != 0 {
		call.add("WINDOW").duration(o.Window)
	}
	if o.Slot != 0 {
		call.add("SLOT").duration(o.Slot)
	}
	if o.Capacity != 0 {
		call.add("CAPACITY", o.Capacity)
	}
	return send(ctx, b.t, call, parseOK)
}

// Incr adds increment to one member's count in the slot of now (or At): its new window
// total. A negative increment (an unlike) lowers the count, never below 0 ("ERR count
// would go below zero"). Options: At.
func (b *Leaderboard) Incr(ctx context.Context, member string, increment int64, opts ...Option) *Cmd[int64] {
	call := newCall("TSRANK.INCRBY", b.key, increment, member)
	call.at(call.options(opts, "At"))
	return send(ctx, b.t, call, parseInt)
}

// IncrBy adds to several members at once, all or nothing (each Entry's Score is its
// increment): their new window totals, in order. Options: At.
func (b *Leaderboard) IncrBy(ctx context.Context, increments []Entry, opts ...Option) *Cmd[[]int64] {
	call := newCall("TSRANK.INCRBY", b.key)
	if len(increments) == 0 {
		call.fail(fmt.Errorf("tally: IncrBy needs at least one member"))
	}
	for _, e := range increments {
		call.add(e.Score, e.Member)
	}
	call.at(call.options(opts, "At"))
	return send(ctx, b.t, call, parseInts)
}

func parseEntries(v interface{}) ([]Entry, error) {
	rows, err := pairs(v)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(rows))
	for i, row := range rows {
		if out[i].Member, err = toString(row[0]); err != nil {
			return nil, err
		}
		if out[i].Score, err = toInt(row[1]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Top is the count highest window totals, highest first (ties by member, descending,
// as ZREVRANGE). Options: Offset, Window (rank the latest span instead of the whole
// window).
func (b *Leaderboard) Top(ctx context.Context, count int64, opts ...Option) *Cmd[[]Entry] {
	call := newCall("TSRANK.TOP", b.key, count)
	o := call.options(opts, "Offset", "Window")
	if o.offset != nil {
		call.add("OFFSET", *o.offset)
	}
	call.add("WITHSCORES").window(o)
	return send(ctx, b.t, call, parseEntries)
}

// Score is member's window total; redis.Nil for a member without one.
func (b *Leaderboard) Score(ctx context.Context, member string) *Cmd[int64] {
	return send(ctx, b.t, newCall("TSRANK.SCORE", b.key, member), parseInt)
}

// Scores is each member's window total, nil for one without (TSRANK.MSCORE).
func (b *Leaderboard) Scores(ctx context.Context, members ...string) *Cmd[[]*int64] {
	call := newCall("TSRANK.MSCORE", b.key)
	if len(members) == 0 {
		call.fail(fmt.Errorf("tally: Scores needs at least one member"))
	}
	for _, m := range members {
		call.add(m)
	}
	return send(ctx, b.t, call, func(v interface{}) ([]*int64, error) {
		items, err := toSlice(v)
		if err != nil {
			return nil, err
		}
		out := make([]*int64, len(items))
		for i, item := range items {
			if item == nil {
				continue
			}
			n, err := toInt(item)
			if err != nil {
				return nil, err
			}
			out[i] = &n
		}
		return out, nil
	})
}

// Rank is member's rank, 0 for the highest total (its position in Top's order);
// redis.Nil for a member without a total. Options: Ties (the competition rank: how
// many members have a strictly higher total, so totals 9, 7, 7, 5 rank 0, 1, 1, 3).
func (b *Leaderboard) Rank(ctx context.Context, member string, opts ...Option) *Cmd[int64] {
	call := newCall("TSRANK.RANK", b.key, member)
	if call.options(opts, "Ties").ties {
		call.add("TIES")
	}
	return send(ctx, b.t, call, parseInt)
}

// Around is member and the count members ranked just above and below it, in Top's
// order (fewer at the ends); empty for a member without a total. count is 0 to 1000.
func (b *Leaderboard) Around(ctx context.Context, member string, count int64) *Cmd[[]Entry] {
	return send(ctx, b.t, newCall("TSRANK.AROUND", b.key, member, count, "WITHSCORES"), parseEntries)
}

// History is member's non-zero count in each slot of the window, oldest first.
// Options: Window (the latest span only).
func (b *Leaderboard) History(ctx context.Context, member string, opts ...Option) *Cmd[[]Slot] {
	call := newCall("TSRANK.HISTORY", b.key, member)
	call.window(call.options(opts, "Window"))
	return send(ctx, b.t, call, parseSlots)
}

// Rem removes members entirely (their totals and their counts in every slot): how
// many of them had a non-zero window total.
func (b *Leaderboard) Rem(ctx context.Context, members ...string) *Cmd[int64] {
	call := newCall("TSRANK.REM", b.key)
	if len(members) == 0 {
		call.fail(fmt.Errorf("tally: Rem needs at least one member"))
	}
	for _, m := range members {
		call.add(m)
	}
	return send(ctx, b.t, call, parseInt)
}

// BoardInfo is TSRANK.INFO's answer.
type BoardInfo struct {
	Window time.Duration
	Slot   time.Duration
	// Members is the number of members with a total.
	Members int64
	// Slots is the number of slots of the window that hold counts.
	Slots int64
	// Oldest is the oldest such slot's start (zero when none).
	Oldest time.Time
	// Capacity is the board's CAPACITY (0 for an exact board).
	Capacity int64
	// Error bounds how far an estimated total may be from the true one (0 while the
	// board is exact).
	Error int64
}

func parseBoardInfo(v interface{}) (BoardInfo, error) {
	var info BoardInfo
	m, err := mapping(v)
	if err != nil {
		return info, err
	}
	var ms int64
	var ok bool
	if ms, _, err = intField(m, "window"); err != nil {
		return info, err
	}
	info.Window = time.Duration(ms) * time.Millisecond
	if ms, _, err = intField(m, "slot"); err != nil {
		return info, err
	}
	info.Slot = time.Duration(ms) * time.Millisecond
	if info.Members, _, err = intField(m, "members"); err != nil {
		return info, err
	}
	if info.Slots, _, err = intField(m, "slots"); err != nil {
		return info, err
	}
	if ms, ok, err = intField(m, "oldest"); err != nil {
		return info, err
	} else if ok {
		info.Oldest = fromMillis(ms)
	}
	// capacity and error: 0 when the server does not report them (a module from
	// before CAPACITY). error is a bound: a fraction, if the server sends one, rounds up.
	if _, present := m["capacity"]; present {
		if info.Capacity, _, err = intField(m, "capacity"); err != nil {
			return info, err
		}
	}
	if v, present := m["error"]; present && v != nil {
		f, err := toFloat(v)
		if err != nil {
			return info, err
		}
		info.Error = int64(math.Ceil(f))
	}
	return info, nil
}

// Info is TSRANK.INFO; redis.Nil for a missing key.
func (b *Leaderboard) Info(ctx context.Context) *Cmd[BoardInfo] {
	return send(ctx, b.t, newCall("TSRANK.INFO", b.key), parseBoardInfo)
}
