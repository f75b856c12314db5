package tally_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	tally "github.com/tally-redis/tally/clients/go"
)

func i64(n int64) *int64 { return &n }

func TestLeaderboard(t *testing.T) {
	eachServer(t, func(t *testing.T, rdb *redis.Client, key func(string) string) {
		tl := tally.New(rdb)
		b := tl.Leaderboard(key("likes"))
		eq(t, val(t, b.Create(ctx, tally.BoardOptions{Window: 24 * time.Hour, Slot: time.Hour})), "OK")
		fails(t, b.Create(ctx, tally.BoardOptions{}).Err(), "ERR key already exists")
		// ts's slot is one of the latest two (a WINDOW of 2h); old's is three hours
		// before, in the 24h window but not in its latest 2h.
		ts := time.Now().Add(-10 * time.Minute)
		old := ts.Add(-3 * time.Hour)
		at := tally.At(ts)
		eq(t, val(t, b.IncrBy(ctx, []tally.Entry{{Member: "a", Score: 2}, {Member: "b", Score: 1}}, at)), []int64{2, 1})
		eq(t, val(t, b.Incr(ctx, "a", 5, at)), int64(7))
		eq(t, val(t, b.IncrBy(ctx, []tally.Entry{{Member: "c", Score: 7}, {Member: "d", Score: 5}}, at)), []int64{7, 5})
		eq(t, val(t, b.Incr(ctx, "e", 3, tally.At(old))), int64(3))
		fails(t, b.Incr(ctx, "b", -2, at).Err(), "ERR count would go below zero")

		all := []tally.Entry{{Member: "c", Score: 7}, {Member: "a", Score: 7}, {Member: "d", Score: 5}, {Member: "e", Score: 3}, {Member: "b", Score: 1}}
		eq(t, val(t, b.Top(ctx, 10)), all)
		eq(t, val(t, b.Top(ctx, 2, tally.Offset(1))), all[1:3])
		eq(t, val(t, b.Top(ctx, 10, tally.Window(2*time.Hour))), []tally.Entry{all[0], all[1], all[2], all[4]})
		eq(t, val(t, b.Score(ctx, "a")), int64(7))
		_, err := b.Score(ctx, "zz").Result()
		eq(t, err, redis.Nil)
		eq(t, val(t, b.Scores(ctx, "a", "zz", "d")), []*int64{i64(7), nil, i64(5)})
		eq(t, val(t, b.Rank(ctx, "a")), int64(1))
		eq(t, val(t, b.Rank(ctx, "a", tally.Ties())), int64(0))
		eq(t, val(t, b.Rank(ctx, "b", tally.Ties())), int64(4))
		_, err = b.Rank(ctx, "zz").Result()
		eq(t, err, redis.Nil)
		eq(t, val(t, b.Around(ctx, "d", 1)), all[1:4])
		eq(t, val(t, b.Around(ctx, "c", 1)), all[0:2])
		eq(t, val(t, b.Around(ctx, "zz", 1)), []tally.Entry{})
		eq(t, val(t, b.History(ctx, "a")), []tally.Slot{{Start: ts.Truncate(time.Hour), Count: 7}})
		eq(t, val(t, b.History(ctx, "e")), []tally.Slot{{Start: old.Truncate(time.Hour), Count: 3}})
		eq(t, val(t, b.History(ctx, "e", tally.Window(2*time.Hour))), []tally.Slot{})

		eq(t, val(t, b.Rem(ctx, "b", "zz")), int64(1))
		eq(t, val(t, b.Info(ctx)), tally.BoardInfo{
			Window: 24 * time.Hour, Slot: time.Hour, Members: 4, Slots: 2, Oldest: old.Truncate(time.Hour),
		})
		_, err = tl.Leaderboard(key("none")).Info(ctx).Result()
		eq(t, err, redis.Nil)
		eq(t, val(t, tl.Leaderboard(key("none")).Top(ctx, 3)), []tally.Entry{})
		fails(t, b.Rem(ctx).Err(), "tally: Rem needs at least one member")
		fails(t, b.Scores(ctx).Err(), "tally: Scores needs at least one member")
		fails(t, b.Rank(ctx, "a", tally.At(ts)).Err(), "tally: TSRANK.RANK takes no At option")
	})
}

// A board with CAPACITY k keeps at most k members a slot; while no slot has seen more,
// it is exact and its error is 0.
func TestLeaderboardCapacity(t *testing.T) {
	eachServer(t, func(t *testing.T, rdb *redis.Client, key func(string) string) {
		b := tally.New(rdb).Leaderboard(key("trending"))
		_, err := b.Create(ctx, tally.BoardOptions{Window: time.Hour, Slot: time.Minute, Capacity: 3}).Result()
		eq(t, err, nil)
		eq(t, val(t, b.IncrBy(ctx, []tally.Entry{{Member: "x", Score: 5}, {Member: "y", Score: 2}})), []int64{5, 2})
		eq(t, val(t, b.Top(ctx, 10)), []tally.Entry{{Member: "x", Score: 5}, {Member: "y", Score: 2}})
		info := val(t, b.Info(ctx))
		eq(t, []int64{info.Capacity, info.Error, info.Members}, []int64{3, 0, 2})
	})
}
