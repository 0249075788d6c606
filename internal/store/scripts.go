package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/ratelimit"
	lua "github.com/asyncstatus/asyncstatus/scripts/lua"
)

// script is one loaded script of the registry.
type script struct {
	*redis.Script
	// name is the file name without ".lua", for observers.
	name string
	// ack: its outcomes are writes a caller is told succeeded (durability.go:
	// they wait for replicas, and one that may have run unanswered is
	// "outcome unknown").
	ack bool
	// sha is the script's SHA1 and text its source (for EVAL after a
	// NOSCRIPT), each boxed once, at load: every call's command holds one
	// of them, and boxing a string allocates.
	sha, text any
}

// scripts are the loaded scripts, each with the constants and the parts of
// lib.lua it uses prepended; every one is run by run (runEach for a pipeline).
type scripts struct {
	create, transition, poll, remove, sweep, list, reapply, rate *script
	listLabels, lookup, counts                                   *script
	changelogArm, changelogRead, changelogTrim                   *script
	webhookRegister, webhookDelete, webhookClaim                 *script
	webhookSettle, webhookPrune, webhookReseal                   *script
}

// registry names every script: its file, whether it is an acknowledged write,
// and its place in scripts.
var registry = []struct {
	file string
	ack  bool
	slot func(*scripts) **script
}{
	{"create.lua", true, func(s *scripts) **script { return &s.create }},
	{"transition.lua", true, func(s *scripts) **script { return &s.transition }},
	{"poll.lua", false, func(s *scripts) **script { return &s.poll }},
	{"delete.lua", true, func(s *scripts) **script { return &s.remove }},
	{"sweep.lua", false, func(s *scripts) **script { return &s.sweep }},
	{"list.lua", false, func(s *scripts) **script { return &s.list }},
	{"list_labels.lua", false, func(s *scripts) **script { return &s.listLabels }},
	{"lookup.lua", false, func(s *scripts) **script { return &s.lookup }},
	{"counts.lua", false, func(s *scripts) **script { return &s.counts }},
	{"reapply.lua", false, func(s *scripts) **script { return &s.reapply }},
	{"changelog_arm.lua", false, func(s *scripts) **script { return &s.changelogArm }},
	{"changelog_read.lua", false, func(s *scripts) **script { return &s.changelogRead }},
	{"changelog_trim.lua", false, func(s *scripts) **script { return &s.changelogTrim }},
	{"rate.lua", false, func(s *scripts) **script { return &s.rate }},
	{"webhook_register.lua", false, func(s *scripts) **script { return &s.webhookRegister }},
	{"webhook_delete.lua", false, func(s *scripts) **script { return &s.webhookDelete }},
	{"webhook_claim.lua", false, func(s *scripts) **script { return &s.webhookClaim }},
	{"webhook_settle.lua", false, func(s *scripts) **script { return &s.webhookSettle }},
	{"webhook_prune.lua", false, func(s *scripts) **script { return &s.webhookPrune }},
	{"webhook_reseal.lua", false, func(s *scripts) **script { return &s.webhookReseal }},
}

func loadScripts(consts []luaConst) (scripts, error) {
	consts = append(append(recordConstants(), statusConstants()...), consts...)
	var s scripts
	for _, x := range registry {
		src, err := readScript(x.file, consts)
		if err != nil {
			return scripts{}, err
		}
		rs := redis.NewScript(src)
		*x.slot(&s) = &script{Script: rs, name: strings.TrimSuffix(x.file, ".lua"), ack: x.ack,
			sha: rs.Hash(), text: src}
	}
	return s, nil
}

// all is every script, in registry order.
func (s *scripts) all() []*script {
	out := make([]*script, len(registry))
	for i, x := range registry {
		out[i] = *x.slot(s)
	}
	return out
}

// readScript is one embedded script with the constants of cs it uses (Lua
// definitions of the configuration, written by luaConstants) and the parts of
// lib.lua it uses prepended. Redis runs a script's whole text on every call,
// so a constant it does not use costs an assignment per call for nothing.
func readScript(name string, cs []luaConst) (string, error) {
	lib, err := fs.ReadFile(lua.FS, "lib.lua")
	if err != nil {
		return "", fmt.Errorf("read lib.lua: %w", err)
	}
	b, err := fs.ReadFile(lua.FS, name)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	src, err := assemble(string(lib), string(b), cs)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return src, nil
}

