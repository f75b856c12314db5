package tally

import (
	"reflect"
	"testing"
	"time"
)

// Reply shapes the servers under test may not send yet: TSRANK.INFO with CAPACITY's
// fields, in RESP2 (a flat array) and RESP3 (a map).
func TestParseBoardInfoCapacity(t *testing.T) {
	want := BoardInfo{Window: time.Hour, Slot: time.Minute, Members: 7, Slots: 2,
		Oldest: time.UnixMilli(1795050000000), Capacity: 100, Error: 3}
	resp2 := []interface{}{"window", int64(3600000), "slot", int64(60000), "members", int64(7),
		"slots", int64(2), "oldest", int64(1795050000000), "capacity", int64(100), "error", int64(3)}
	resp3 := map[interface{}]interface{}{"window": int64(3600000), "slot": int64(60000), "members": int64(7),
		"slots": int64(2), "oldest": int64(1795050000000), "capacity": int64(100), "error": 2.5}
	for _, reply := range []interface{}{resp2, resp3} {
		got, err := parseBoardInfo(reply)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%v: got %+v, %v", reply, got, err)
		}
	}
	// An empty exact board of a module from before CAPACITY: no oldest, no capacity.
	got, err := parseBoardInfo([]interface{}{"window", int64(60000), "slot", int64(1000), "members", int64(0),
		"slots", int64(0), "oldest", nil})
	if err != nil || !reflect.DeepEqual(got, BoardInfo{Window: time.Minute, Slot: time.Second}) {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := parseBoardInfo([]interface{}{"window"}); err == nil {
		t.Fatal("an odd map parsed")
	}
}
