package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestBarrierKey(t *testing.T) {
	s := &Store{k: keys{prefix: "as"}}
	for key, want := range map[string]string{
		"as:{acme}:r:0193":  "as:{acme}:wb",
		"as:{a.b-c}:ix:s:q": "as:{a.b-c}:wb",
		"as:key:abc":        "",
		"as:{}:r:1":         "",
		"as:{acme":          "",
	} {
		if got := s.barrierKey(key); got != want {
			t.Errorf("barrierKey(%q) = %q, want %q", key, got, want)
		}
	}
}

// redisErr stands for an error reply from Redis.
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

var _ redis.Error = redisErr("")

func TestMayHaveRun(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{context.DeadlineExceeded, true},
		{io.EOF, true},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{&net.OpError{Op: "read", Net: "tcp", Err: errors.New("i/o timeout")}, true},
		{refused, false},
		{fmt.Errorf("wrapped: %w", refused), false},
		{redisErr("READONLY You can't write against a read only replica."), false},
		{redisErr("NOSCRIPT No matching script."), false},
		{redis.ErrClosed, false},
		{errors.New("redis: connection pool timeout"), false},
	} {
		if got := mayHaveRun(c.err); got != c.want {
			t.Errorf("mayHaveRun(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