func isInline(c luaConst) bool {
	switch c.v.(type) {
	case inlineInt, inlineLua:
		return true
	}
	return false
}

// assemble is the text of a script body: the constants of cs it uses, the
// helpers of lib it includes (libFor), then body; inline constants written
// into the code in place of their names.
func assemble(lib, body string, cs []luaConst) (string, error) {
	head, err := libFor(lib, body)
	if err != nil {
		return "", err
	}
	code := head + "\n" + body
	used := luaNames(code)
	var mine []luaConst
	inline := map[string]string{}
	for _, c := range cs {
		switch {
		case !used[c.name]:
		case isInline(c):
			if v, ok := c.v.(inlineInt); ok {
				inline[c.name] = strconv.FormatInt(int64(v), 10)
			} else {
				inline[c.name] = string(c.v.(inlineLua))
			}
		default:
			mine = append(mine, c)
		}
	}
	if len(inline) > 0 {
		code = luaName.ReplaceAllStringFunc(code, func(n string) string {
			if v, ok := inline[n]; ok {
				return v
			}
			return n
		})
	}
	return luaConstants(mine) + code, nil
}

// luaConst is one configuration value a script reads as a constant.
type luaConst struct {
	name string
	v    any // int64 or float64: a Lua number; string: a Lua string; inlineInt, inlineLua
}

// inlineInt is a constant written where its name stands, as a number literal,
// instead of a local definition. The record's field positions are: a
// transition reads a dozen of them, and a local each made it run about 0.4%
// more instructions in Redis.
type inlineInt int64

// inlineLua is a constant written where its name stands as this Lua source
// text (a string literal, a table constructor): the status letters.
type inlineLua string

