package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	lua "github.com/asyncstatus/asyncstatus/scripts/lua"
)

// scripts are the loaded Lua scripts, each with lib.lua prepended.
type scripts struct {
	create, transition, poll, remove, sweep *redis.Script
	list, records, reapply                  *redis.Script
	// names are the script names for observers: the file name without ".lua".
	names map[*redis.Script]string
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
	s := scripts{names: map[*redis.Script]string{}}
	for _, x := range []struct {
		dst  **redis.Script
		name string
	}{{&s.create, "create.lua"}, {&s.transition, "transition.lua"}, {&s.poll, "poll.lua"},
		{&s.remove, "delete.lua"}, {&s.sweep, "sweep.lua"}, {&s.list, "list.lua"}, {&s.records, "records.lua"},
		{&s.reapply, "reapply.lua"}} {
		if *x.dst, err = read(x.name); err != nil {
			return scripts{}, err
		}
		s.names[*x.dst] = strings.TrimSuffix(x.name, ".lua")
	}
	return s, nil
}

func (s scripts) all() []*redis.Script {
	return []*redis.Script{s.create, s.transition, s.poll, s.remove, s.sweep, s.list, s.records, s.reapply}
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
	codeRateLimited = 9
)

// run executes a script (EVALSHA, falling back to EVAL when Redis lost its script
// cache) and decodes the outcome code. With Options.WaitReplicas > 0, the writes
// callers are told about also wait for the replicas (durability.go).
func (s *Store) run(ctx context.Context, sc *redis.Script, keys []string, args ...any) (reply, error) {
	if s.waitsForReplicas(sc) {
		return s.runReplicated(ctx, sc, keys, args...)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	start := time.Now()
	v, err := sc.Run(ctx, s.rdb, keys, args...).Result()
	if o := s.opts.ScriptObserver; o != nil {
		o.ObserveScript(s.sc.names[sc], time.Since(start), err)
	}
	if err != nil {
		return reply{}, s.scriptFailed(sc, err)
	}
	return decodeReply(v)
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
