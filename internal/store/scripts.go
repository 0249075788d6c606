package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/redis/go-redis/v9"

	lua "github.com/asyncstatus/asyncstatus/scripts/lua"
)

// scripts are the loaded Lua scripts, each with lib.lua prepended.
type scripts struct {
	create, transition, poll, remove, sweep *redis.Script
}

func loadScripts() (scripts, error) {
	lib, err := fs.ReadFile(lua.FS, "lib.lua")
	if err != nil {
		return scripts{}, fmt.Errorf("read lib.lua: %w", err)
	}
	read := func(name string) (*redis.Script, error) {
		b, err := fs.ReadFile(lua.FS, name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		return redis.NewScript(string(lib) + "\n" + string(b)), nil
	}
	var s scripts
	for _, x := range []struct {
		dst  **redis.Script
		name string
	}{{&s.create, "create.lua"}, {&s.transition, "transition.lua"}, {&s.poll, "poll.lua"},
		{&s.remove, "delete.lua"}, {&s.sweep, "sweep.lua"}} {
		if *x.dst, err = read(x.name); err != nil {
			return scripts{}, err
		}
	}
	return s, nil
}

func (s scripts) all() []*redis.Script {
	return []*redis.Script{s.create, s.transition, s.poll, s.remove, s.sweep}
}

// reply is a script's flat array answer: an integer outcome code, then values.
type reply struct {
	code int64
	rest []any
}

// Script outcome codes, shared by every script (see each script's header).
const (
	codeOK          = 0
	codeNotFound    = 1
	codeFrozen      = 2
	codeTooEarly    = 3
	codeIdemReused  = 4
	codeReplay      = 5
	codeTerminal    = 6
	codeNothingToDo = 7
	codeRetry       = 8
)

// run executes a script (EVALSHA, falling back to EVAL when Redis lost its script
// cache) and decodes the outcome code.
func (s *Store) run(ctx context.Context, sc *redis.Script, keys []string, args ...any) (reply, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	v, err := sc.Run(ctx, s.rdb, keys, args...).Result()
	if err != nil {
		return reply{}, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return reply{}, fmt.Errorf("unexpected script reply %T", v)
	}
	code, ok := arr[0].(int64)
	if !ok {
		return reply{}, fmt.Errorf("unexpected script outcome %T", arr[0])
	}
	return reply{code: code, rest: arr[1:]}, nil
}

// isRedisDown tells Redis being unreachable, slow or not serving from other errors.
// Every Redis failure is BACKEND_UNAVAILABLE to callers; this only picks the log level.
func isRedisDown(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrClosed) {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"LOADING", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "READONLY", "connection refused", "i/o timeout", "EOF", "broken pipe", "reset by peer"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