// luaConstants writes cs as Lua local definitions. Settings reach the scripts
// this way rather than as ARGV because Redis parses every argument of every
// call and makes a Lua string of it, and the scripts then convert numbers back
// with tonumber (docs/performance.md has the instruction counts). Each
// configuration is its own script text (its own SHA1), loaded like any other.
// Values Redis commands take (a TTL, a MAXLEN) stay strings, as every number
// given to redis.call should: Lua number formatting differs between Redis and
// the embedded store (docs/pitfalls.md).
func luaConstants(cs []luaConst) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString("local " + c.name + " = ")
		switch v := c.v.(type) {
		case int64:
			b.WriteString(strconv.FormatInt(v, 10))
		case float64:
			b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
		case string:
			b.WriteString(luaString(v))
		default:
			panic(fmt.Sprintf("luaConstants: %s is a %T", c.name, c.v))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// luaString quotes s as a Lua long string, [==[...]==], with a level of "="
// that s does not contain closing (a long string takes its text as is, with no
// escapes; a leading newline would be dropped, so one is doubled).
func luaString(s string) string {
	eq := ""
	for strings.Contains(s, "]"+eq+"]") {
		eq += "="
	}
	if strings.HasPrefix(s, "\n") {
		s = "\n" + s
	}
	return "[" + eq + "[" + s + "]" + eq + "]"
}

// libDefinition is a top-level definition of lib.lua: "local NAME" or "local function NAME".
var libDefinition = regexp.MustCompile(`(?m)^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)`)

// includeLine names a helper of lib.lua that a script (or another helper) uses.
var includeLine = regexp.MustCompile(`(?m)^--- @include "([^"]*)"[ \t]*$`)

// luaComment is a Lua line comment (no script has "--" inside a string).
var luaComment = regexp.MustCompile(`--.*`)

// luaName is a Lua identifier.
var luaName = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// luaNames is the set of identifiers code mentions outside comments.
func luaNames(code string) map[string]bool {
	names := map[string]bool{}
	for _, n := range luaName.FindAllString(luaComment.ReplaceAllString(code, ""), -1) {
		names[n] = true
	}
	return names
}

// libFor returns the paragraphs of lib (blocks between blank lines, each with
// its comment and its definitions) that body names in its "--- @include"
// lines, with the ones those paragraphs include in turn, in lib's order. Redis
// runs a script's whole body on every call, so each helper it carries is a
// closure made again per call, used or not. It fails, so that the store does not start, when an include names no
// helper, when a helper includes one defined after it (a Lua local is not
// visible before its definition), when a script includes a helper it does
// not use, and when the code carried uses a helper it does not include.
func libFor(lib, body string) (string, error) {
	paras := strings.Split(lib, "\n\n")
	defines := map[string]int{} // helper name -> its paragraph
	for i, p := range paras {
		for _, m := range libDefinition.FindAllStringSubmatch(p, -1) {
			defines[m[1]] = i
		}
	}
	used := make([]bool, len(paras))
	var include func(code string, from int) error
	include = func(code string, from int) error {
		for _, m := range includeLine.FindAllStringSubmatch(code, -1) {
			i, ok := defines[m[1]]
			switch {
			case !ok:
				return fmt.Errorf("@include %q: lib.lua defines no such helper", m[1])
			case from >= 0 && i >= from:
				return fmt.Errorf("lib.lua: a helper includes %q, defined after it", m[1])
			}
			if !used[i] {
				used[i] = true
				if err := include(paras[i], i); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := include(body, -1); err != nil {
		return "", err
	}
	mentioned := luaNames(body)
	for _, m := range includeLine.FindAllStringSubmatch(body, -1) {
		if !mentioned[m[1]] {
			return "", fmt.Errorf("@include %q: not used", m[1])
		}
	}
	var out []string
	for i, p := range paras {
		if used[i] {
			out = append(out, p)
			for n := range luaNames(p) {
				mentioned[n] = true
			}
		}
	}
	for n, i := range defines {
		if mentioned[n] && !used[i] {
			return "", fmt.Errorf("uses lib.lua's %s without --- @include %q", n, n)
		}
	}
	return strings.Join(out, "\n\n"), nil
}

// reply is a script's answer: its outcome code, then either the values of a
// table answer (rest) or the rest of a string answer (str; see decodeReply).
type reply struct {
	code int64
	rest []any
	// str is the rest of a string reply after its code digit and its rate
	// part (see decodeReply).
	str string
	// rate is the rate limit the script counted (rate_reply in lib.lua) when
	// counted is true. A value, not a pointer: the hot writes copy it out
	// (setRate), and a pointer cost each reply an allocation.
	rate    domain.RateInfo
	counted bool
}

// detail is what follows the code, for scriptError: a table reply's elements, or
// a string reply's rest as one element.
func (r reply) detail() []any {
	if r.rest == nil && r.str != "" {
		return []any{r.str}
	}
	return r.rest
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
	codeRateLimited = 9
	// codeLeaseLost: webhook_settle.lua found another replica holding the retry.
	codeLeaseLost = 10
	// codeWebhookLimit: webhook_register.lua found the tenant at its endpoint limit.
	codeWebhookLimit = 20
)

// decodeReply reads a script's answer: a string whose first byte is the outcome
// code, or a flat array whose first element is: an integer, or a string of the
// code's digits and, when the script counted a rate limit, its rate part
// (rate_reply in lib.lua).
func decodeReply(v any) (reply, error) {
	// The hot scripts (poll, create, transition) answer one string whose first
	// byte is the code digit: Redis converts a Lua string into a reply faster than
	// a table, and go-redis reads it with one allocation.
	if str, ok := v.(string); ok {
		if str == "" || str[0] < '0' || str[0] > '9' {
			return reply{}, fmt.Errorf("unexpected script reply %q", truncateReply(str))
		}
		r := reply{code: int64(str[0] - '0'), str: str[1:]}
		if strings.HasPrefix(r.str, ":") {
			rate, rest, ok := parseRateReply(r.str[1:])
			if !ok {
				return reply{}, fmt.Errorf("unexpected script reply %q", truncateReply(str))
			}
			r.rate, r.counted, r.str = rate, true, rest
		}
		return r, nil
	}
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return reply{}, fmt.Errorf("unexpected script reply %T", v)
	}
	switch c := arr[0].(type) {
	case int64:
		return reply{code: c, rest: arr[1:]}, nil
	case string:
		digits, rate, counted := strings.Cut(c, ":")
		code, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || code < 0 {
			return reply{}, fmt.Errorf("unexpected script outcome %q", truncateReply(c))
		}
		r := reply{code: code, rest: arr[1:], counted: counted}
		if counted {
			var rest string
			if r.rate, rest, ok = parseRateReply(rate); !ok || rest != "" {
				return reply{}, fmt.Errorf("unexpected script outcome %q", truncateReply(c))
			}
		}
		return r, nil
	}
	return reply{}, fmt.Errorf("unexpected script outcome %T", arr[0])
}

// parseRateReply reads rate_reply's "<limit>,<remaining>,<reset ms>;" (after
// its ':') and returns what follows it.
func parseRateReply(s string) (domain.RateInfo, string, bool) {
	head, rest, ok := strings.Cut(s, ";")
	if !ok {
		return domain.RateInfo{}, "", false
	}
	var n [3]int64
	for i := range n {
		var f string
		f, head, _ = strings.Cut(head, ",")
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return domain.RateInfo{}, "", false
		}
		n[i] = v
	}
	if head != "" {
		return domain.RateInfo{}, "", false
	}
	return domain.RateInfo{Limit: n[0], Remaining: n[1], Reset: time.UnixMilli(n[2])}, rest, true
}

// truncateReply keeps an error message about a malformed reply short.
func truncateReply(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// outcome is the one place where a script's outcome becomes a domain error.
// It answers nil for the codes of results, which carry the caller's result
// (the caller decodes them), and the domain error of every other code: rate
// limited (its reset from the reply's rate part), and every error code. The
// detail an error reads is what follows the code and any common prefix of
// that script's reply (reply.detail; see its header): the seconds left for
// codeTooEarly, the record string for codeTerminal, the limit for
// codeWebhookLimit. id names the request.
func (s *Store) outcome(op, id string, r reply, results ...int64) error {
	if slices.Contains(results, r.code) {
		return nil
	}
	detail := r.detail()
	first := func() int64 {
		if len(detail) == 0 {
			return 0
		}
		return toInt64(detail[0])
	}
	switch r.code {
	case codeNotFound:
		return domain.ErrNotFound()
	case codeFrozen:
		return domain.Errorf(domain.TenantFrozen, "The tenant is frozen by an operator; reads and creates are refused.")
	case codeIdemReused:
		return domain.Errorf(domain.IdempotencyKeyReused, "This Idempotency-Key was already used with a different request body.")
	case codeTooEarly:
		left := int(max(first(), 1))
		e := domain.Errorf(domain.PolledTooEarly, "Polled sooner than the Retry-After it was given; wait %d s.", left)
		e.RetryAfterSeconds = left
		return e
	case codeRateLimited:
		wait := max(int((r.rate.Reset.Sub(s.now())+time.Second-1)/time.Second), 1)
		e := domain.Errorf(domain.RateLimited, "Too many requests; retry after %d s.", wait)
		e.RetryAfterSeconds = wait
		return e
	case codeTerminal:
		var rec string
		if len(detail) > 0 {
			rec, _ = detail[0].(string)
		}
		cur, err := decodeRecord(id, rec, false)
		if err != nil {
			return err
		}
		e := domain.Errorf(domain.AlreadyTerminal, "The request is already %s; its status can no longer change.", cur.Status)
		e.Request = cur
		return e
	case codeNothingToDo:
		return errNothingToDo
	case codeWebhookLimit:
		return domain.Errorf(domain.ValidationFailed, "A tenant may register at most %d webhook endpoints; delete one first.", first())
	}
	return backend(op, fmt.Errorf("unexpected script outcome %d", r.code))
}

// errNothingToDo: a sweeper's guarded transition found the request moved on.
var errNothingToDo = errors.New("nothing to do")

// run executes a script (EVALSHA, falling back to EVAL when Redis lost its script
// cache) and decodes the outcome code. With Options.WaitReplicas > 0, the writes
// callers are told about also wait for the replicas (durability.go).
func (s *Store) run(ctx context.Context, sc *script, c scriptCall) (reply, error) {
	ctx, end := s.traceScript(ctx, sc)
	r, err := s.runCall(ctx, sc, c)
	end(err)
	return r, err
}

func (s *Store) runCall(ctx context.Context, sc *script, c scriptCall) (reply, error) {
	if s.waitsForReplicas(sc) {
		return s.runReplicated(ctx, sc, c)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	start := time.Now()
	v, err := s.eval(ctx, sc, c)
	if o := s.opts.ScriptObserver; o != nil {
		o.ObserveScript(sc.name, time.Since(start), err)
	}
	if err != nil {
		return reply{}, s.scriptFailed(sc, err)
	}
	return decodeReply(v)
}

// scriptCall is one call of a script: its KEYS and ARGV, in the order of the
// script's header. An operation with more than a few of them has an args
// struct whose call method builds them (createArgs, transitionArgs, ...), so
// that the header and Go agree in one place.
//
// The hot writes (create, transition) lay their call out as the whole
// EVALSHA command instead (cmd), each key and argument boxed once, so that
// the command go-redis sends is that slice, not a copy of keys and args.
type scriptCall struct {
	keys []string
	args []any
	// cmd, when set, replaces keys and args: three slots that scriptArgs
	// fills (the verb, the SHA1, the number of keys), then nkeys keys, then
	// ARGV. Only run sends such a call (a write runs alone); runEach's
	// pipelines and runList take keys and args.
	cmd   []any
	nkeys int
}

// cmdHead is the room a call laid out as a command (scriptCall.cmd) leaves
// for the verb, the SHA1 and the number of keys.
const cmdHead = 3

// newCmdCall starts a call laid out as a command, with room for keys keys
// and args arguments; its call method appends the keys, then endKeys, then
// the arguments.
func newCmdCall(keys, args int) scriptCall {
	return scriptCall{cmd: make([]any, cmdHead, cmdHead+keys+args)}
}

// addKey appends one key to a call laid out as a command (before endKeys).
func (c *scriptCall) addKey(k string) { c.cmd = append(c.cmd, k) }

// endKeys marks the keys appended so far as the call's KEYS; what follows is ARGV.
func (c *scriptCall) endKeys() { c.nkeys = len(c.cmd) - cmdHead }

// firstKey is the call's first key, which names its slot.
func (c scriptCall) firstKey() string {
	if c.cmd != nil {
		k, _ := c.cmd[cmdHead].(string)
		return k
	}
	return c.keys[0]
}

// counters are the two rate-limit counters a call is counted on (Store.counters),
// the credential's and its tenant's; zero when it is not counted. Every script
// that counts takes them as a pair of optional KEYS (rate_gate in lib.lua).
type counters struct{ cred, tenant string }

// appendTo appends the pair to keys, when there is one.
func (c counters) appendTo(keys []string) []string {
	if c.cred == "" {
		return keys
	}
	return append(keys, c.cred, c.tenant)
}

// addTo appends the pair to a call laid out as a command, when there is one.
func (c counters) addTo(call *scriptCall) {
	if c.cred != "" {
		call.addKey(c.cred)
		call.addKey(c.tenant)
	}
}

// runList runs list.lua's calls, one per group of shards, for one round of a listing;
// the first round's first call (first) also counts the listing against
// f.Credential's read rate limits on the counters under tag (list.lua's
// header), and f.Rate receives the counted limit. A refused listing is the
// rate-limited outcome of that reply.
func (s *Store) runList(ctx context.Context, calls []scriptCall, first bool, tag string, f domain.ListFilter) ([]reply, error) {
	rate := counters{}
	if first {
		rate = s.counters(tag, ratelimit.ScopeRead, f.Credential)
	}
	if rate.cred != "" {
		c := &calls[0]
		c.keys = rate.appendTo(c.keys)
		c.args[7] = ms(s.now())
	}
	sc := s.sc.list
	if f.LabelSelector != "" {
		sc = s.sc.listLabels // same calls and replies, but ARGV[7]: listCalls
	}
	replies, err := s.runEach(ctx, sc, calls)
	if err == nil && rate.cred != "" {
		setRate(f.Rate, replies[0])
	}
	return replies, err
}

// runEach runs sc once per call, all in one pipeline (on a Cluster go-redis
// sends each master its calls together and the masters in parallel: one
// round trip per master), EVALSHA first and EVAL again for all when Redis lost
// the script. The replies are in calls' order; any failed call fails all.
// Redis that lost the script gets it loaded (SCRIPT LOAD) and the calls again.
func (s *Store) runEach(ctx context.Context, sc *script, calls []scriptCall) ([]reply, error) {
	if len(calls) == 1 {
		r, err := s.run(ctx, sc, calls[0])
		return []reply{r}, err
	}
	ctx, end := s.traceScript(ctx, sc)
	out, err := s.runPipelined(ctx, sc, calls)
	end(err)
	return out, err
}

func (s *Store) runPipelined(ctx context.Context, sc *script, calls []scriptCall) ([]reply, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	start := time.Now()
	cmds := make([]*redis.Cmd, len(calls))
	exec := func() error {
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, c := range calls {
				cmds[i] = sc.EvalSha(ctx, p, c.keys, c.args...)
			}
			return nil
		})
		return err
	}
	err := exec()
	if err != nil && slices.ContainsFunc(cmds, func(c *redis.Cmd) bool {
		return c.Err() != nil && redis.HasErrorPrefix(c.Err(), "NOSCRIPT")
	}) {
		// Load it (on a Cluster: on every master) rather than EVAL it once
		// per call: the script's text is a few KiB, sent once.
		if err = sc.Load(ctx, s.rdb).Err(); err == nil {
			err = exec()
		}
	}
	if o := s.opts.ScriptObserver; o != nil {
		d := time.Since(start) // each call waited for the whole pipeline
		for _, c := range cmds {
			o.ObserveScript(sc.name, d, c.Err())
		}
	}
	if err != nil {
		return nil, s.scriptFailed(sc, err)
	}
	out := make([]reply, len(cmds))
	for i, c := range cmds {
		r, err := decodeReply(c.Val())
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// eval runs sc: EVALSHA, then EVAL when Redis lost its script cache (which also
// puts the script back into it). With Options.AutoPipeline the EVALSHA rides the
// autopipeliner; it runs on the autopipeliner's own context, so the wait for its
// reply is what ctx bounds (an abandoned call may still run, as a timed-out one
// may on a plain connection: scriptFailed says so for writes).
func (s *Store) eval(ctx context.Context, sc *script, c scriptCall) (any, error) {
	if s.ap == nil {
		if !sc.ack && c.cmd == nil {
			return sc.Run(ctx, s.rdb, c.keys, c.args...).Result()
		}
		a := scriptArgs(sc, c)
		cmd := redis.NewCmd(ctx, a...)
		if err := s.rdb.Process(ctx, once(sc, cmd)); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			return s.reload(ctx, sc, a)
		}
		return cmd.Result()
	}
	// An abandoned call may be written after its caller has returned: its
	// arguments are strings the caller owns (never views of a buffer it
	// reuses: the HTTP layer copies what it takes from a request, domain.Call),
	// and its keys are built here.
	a := scriptArgs(sc, c)
	cmd := redis.NewCmd(ctx, a...)
	if err := s.ap.Submit(ctx, once(sc, cmd)).WaitContext(ctx); err != nil {
		if redis.HasErrorPrefix(err, "NOSCRIPT") {
			return s.reload(ctx, sc, a)
		}
		return nil, err
	}
	return cmd.Result()
}

// reload sends EVAL, which also puts sc back into Redis's script cache, after a
// NOSCRIPT (which says the EVALSHA did not run); a is the EVALSHA's arguments.
func (s *Store) reload(ctx context.Context, sc *script, a []any) (any, error) {
	cmd := redis.NewCmd(ctx, evalArgs(sc, a)...)
	_ = s.rdb.Process(ctx, once(sc, cmd))
	return cmd.Result()
}

// scriptArgs are the arguments of an EVALSHA of sc for c, built once per
// call and handed to go-redis as they are (NewCmd keeps a variadic slice
// without copying it): c's own cmd when it was laid out as one, which
// belongs to this call alone.
func scriptArgs(sc *script, c scriptCall) []any {
	if c.cmd != nil {
		c.cmd[0], c.cmd[1], c.cmd[2] = "evalsha", sc.sha, c.nkeys
		return c.cmd
	}
	a := make([]any, cmdHead+len(c.keys), cmdHead+len(c.keys)+len(c.args))
	a[0], a[1], a[2] = "evalsha", sc.sha, len(c.keys)
	for i, k := range c.keys {
		a[cmdHead+i] = k
	}
	return append(a, c.args...)
}

// evalArgs are the arguments of the EVAL of the call whose EVALSHA's
// arguments are a: a copy, since the EVALSHA command still holds a (an
// abandoned autopipelined one may yet be written from it).
func evalArgs(sc *script, a []any) []any {
	e := slices.Clone(a)
	e[0], e[1] = "eval", sc.text
	return e
}

// onceCmd is a command that go-redis must not send again after a failure. A
// write script whose answer did not come (a read timeout, a cut connection)
// may have run, and go-redis retries such failures by default (its
// autopipeliner on a context of its own, after the caller gave up): every copy
// would run, a heartbeat answered 503 moving the version by 2 or 3, an
// unkeyed create making two requests (found by internal/histories). Once is
// what §11 promises of a 503: the write may or may not have been applied.
type onceCmd struct{ *redis.Cmd }

// NoRetry tells go-redis not to resend the command (nor, in a pipeline, the
// batch that holds it).
func (onceCmd) NoRetry() bool { return true }

// once wraps cmd as an onceCmd when sc writes what a caller is told about;
// other scripts (reads, the sweeper's idempotent cleanup) keep go-redis's
// retries.
func once(sc *script, cmd *redis.Cmd) redis.Cmder {
	if sc.ack {
		return onceCmd{cmd}
	}
	return cmd
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
