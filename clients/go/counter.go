package tally

import (
	"context"
	"fmt"
	"time"
)

// Counter is a multi-resolution counter (TSCOUNTER.*): one native hash at its key.
type Counter struct {
	t   *Tally
	key string
}

// Key is the counter's key.
func (c *Counter) Key() string { return c.key }

// Resolution is one resolution of a counter: slots of Span, the latest Samples kept.
type Resolution struct {
	Span    time.Duration
	Samples int64
}

// String is the resolution as TSCOUNTER.CREATE takes it: "<ms>:<samples>".
func (r Resolution) String() string {
	return fmt.Sprintf("%d:%d", r.Span/time.Millisecond, r.Samples)
}

// Create is TSCOUNTER.CREATE (its reply "OK") with the given resolutions (none: the server's default,
// tally.counter-resolutions). It fails with "ERR key already exists" if the key
// exists.
func (c *Counter) Create(ctx context.Context, resolutions ...Resolution) *Cmd[string] {
	call := newCall("TSCOUNTER.CREATE", c.key)
	if len(resolutions) > 0 {
		call.add("RESOLUTIONS")
		for _, r := range resolutions {
			if _, err := millis(r.Span); err != nil {
				call.fail(err)
			}
			call.add(r.String())
		}
	}
	return send(ctx, c.t, call, parseOK)
}

// Incr adds 1 (at the At option's time, default now): the new count of the finest slot
// that keeps that time. Options: At.
func (c *Counter) Incr(ctx context.Context, opts ...Option) *Cmd[int64] {
	call := newCall("TSCOUNTER.INCR", c.key)
	call.at(call.options(opts, "At"))
	return send(ctx, c.t, call, parseInt)
}

// IncrBy adds increment (negative to take back): the new count of the finest slot.
// Options: At.
func (c *Counter) IncrBy(ctx context.Context, increment int64, opts ...Option) *Cmd[int64] {
	call := newCall("TSCOUNTER.INCRBY", c.key, increment)
	call.at(call.options(opts, "At"))
	return send(ctx, c.t, call, parseInt)
}

// Sum is the number of events in each window ending now (or At), in order.
// Options: At.
func (c *Counter) Sum(ctx context.Context, windows []time.Duration, opts ...Option) *Cmd[[]int64] {
	call := newCall("TSCOUNTER.SUM", c.key)
	for _, w := range windows {
		call.duration(w)
	}
	call.at(call.options(opts, "At"))
	return send(ctx, c.t, call, parseInts)
}

// Range is the slots of one resolution, oldest first (TSCOUNTER.RANGE). Options:
// From, To, Empty (zeros listed too).
func (c *Counter) Range(ctx context.Context, resolution time.Duration, opts ...Option) *Cmd[[]Slot] {
	call := newCall("TSCOUNTER.RANGE", c.key).duration(resolution)
	o := call.options(opts, "From", "To", "Empty")
	if o.from != nil {
		call.add("FROM", unixMillis(*o.from))
	}
	if o.to != nil {
		call.add("TO", unixMillis(*o.to))
	}
	if o.empty {
		call.add("EMPTY")
	}
	return send(ctx, c.t, call, parseSlots)
}

// CounterInfo is TSCOUNTER.INFO's answer.
type CounterInfo struct {
	// Resolutions, finest first.
	Resolutions []Resolution
	// Slots is the number of stored non-zero slots over all resolutions.
	Slots int64
	// First and Last are the oldest and newest stored slot starts (zero when none).
	First, Last time.Time
	// Memory is the key's MEMORY USAGE in bytes.
	Memory int64
}

func parseCounterInfo(v interface{}) (CounterInfo, error) {
	var info CounterInfo
	m, err := mapping(v)
	if err != nil {
		return info, err
	}
	rows, err := pairsOfInts(m["resolutions"])
	if err != nil {
		return info, err
	}
	for _, row := range rows {
		info.Resolutions = append(info.Resolutions, Resolution{Span: time.Duration(row[0]) * time.Millisecond, Samples: row[1]})
	}
	if info.Slots, _, err = intField(m, "slots"); err != nil {
		return info, err
	}
	if info.Memory, _, err = intField(m, "memory"); err != nil {
		return info, err
	}
	for name, dst := range map[string]*time.Time{"first": &info.First, "last": &info.Last} {
		ms, ok, err := intField(m, name)
		if err != nil {
			return info, err
		}
		if ok {
			*dst = fromMillis(ms)
		}
	}
	return info, nil
}

