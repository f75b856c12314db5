// Package tally gives typed handles for the commands of tally, a Redis module for
// time-windowed counting, over a go-redis v9 client.
//
// A Tally wraps anything that processes go-redis commands: a *redis.Client, a
// *redis.ClusterClient, a *redis.Ring (any redis.UniversalClient) or a
// redis.Pipeliner. Its handles (Counter, Leaderboard, Stats, Throttle) cost no round
// trip to make; each method sends one command and returns a typed *Cmd whose Result
// is read after the command ran (at once on a client, after Exec in a pipeline):
//
//	t := tally.New(rdb)
//	n, err := t.Counter("hits").Incr(ctx).Result()
//
//	pipe := rdb.Pipeline()
//	a := tally.New(pipe).Counter("hits").Incr(ctx)
//	b := tally.New(pipe).Counter("hits").Sum(ctx, []time.Duration{time.Minute})
//	_, err = pipe.Exec(ctx)
//	n, sums := a.Val(), b.Val()
//
// Durations are time.Duration (sent as whole milliseconds), times are time.Time
// (sent as Unix milliseconds). A nil reply (a missing member's score, INFO of a
// missing key, an empty window's statistics) is redis.Nil, as go-redis answers GET
// of a missing key. Server errors are returned as go-redis returns them: their
// Error() is the server's text.
package tally

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Processor runs go-redis commands: *redis.Client, *redis.ClusterClient, *redis.Ring,
// redis.UniversalClient and redis.Pipeliner all are.
type Processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Tally is the entry point: New(rdb), then Counter, Leaderboard, Stats, Throttle and
// the multi-key commands.
type Tally struct {
	rdb Processor
}

// New returns a Tally that sends its commands through rdb.
func New(rdb Processor) *Tally {
	return &Tally{rdb: rdb}
}

// Counter is the multi-resolution counter at key (TSCOUNTER.*).
func (t *Tally) Counter(key string) *Counter { return &Counter{t: t, key: key} }

// Leaderboard is the sliding-window leaderboard at key (TSRANK.*).
func (t *Tally) Leaderboard(key string) *Leaderboard { return &Leaderboard{t: t, key: key} }

// Stats is the windowed statistics object at key (STATS.*).
func (t *Tally) Stats(key string) *Stats { return &Stats{t: t, key: key} }

// Throttle is the limited subject at key (TSTHROTTLE.*).
func (t *Tally) Throttle(key string) *Throttle { return &Throttle{t: t, key: key} }

// Cmd is one tally command and its typed reply. Result, Val and Err read it once the
// command has run.
type Cmd[T any] struct {
	cmd   *redis.Cmd
	parse func(interface{}) (T, error)
}

// Result is the parsed reply, or the error: the server's (its text as the server
// wrote it), redis.Nil for a nil reply, or a client-side error.
func (c *Cmd[T]) Result() (T, error) {
	var zero T
	v, err := c.cmd.Result()
	if err != nil {
		return zero, err
	}
	out, err := c.parse(v)
	if err != nil {
		return zero, fmt.Errorf("tally: %s: unexpected reply %v: %w", c.cmd.Name(), v, err)
	}
	return out, nil
}

// Val is Result's value (the zero value on an error).
func (c *Cmd[T]) Val() T {
	v, _ := c.Result()
	return v
}

// Err is Result's error.
func (c *Cmd[T]) Err() error {
	_, err := c.Result()
	return err
}

// Cmd is the underlying go-redis command (its Args, its raw reply).
func (c *Cmd[T]) Cmd() *redis.Cmd { return c.cmd }

func (c *Cmd[T]) String() string { return c.cmd.String() }

// ----------------------------------------------------------------- options ----

// Option is an optional argument of a command: At, Window, Details, Offset, From, To,
// Empty, Ties, Quantity, Report. A method given an option its command does not take
// answers an error without sending anything.
type Option struct {
	name  string
	apply func(*options)
}

type options struct {
	at       *time.Time
	window   *time.Duration
	details  bool
	offset   *int64
	from     *time.Time
	to       *time.Time
	empty    bool
	ties     bool
	quantity *int64
	report   *Report
}

