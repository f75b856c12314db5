package tally

import (
	"context"
	"fmt"
	"time"
)

// Stats is a windowed statistics object (STATS.*): one native hash at its key.
type Stats struct {
	t   *Tally
	key string
}

// Key is the object's key.
func (s *Stats) Key() string { return s.key }

// StatsOptions are STATS.CREATE's settings; a zero field is the server's default.
type StatsOptions struct {
	// Period is the span of one period (default tally.stats-period, 1h).
	Period time.Duration
	// Keep is the number of periods kept, the current one included (default
	// tally.stats-keep, 24; at most 2000).
	Keep int64
}

// Create is STATS.CREATE (its reply "OK"); "ERR key already exists" if it exists.
func (s *Stats) Create(ctx context.Context, o StatsOptions) *Cmd[string] {
	call := newCall("STATS.CREATE", s.key)
	if o.Period != 0 {
		call.add("PERIOD").duration(o.Period)
	}
	if o.Keep != 0 {
		call.add("KEEP", o.Keep)
	}
	return send(ctx, s.t, call, parseOK)
}

// Summary is the statistics of a window (STATS.GET, STATS.MGET) or of one period
// (STATS.RANGE). Count, Min and Max are exact; Stddev is the sample standard
// deviation (0 for one value); P50, P90 and P99 come from the sketch (within 1%).
type Summary struct {
	Count  int64
	Sum    float64
	Min    float64
	Max    float64
	Mean   float64
	Stddev float64
	P50    float64
	P90    float64
	P99    float64
}

func summaryOf(m map[string]interface{}) (Summary, error) {
	var out Summary
	var err error
	if out.Count, _, err = intField(m, "count"); err != nil {
		return out, err
	}
	for name, dst := range map[string]*float64{
		"sum": &out.Sum, "min": &out.Min, "max": &out.Max, "mean": &out.Mean,
		"stddev": &out.Stddev, "p50": &out.P50, "p90": &out.P90, "p99": &out.P99,
	} {
		if *dst, err = toFloat(m[name]); err != nil {
			return out, fmt.Errorf("field %q: %w", name, err)
		}
	}
	return out, nil
}

func parseSummary(v interface{}) (Summary, error) {
	m, err := mapping(v)
	if err != nil {
		return Summary{}, err
	}
	return summaryOf(m)
}

// Add adds values to the period of now (or At): the period's count of values.
// Options: At, WithReport (rank the period's mean, or its Report.By statistic, in a
// sorted set: "slowest pages").
func (s *Stats) Add(ctx context.Context, values []float64, opts ...Option) *Cmd[int64] {
	call := newCall("STATS.ADD", s.key)
	if len(values) == 0 {
		call.fail(fmt.Errorf("tally: Add needs at least one value"))
	}
	for _, v := range values {
		call.add(v)
	}
	o := call.options(opts, "At", "WithReport")
	call.at(o)
	if r := o.report; r != nil {
		call.add("REPORT", r.Key, r.Member)
		if r.Keep != 0 {
			call.add("KEEP", r.Keep)
		}
		if r.By != "" {
			call.add("BY", r.By)
		}
	}
	return send(ctx, s.t, call, parseInt)
}

// Get is the current period's summary, or the latest Window's; redis.Nil when the
// window is empty or the key missing. Options: Window.
func (s *Stats) Get(ctx context.Context, opts ...Option) *Cmd[Summary] {
	call := newCall("STATS.GET", s.key)
	call.window(call.options(opts, "Window"))
	return send(ctx, s.t, call, parseSummary)
}

// Quantile is each quantile q (0 to 1) of the window's values, within 1% relative
// error; redis.Nil for an empty window. Options: Window.
func (s *Stats) Quantile(ctx context.Context, qs []float64, opts ...Option) *Cmd[[]float64] {
	call := newCall("STATS.QUANTILE", s.key)
	for _, q := range qs {
		call.add(q)
	}
	call.window(call.options(opts, "Window"))
	return send(ctx, s.t, call, parseFloats)
}

