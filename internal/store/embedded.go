package store

import (
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/memconn"
)

// Embedded is the in-process store used when no Redis is configured: a miniredis
// reached through in-memory pipes, each buffered like a socket
// (internal/memconn), so that pipelines and subscriptions work on it exactly
// as on Redis. miniredis never expires keys by itself, so a
// ticker moves its clock on with the wall clock; correctness never depends on it,
// because every record also carries its expires_at and the scripts check it.
type Embedded struct {
	M      *miniredis.Miniredis
	Client redis.UniversalClient
	stop   chan struct{}
	done   chan struct{}
}

// NewEmbedded starts an embedded store.
func NewEmbedded() (*Embedded, error) {
	// No TCP listener: the client dials in-memory pipes.
	m := miniredis.NewMiniRedis()
	c := redis.NewClient(&redis.Options{
		Dialer:          memconn.Dialer(m.Dial),
		DisableIdentity: true,
		Protocol:        2,
	})
	e := &Embedded{M: m, Client: c, stop: make(chan struct{}), done: make(chan struct{})}
	go e.tick()
	return e, nil
}

func (e *Embedded) tick() {
	defer close(e.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			e.M.FastForward(now.Sub(last))
			last = now
		}
	}
}

// Close stops the clock, the client and the server.
func (e *Embedded) Close() {
	close(e.stop)
	<-e.done
	_ = e.Client.Close()
	e.M.Close()
}