// At sets the event (or query) time, sent as Unix milliseconds (AT ts); without it
// the server's clock decides.
func At(t time.Time) Option {
	return Option{"At", func(o *options) { o.at = &t }}
}

// Window reads the latest d (WINDOW dur) instead of the default window or period.
func Window(d time.Duration) Option {
	return Option{"Window", func(o *options) { o.window = &d }}
}

// Details makes a limit answer each window's state (DETAILS).
func Details() Option {
	return Option{"Details", func(o *options) { o.details = true }}
}

// Offset skips the first n members of TOP (OFFSET n).
func Offset(n int64) Option {
	return Option{"Offset", func(o *options) { o.offset = &n }}
}

// From starts a RANGE at t (FROM ts).
func From(t time.Time) Option {
	return Option{"From", func(o *options) { o.from = &t }}
}

// To ends a RANGE at t (TO ts).
func To(t time.Time) Option {
	return Option{"To", func(o *options) { o.to = &t }}
}

// Empty makes a counter's RANGE list empty slots too (EMPTY).
func Empty() Option {
	return Option{"Empty", func(o *options) { o.empty = true }}
}

// Ties makes RANK answer the competition rank (TIES): members with equal totals share
// a rank.
func Ties() Option {
	return Option{"Ties", func(o *options) { o.ties = true }}
}

// Quantity is how much a throttled request weighs (QUANTITY q, default 1; 0 only
// checks and never writes).
func Quantity(q int64) Option {
	return Option{"Quantity", func(o *options) { o.quantity = &q }}
}

// Report is STATS.ADD's REPORT: after adding, Member's score in the sorted set Key
// becomes a statistic of the period the values went to, and Key keeps its Keep
// highest members (0: the server's default, 100). By is "mean" (the default when
// empty), "max", "count", "sum", "p50", "p90" or "p99".
type Report struct {
	Key    string
	Member string
	Keep   int64
	By     string
}

// WithReport adds a REPORT to STATS.ADD.
func WithReport(r Report) Option {
	return Option{"WithReport", func(o *options) { o.report = &r }}
}

// ------------------------------------------------------------------ sending ----

// call builds a command; a non-nil argErr fails it without sending.
type call struct {
	args   []interface{}
	keyPos int8
	err    error
}

func newCall(name string, args ...interface{}) *call {
	return &call{args: append([]interface{}{name}, args...), keyPos: 1}
}

func (c *call) add(args ...interface{}) *call {
	c.args = append(c.args, args...)
	return c
}

func (c *call) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// duration adds d as whole milliseconds.
func (c *call) duration(d time.Duration) *call {
	ms, err := millis(d)
	c.fail(err)
	return c.add(ms)
}

// options applies opts, failing the call for one that the command does not take.
func (c *call) options(opts []Option, allowed ...string) options {
	var o options
	for _, opt := range opts {
		ok := false
		for _, name := range allowed {
			ok = ok || opt.name == name
		}
		if !ok || opt.apply == nil {
			c.fail(fmt.Errorf("tally: %s takes no %s option", c.args[0], opt.name))
			continue
		}
		opt.apply(&o)
	}
	return o
}

func (c *call) at(o options) *call {
	if o.at != nil {
		c.add("AT", unixMillis(*o.at))
	}
	return c
}

func (c *call) window(o options) *call {
	if o.window != nil {
		c.add("WINDOW").duration(*o.window)
	}
	return c
}

func send[T any](ctx context.Context, t *Tally, c *call, parse func(interface{}) (T, error)) *Cmd[T] {
	cmd := redis.NewCmd(ctx, c.args...)
	cmd.SetFirstKeyPos(c.keyPos)
	out := &Cmd[T]{cmd: cmd, parse: parse}
	if c.err != nil {
		cmd.SetErr(c.err)
		return out
	}
	_ = t.rdb.Process(ctx, cmd)
	return out
}

// millis is d in whole milliseconds, as tally takes durations.
func millis(d time.Duration) (int64, error) {
	if d <= 0 || d%time.Millisecond != 0 {
		return 0, fmt.Errorf("tally: duration %v is not a positive whole number of milliseconds", d)
	}
	return int64(d / time.Millisecond), nil
}

