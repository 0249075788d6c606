package sweep_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/sweep"
)

// fakeStore serves pages of due work and records what the sweeper asked.
type fakeStore struct {
	now   time.Time
	pages [][]domain.SweepDue
	err   error // returned by SweepTimeOut
	down  bool  // err means Redis is down
	asked []string
}

func (f *fakeStore) Now() time.Time { return f.now }

func (f *fakeStore) SweepPage(_ context.Context, cursor uint64, _ time.Time, _ int) ([]domain.SweepDue, uint64, error) {
	next := cursor + 1
	if int(next) >= len(f.pages) {
		next = 0
	}
	return f.pages[cursor], next, nil
}

func (f *fakeStore) SweepTimeOut(_ context.Context, d domain.SweepDue) (int64, int64, error) {
	f.asked = append(f.asked, "timeout "+d.Tenant)
	return 1, 2, f.err
}

func (f *fakeStore) SweepExpireQueued(_ context.Context, d domain.SweepDue) (int64, error) {
	f.asked = append(f.asked, "expire "+d.Tenant)
	return 3, nil
}

func (f *fakeStore) SweepClean(_ context.Context, d domain.SweepDue, _ time.Time, batch int) (int64, bool, error) {
	f.asked = append(f.asked, "clean "+d.Tenant)
	return 4, len(d.Retention) >= batch, nil
}

func (f *fakeStore) IsDown(error) bool { return f.down }

func due(tenant string, at time.Time, n int) domain.SweepDue {
	d := domain.SweepDue{Tenant: tenant}
	for range n {
		d.Retention = append(d.Retention, domain.SweepEntry{Due: float64(at.UnixMilli())})
	}
	return d
}

// TestTickCountsLagAndWarnsOfFullBatches: every page is swept, the counters
// add up, the lag is the oldest due entry's, and a full batch is warned of.
func TestTickCountsLagAndWarnsOfFullBatches(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	f := &fakeStore{now: now, pages: [][]domain.SweepDue{{due("acme", now.Add(-time.Minute), 1)}, {due("globex", now.Add(-time.Second), 2)}}}
	var logs bytes.Buffer
	w := sweep.New(f, sweep.Options{Batch: 2, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := w.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Runs != 1 || st.Expired != 2*(1+3) || st.Failed != 2*2 || st.Cleaned != 2*4 || st.LastLag != time.Minute {
		t.Fatalf("stats %+v", st)
	}
	if want := "timeout acme,expire acme,clean acme,timeout globex,expire globex,clean globex"; strings.Join(f.asked, ",") != want {
		t.Fatalf("asked %v, want %s", f.asked, want)
	}
	if !strings.Contains(logs.String(), "full batch due") || !strings.Contains(logs.String(), "tenant=globex") {
		t.Fatalf("no warning of globex's full batch: %s", logs.String())
	}
}

// TestTickStopsWhenRedisIsDown: once an error says Redis is down, nothing
// more is asked of it in this tick, and the tick counts as failed.
func TestTickStopsWhenRedisIsDown(t *testing.T) {
	now := time.Now()
	f := &fakeStore{now: now, err: errors.New("connection refused"), down: true,
		pages: [][]domain.SweepDue{{due("acme", now, 1), due("globex", now, 1)}, {due("initech", now, 1)}}}
	w := sweep.New(f, sweep.Options{Log: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))})
	if err := w.Tick(context.Background()); err == nil {
		t.Fatal("no error")
	}
	if len(f.asked) != 1 || f.asked[0] != "timeout acme" {
		t.Fatalf("asked %v after Redis went down", f.asked)
	}
	if st := w.Stats(); st.Errors != 1 || st.LastError != "connection refused" {
		t.Fatalf("stats %+v", st)
	}
}