func pairsOfInts(v interface{}) ([][2]int64, error) {
	items, err := toSlice(v)
	if err != nil {
		return nil, err
	}
	out := make([][2]int64, len(items))
	for i, item := range items {
		row, err := toSlice(item)
		if err != nil || len(row) != 2 {
			return nil, errShape
		}
		for j := range row {
			if out[i][j], err = toInt(row[j]); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Info is TSCOUNTER.INFO; redis.Nil for a missing key.
func (c *Counter) Info(ctx context.Context) *Cmd[CounterInfo] {
	return send(ctx, c.t, newCall("TSCOUNTER.INFO", c.key), parseCounterInfo)
}

// WindowLimit is one window of a limit: at most Max events in the latest Window.
type WindowLimit struct {
	Window time.Duration
	Max    int64
}

// WindowState is one window of a limit called with Details: its sum after the call,
// the room left (max(0, Max - Sum)) and the wait until its sum next falls (0 when the
// sum is 0).
type WindowState struct {
	Sum       int64
	Remaining int64
	Reset     time.Duration
}

// Never is the RetryAfter of a request that no wait lets through (its increment is
// more than some max, or its quantity more than a whole burst).
const Never time.Duration = -1

// Decision is TSCOUNTER.LIMIT's answer.
type Decision struct {
	// Allowed: the increment was applied.
	Allowed bool
	// RetryAfter is 0 when allowed; else the wait after which the same call would pass
	// if nothing else were written, or Never.
	RetryAfter time.Duration
	// Sums is each window's sum after the call, in the order given.
	Sums []int64
	// Windows is each window's state, with the Details option (else nil).
	Windows []WindowState
}

func retryAfter(ms int64) time.Duration {
	if ms < 0 {
		return Never
	}
	return time.Duration(ms) * time.Millisecond
}

func (c *call) windowLimits(windows []WindowLimit) {
	if len(windows) == 0 {
		c.fail(fmt.Errorf("tally: %s needs at least one window", c.args[0]))
	}
	for _, w := range windows {
		c.duration(w.Window).add(w.Max)
	}
}

// windowStates reads a limit's per-window element: the sums, and with details the
// states.
func windowStates(v interface{}, details bool) ([]int64, []WindowState, error) {
	if !details {
		sums, err := parseInts(v)
		return sums, nil, err
	}
	rows, err := toSlice(v)
	if err != nil {
		return nil, nil, err
	}
	sums := make([]int64, len(rows))
	states := make([]WindowState, len(rows))
	for i, row := range rows {
		cells, err := parseInts(row)
		if err != nil || len(cells) != 3 {
			return nil, nil, errShape
		}
		sums[i] = cells[0]
		states[i] = WindowState{Sum: cells[0], Remaining: cells[1], Reset: time.Duration(cells[2]) * time.Millisecond}
	}
	return sums, states, nil
}

func decisionHead(v interface{}) (allowed bool, retry time.Duration, rest interface{}, err error) {
	items, err := toSlice(v)
	if err != nil || len(items) != 3 {
		return false, 0, nil, errShape
	}
	a, err := toInt(items[0])
	if err != nil {
		return false, 0, nil, err
	}
	r, err := toInt(items[1])
	if err != nil {
		return false, 0, nil, err
	}
	return a == 1, retryAfter(r), items[2], nil
}

// Limit is TSCOUNTER.LIMIT: it applies increment only if every window's sum plus it
// stays within the window's max; otherwise it writes nothing. Options: At, Details.
func (c *Counter) Limit(ctx context.Context, increment int64, windows []WindowLimit, opts ...Option) *Cmd[Decision] {
	call := newCall("TSCOUNTER.LIMIT", c.key, increment)
	call.windowLimits(windows)
	o := call.options(opts, "At", "Details")
	call.at(o)
	if o.details {
		call.add("DETAILS")
	}
	return send(ctx, c.t, call, func(v interface{}) (Decision, error) {
		var d Decision
		var rest interface{}
		var err error
		if d.Allowed, d.RetryAfter, rest, err = decisionHead(v); err != nil {
			return d, err
		}
		d.Sums, d.Windows, err = windowStates(rest, o.details)
		return d, err
	})
}

// KeyLimit is one counter of an MLimit and its windows.
type KeyLimit struct {
	Key     string
	Windows []WindowLimit
}

// MultiDecision is TSCOUNTER.MLIMIT's answer: one decision for every key at once.
type MultiDecision struct {
	Allowed    bool
	RetryAfter time.Duration
	// Sums is, per key, its windows' sums after the call.
	Sums map[string][]int64
	// Windows is, per key, its windows' states with the Details option (else nil).
	Windows map[string][]WindowState
}

// MLimit is TSCOUNTER.MLIMIT: it applies increment to every counter only if every
// window of every counter allows it, else writes nothing anywhere (1 to 16 keys; in a
// cluster they share a hash slot, "{user:42}:ip", or the server answers CROSSSLOT).
// Options: At, Details.
func (t *Tally) MLimit(ctx context.Context, increment int64, limits []KeyLimit, opts ...Option) *Cmd[MultiDecision] {
	call := newCall("TSCOUNTER.MLIMIT", len(limits))
	call.keyPos = 2
	for _, l := range limits {
		call.add(l.Key)
	}
	call.add(increment)
	for _, l := range limits {
		call.add(len(l.Windows))
		call.windowLimits(l.Windows)
	}
	if len(limits) == 0 {
		call.fail(fmt.Errorf("tally: MLimit needs at least one key"))
	}
	o := call.options(opts, "At", "Details")
	call.at(o)
	if o.details {
		call.add("DETAILS")
	}
	return send(ctx, t, call, func(v interface{}) (MultiDecision, error) {
		var d MultiDecision
		var rest interface{}
		var err error
		if d.Allowed, d.RetryAfter, rest, err = decisionHead(v); err != nil {
			return d, err
		}
		perKey, err := toSlice(rest)
		if err != nil || len(perKey) != len(limits) {
			return d, errShape
		}
		d.Sums = make(map[string][]int64, len(limits))
		if o.details {
			d.Windows = make(map[string][]WindowState, len(limits))
		}
		for i, l := range limits {
			sums, states, err := windowStates(perKey[i], o.details)
			if err != nil {
				return d, err
			}
			d.Sums[l.Key] = sums
			if o.details {
				d.Windows[l.Key] = states
			}
		}
		return d, nil
	})
}

// MSum is TSCOUNTER.MSUM: each window ending now (or At) summed over the counters keys
// (1 to 1000; a missing key counts 0), in window order. In a cluster the keys share a
// hash slot. Options: At.
func (t *Tally) MSum(ctx context.Context, keys []string, windows []time.Duration, opts ...Option) *Cmd[[]int64] {
	call := newCall("TSCOUNTER.MSUM", len(keys))
	call.keyPos = 2
	for _, k := range keys {
		call.add(k)
	}
	for _, w := range windows {
		call.duration(w)
	}
	call.at(call.options(opts, "At"))
	return send(ctx, t, call, parseInts)
}