func unixMillis(t time.Time) int64 { return t.UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms) }

// ----------------------------------------------------------------- replies ----

var errShape = errors.New("not the shape tally answers")

func toInt(v interface{}) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, errShape
}

func toFloat(v interface{}) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int64:
		return float64(x), nil
	case string:
		return strconv.ParseFloat(x, 64)
	}
	return 0, errShape
}

func toString(v interface{}) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	}
	return "", errShape
}

func toSlice(v interface{}) ([]interface{}, error) {
	if x, ok := v.([]interface{}); ok {
		return x, nil
	}
	return nil, errShape
}

func parseOK(v interface{}) (string, error) {
	if s, ok := v.(string); ok && s == "OK" {
		return s, nil
	}
	return "", errShape
}

func parseInt(v interface{}) (int64, error) { return toInt(v) }

func parseBool(v interface{}) (bool, error) {
	n, err := toInt(v)
	return n == 1, err
}

func parseInts(v interface{}) ([]int64, error) {
	if n, err := toInt(v); err == nil {
		return []int64{n}, nil
	}
	items, err := toSlice(v)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(items))
	for i, item := range items {
		if out[i], err = toInt(item); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func parseFloats(v interface{}) ([]float64, error) {
	items, err := toSlice(v)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(items))
	for i, item := range items {
		if out[i], err = toFloat(item); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pairs reads [a, b] pairs, nested (RESP3) or flat (RESP2).
func pairs(v interface{}) ([][2]interface{}, error) {
	items, err := toSlice(v)
	if err != nil {
		return nil, err
	}
	if len(items) > 0 {
		if _, nested := items[0].([]interface{}); nested {
			out := make([][2]interface{}, len(items))
			for i, item := range items {
				pair, err := toSlice(item)
				if err != nil || len(pair) != 2 {
					return nil, errShape
				}
				out[i] = [2]interface{}{pair[0], pair[1]}
			}
			return out, nil
		}
	}
	if len(items)%2 != 0 {
		return nil, errShape
	}
	out := make([][2]interface{}, len(items)/2)
	for i := range out {
		out[i] = [2]interface{}{items[2*i], items[2*i+1]}
	}
	return out, nil
}

// mapping reads a map: a RESP3 map or a RESP2 flat field/value array.
func mapping(v interface{}) (map[string]interface{}, error) {
	out := map[string]interface{}{}
	if m, ok := v.(map[interface{}]interface{}); ok {
		for k, val := range m {
			name, err := toString(k)
			if err != nil {
				return nil, err
			}
			out[name] = val
		}
		return out, nil
	}
	items, err := toSlice(v)
	if err != nil || len(items)%2 != 0 {
		return nil, errShape
	}
	for i := 0; i < len(items); i += 2 {
		name, err := toString(items[i])
		if err != nil {
			return nil, err
		}
		out[name] = items[i+1]
	}
	return out, nil
}

// field reads an integer field of a map; a nil field is absent (ok false).
func intField(m map[string]interface{}, name string) (n int64, ok bool, err error) {
	v, present := m[name]
	if !present {
		return 0, false, fmt.Errorf("no field %q", name)
	}
	if v == nil {
		return 0, false, nil
	}
	n, err = toInt(v)
	return n, err == nil, err
}

// slots reads [slot_start, count] rows.
func parseSlots(v interface{}) ([]Slot, error) {
	items, err := toSlice(v)
	if err != nil {
		return nil, err
	}
	out := make([]Slot, len(items))
	for i, item := range items {
		row, err := toSlice(item)
		if err != nil || len(row) != 2 {
			return nil, errShape
		}
		start, err := toInt(row[0])
		if err != nil {
			return nil, err
		}
		count, err := toInt(row[1])
		if err != nil {
			return nil, err
		}
		out[i] = Slot{Start: fromMillis(start), Count: count}
	}
	return out, nil
}

// Slot is one time slot of a counter's resolution or of a leaderboard: its start and
// its count.
type Slot struct {
	Start time.Time
	Count int64
}
