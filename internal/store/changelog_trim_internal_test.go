package store

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestChangeLogTrimPastLastSequence trims a change log by length, which
// marks (meta field cm) the end of a millisecond, "<ms>-18446744073709551615",
// over a mark of the same millisecond: the two must be compared exactly on
// every backend (the embedded store's Lua makes nil of that sequence, and the
// comparison failed there with "attempt to compare number with nil"; Redis's
// makes one float of both), and the mark only moves forward.
func TestChangeLogTrimPastLastSequence(t *testing.T) {
	ctx := context.Background()
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			s, err := New(rdb, Options{Prefix: testenv.Isolate(t), OpTimeout: 5 * time.Second, ChangeLogEntries: 2})
			if err != nil {
				t.Fatal(err)
			}
			tag := "{acme}"
			meta, log := s.k.meta(tag), s.k.changeLog(tag)
			now := time.Now()
			ms := now.UnixMilli()
			add := func(id string) {
				t.Helper()
				if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: log, ID: id, Values: []any{"i", "x"}}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			id := func(m int64, seq int) string { return strconv.FormatInt(m, 10) + "-" + strconv.Itoa(seq) }
			for i := range 3 { // trimmed to 2, the mark ends millisecond ms
				add(id(ms+int64(i), 0))
			}
			end := strconv.FormatInt(ms, 10) + "-18446744073709551615"
			// a mark just before it, in the same millisecond: exact comparison
			// moves it on (as numbers the two sequences are one float)
			if err := rdb.HSet(ctx, meta, "cm", strconv.FormatInt(ms, 10)+"-18446744073709551614").Err(); err != nil {
				t.Fatal(err)
			}
			if err := s.trimChangeLogs(ctx, []string{tag}, now); err != nil {
				t.Fatalf("trim: %v", err)
			}
			if got, err := rdb.HGet(ctx, meta, "cm").Result(); err != nil || got != end {
				t.Fatalf("cm after the trim: %q %v, want %q", got, err, end)
			}
			// a later mark stays where it is
			later := id(ms+9, 0)
			if err := rdb.HSet(ctx, meta, "cm", later).Err(); err != nil {
				t.Fatal(err)
			}
			add(id(ms+3, 0))
			if err := s.trimChangeLogs(ctx, []string{tag}, now); err != nil {
				t.Fatalf("second trim: %v", err)
			}
			if got, err := rdb.HGet(ctx, meta, "cm").Result(); err != nil || got != later {
				t.Fatalf("cm after the second trim: %q %v, want %q (it only moves forward)", got, err, later)
			}
		})
	}
}