// CDF is, for each value, the share (0 to 1) of the window's values at or below it
// (an SLO: "at most 200 ms"), within 1% of the value; redis.Nil for an empty window.
// Options: Window.
func (s *Stats) CDF(ctx context.Context, values []float64, opts ...Option) *Cmd[[]float64] {
	call := newCall("STATS.CDF", s.key)
	for _, v := range values {
		call.add(v)
	}
	call.window(call.options(opts, "Window"))
	return send(ctx, s.t, call, parseFloats)
}

// Period is one stored period of a statistics object and its summary.
type Period struct {
	Start time.Time
	Summary
}

// Range is every stored period, oldest first (STATS.RANGE). Options: From, To.
func (s *Stats) Range(ctx context.Context, opts ...Option) *Cmd[[]Period] {
	call := newCall("STATS.RANGE", s.key)
	o := call.options(opts, "From", "To")
	if o.from != nil {
		call.add("FROM", unixMillis(*o.from))
	}
	if o.to != nil {
		call.add("TO", unixMillis(*o.to))
	}
	return send(ctx, s.t, call, func(v interface{}) ([]Period, error) {
		rows, err := toSlice(v)
		if err != nil {
			return nil, err
		}
		out := make([]Period, len(rows))
		for i, row := range rows {
			cells, err := toSlice(row)
			if err != nil || len(cells) != 2 {
				return nil, errShape
			}
			start, err := toInt(cells[0])
			if err != nil {
				return nil, err
			}
			summary, err := parseSummary(cells[1])
			if err != nil {
				return nil, err
			}
			out[i] = Period{Start: fromMillis(start), Summary: summary}
		}
		return out, nil
	})
}

// StatsInfo is STATS.INFO's answer.
type StatsInfo struct {
	Period time.Duration
	Keep   int64
	// Periods is the number of stored periods.
	Periods int64
	// Memory is the key's MEMORY USAGE in bytes.
	Memory int64
}

// Info is STATS.INFO; redis.Nil for a missing key.
func (s *Stats) Info(ctx context.Context) *Cmd[StatsInfo] {
	return send(ctx, s.t, newCall("STATS.INFO", s.key), func(v interface{}) (StatsInfo, error) {
		var info StatsInfo
		m, err := mapping(v)
		if err != nil {
			return info, err
		}
		var ms int64
		if ms, _, err = intField(m, "period"); err != nil {
			return info, err
		}
		info.Period = time.Duration(ms) * time.Millisecond
		if info.Keep, _, err = intField(m, "keep"); err != nil {
			return info, err
		}
		if info.Periods, _, err = intField(m, "periods"); err != nil {
			return info, err
		}
		info.Memory, _, err = intField(m, "memory")
		return info, err
	})
}

// MGet is STATS.MGET: the summary of the values of every object's current period (or
// latest Window) as if they were one object; redis.Nil when all are empty. In a
// cluster the keys share a hash slot. Options: Window.
func (t *Tally) MGet(ctx context.Context, keys []string, opts ...Option) *Cmd[Summary] {
	call := newCall("STATS.MGET", len(keys))
	call.keyPos = 2
	for _, k := range keys {
		call.add(k)
	}
	call.window(call.options(opts, "Window"))
	return send(ctx, t, call, parseSummary)
}

// MQuantile is STATS.MQUANTILE: quantiles of the values of every object's window;
// redis.Nil when all are empty. Options: Window.
func (t *Tally) MQuantile(ctx context.Context, keys []string, qs []float64, opts ...Option) *Cmd[[]float64] {
	call := newCall("STATS.MQUANTILE", len(keys))
	call.keyPos = 2
	for _, k := range keys {
		call.add(k)
	}
	for _, q := range qs {
		call.add(q)
	}
	call.window(call.options(opts, "Window"))
	return send(ctx, t, call, parseFloats)
}
