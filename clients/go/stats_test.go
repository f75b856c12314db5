package tally_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	tally "github.com/tally-redis/tally/clients/go"
)

func TestStats(t *testing.T) {
	eachServer(t, func(t *testing.T, rdb *redis.Client, key func(string) string) {
		tl := tally.New(rdb)
		s := tl.Stats(key("lat:/checkout"))
		slowest := key("slowest")
		eq(t, val(t, s.Create(ctx, tally.StatsOptions{Period: time.Hour, Keep: 24})), "OK")
		fails(t, s.Create(ctx, tally.StatsOptions{}).Err(), "ERR key already exists")
		// Values go to the period of now; reads over the latest two periods hold them
		// whenever the hour turns.
		ts := time.Now()
		two := tally.Window(2 * time.Hour)
		eq(t, val(t, s.Add(ctx, []float64{12, 8, 232}, tally.At(ts), tally.WithReport(tally.Report{Key: slowest, Member: "/checkout"}))), int64(3))
		want := tally.Summary{Count: 3, Sum: 252, Min: 8, Max: 232, Mean: 84,
			Stddev: 128.18736287169654, P50: 12.000306355122408, P90: 232, P99: 232}
		eq(t, val(t, s.Get(ctx, two)), want)
		eq(t, rdb.ZScore(ctx, slowest, "/checkout").Val(), 84.0)
		eq(t, val(t, s.Quantile(ctx, []float64{0, 0.5, 1}, two)), []float64{8, 12.000306355122408, 232})
		eq(t, val(t, s.CDF(ctx, []float64{1, 9, 232}, two)), []float64{0, 1.0 / 3, 1})
		hour := ts.Truncate(time.Hour)
		eq(t, val(t, s.Range(ctx, tally.From(hour), tally.To(hour))), []tally.Period{{Start: hour, Summary: want}})
		eq(t, val(t, s.Range(ctx, tally.From(hour.Add(time.Hour)))), []tally.Period{})
		info := val(t, s.Info(ctx))
		if info.Memory <= 0 {
			t.Fatalf("memory %d", info.Memory)
		}
		info.Memory = 0
		eq(t, info, tally.StatsInfo{Period: time.Hour, Keep: 24, Periods: 1})

		// REPORT by another statistic, and a second object merged with the first.
		s2 := tl.Stats(key("lat:/home"))
		eq(t, val(t, s2.Add(ctx, []float64{500}, tally.At(ts), tally.WithReport(tally.Report{Key: slowest, Member: "/home", Keep: 10, By: "max"}))), int64(1))
		eq(t, rdb.ZRevRangeWithScores(ctx, slowest, 0, -1).Val(), []redis.Z{{Score: 500, Member: "/home"}, {Score: 84, Member: "/checkout"}})
		fails(t, s2.Add(ctx, []float64{1}, tally.WithReport(tally.Report{Key: slowest, Member: "/home", By: "median"})).Err(), "ERR syntax error")
		merged := val(t, tl.MGet(ctx, []string{s.Key(), s2.Key(), key("none")}, two))
		eq(t, []float64{float64(merged.Count), merged.Sum, merged.Min, merged.Max, merged.Mean}, []float64{4, 752, 8, 500, 188})
		eq(t, val(t, tl.MQuantile(ctx, []string{s.Key(), s2.Key()}, []float64{0, 1}, two)), []float64{8, 500})

		// Nil replies: a missing key, an empty window.
		none := tl.Stats(key("none"))
		for _, err := range []error{
			none.Get(ctx).Err(), none.Quantile(ctx, []float64{0.5}).Err(), none.CDF(ctx, []float64{1}).Err(),
			none.Info(ctx).Err(), tl.MGet(ctx, []string{key("none")}).Err(),
			tl.MQuantile(ctx, []string{key("none")}, []float64{0.5}).Err(),
		} {
			eq(t, err, redis.Nil)
		}
		fails(t, s.Add(ctx, nil).Err(), "tally: Add needs at least one value")
	})
}
