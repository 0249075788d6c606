package httpapi_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/app"
	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestLongPollRereadsAfterAFailedRead: the read the hub makes after a
// change's announcement can fail (Redis slow or away for a moment). The long
// poll must then read again soon, not hold until its time is up: the history
// test (internal/histories) saw long polls answered only at their 5 s timer,
// a change acknowledged 0.1 s after they began, on serves that a fault had
// just touched.
func TestLongPollRereadsAfterAFailedRead(t *testing.T) {
	be := testenv.Backends()[1] // the real redis-server
	p := newReplicaPair(t, be, func(o *app.Options) { o.WaitsVia = func(w httpapi.Waits) httpapi.Waits { return lossyWaits{w} } }, nil)
	id, _ := p.create(t)
	later(t, 300*time.Millisecond, func() { p.transition(t, id, "processing", "") })
	start := time.Now()
	r := do(t, "GET", p.urlA+"/v1/requests/"+id, "", 15*time.Second,
		"Authorization", "Bearer "+p.key, "Prefer", "wait=10", "If-None-Match", `"1"`)
	took := time.Since(start)
	if r.code != 200 || r.request(t).Version != 2 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	if took > 5*time.Second {
		t.Fatalf("the long poll answered the change after %s (its wait was 10 s): the failed re-read was left to the timer", took)
	}
	t.Logf("answered %s after it began", took.Round(time.Millisecond))
}

// lossyWaits fails the first read after each watch's first announcement, as
// the hub's read does when Redis does not answer in time.
type lossyWaits struct{ httpapi.Waits }

func (l lossyWaits) Watch(ctx context.Context, tenant, id string) (domain.Watch, error) {
	wa, err := l.Waits.Watch(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	lw := &lossyWatch{Watch: wa, c: make(chan domain.Snapshot, 1), done: make(chan struct{})}
	go func() {
		failed := false
		for {
			select {
			case snap := <-wa.Changes():
				if !failed {
					failed = true
					snap = domain.Snapshot{Seq: snap.Seq, Err: &domain.Error{Code: domain.BackendUnavailable,
						Message: "The status store is unavailable; retry later.", Err: errors.New("read timed out (test)")}}
				}
				select { // keep only the newest, as the hub does
				case <-lw.c:
				default:
				}
				lw.c <- snap
			case <-lw.done:
				return
			}
		}
	}()
	return lw, nil
}

type lossyWatch struct {
	domain.Watch
	c    chan domain.Snapshot
	done chan struct{}
	once sync.Once
}

func (w *lossyWatch) Changes() <-chan domain.Snapshot { return w.c }

func (w *lossyWatch) Close() {
	w.once.Do(func() { close(w.done) })
	w.Watch.Close()
}
