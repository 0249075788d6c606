// Command baseline is the yardstick of the benchmark harness (bench/load): a tiny
// Fiber + go-redis server that does only the irreducible work of each call asyncstatus
// answers, on the same routes, so that one load generator drives both.
//
//   - poll (GET /v1/requests/:id): one HGETALL, JSON;
//   - create (POST /v1/requests): one script writing the record hash and one index entry;
//   - processing, complete (POST /v1/requests/:id/...): one compare-and-set script
//     that returns the new record;
//   - list (GET /v1/requests?limit=n): one ZREVRANGE of the index, one pipeline of
//     HGETALLs, JSON.
//
// It has no authentication, no pacing, no idempotency, no lifecycle timers and no
// retention: it is not a product. The tenant is taken from the X-Bench-Tenant header
// (default "bench") so that the harness can keep data sets apart; keys are
// "<prefix>:{<tenant>}:r:<id>" (hash) and "<prefix>:{<tenant>}:ix" (zset by created_at).
// The record stores the representation's members under their own names, times as
// Unix milliseconds, JSON members as strings: the plain layout a first version would use.
// Its scripts and representation live in bench/yardstick, shared with the in-process
// benchmarks of internal/httpapi and internal/store.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/bench/yardstick"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address")
	redisURL := flag.String("redis", "redis://127.0.0.1:6379/0", "Redis URL")
	prefix := flag.String("prefix", "bl", "key prefix")
	flag.Parse()
	if err := run(*addr, *redisURL, *prefix); err != nil {
		fmt.Fprintln(os.Stderr, "baseline:", err)
		os.Exit(1)
	}
}

func run(addr, redisURL, prefix string) error {
	o, err := redis.ParseURL(redisURL)
	if err != nil {
		return err
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = time.Second, time.Second, time.Second, time.Second
	o.ContextTimeoutEnabled = true
	rdb := redis.NewClient(o)
	defer rdb.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, s := range []*redis.Script{yardstick.CreateScript, yardstick.ProcessingScript, yardstick.CompleteScript} {
		if err := s.Load(ctx, rdb).Err(); err != nil {
			return fmt.Errorf("load script: %w", err)
		}
	}

	s := &server{rdb: rdb, prefix: prefix}
	app := fiber.New(fiber.Config{DisableStartupMessage: true, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute, ErrorHandler: errorHandler})
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"status": "ok"}) })
	app.Post("/v1/requests", s.create)
	app.Get("/v1/requests", s.list)
	app.Get("/v1/requests/:id", s.poll)
	app.Post("/v1/requests/:id/processing", s.processing)
	app.Post("/v1/requests/:id/complete", s.complete)

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- app.Listener(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	return app.ShutdownWithTimeout(5 * time.Second)
}

type server struct {
	rdb    *redis.Client
	prefix string
}

func (s *server) tenant(c *fiber.Ctx) string {
	if t := c.Get("X-Bench-Tenant"); t != "" {
		return t
	}
	return "bench"
}

func (s *server) record(tenant, id string) string { return s.prefix + ":{" + tenant + "}:r:" + id }
func (s *server) index(tenant string) string      { return s.prefix + ":{" + tenant + "}:ix" }

// httpError is an answer other than success; errorHandler writes it as JSON.
type httpError struct {
	status int
	msg    string
}

func (e httpError) Error() string { return e.msg }

func errorHandler(c *fiber.Ctx, err error) error {
	status := fiber.StatusInternalServerError
	var he httpError
	var fe *fiber.Error
	switch {
	case errors.As(err, &he):
		status = he.status
	case errors.As(err, &fe):
		status = fe.Code
	}
	return c.Status(status).JSON(fiber.Map{"status": status, "detail": err.Error()})
}

var errNotFound = httpError{fiber.StatusNotFound, "not found"}

func (s *server) poll(c *fiber.Ctx) error {
	id := c.Params("id")
	m, err := s.rdb.HGetAll(c.UserContext(), s.record(s.tenant(c), id)).Result()
	if err != nil {
		return err
	}
	if len(m) == 0 {
		return errNotFound
	}
	return yardstick.Write(c, fiber.StatusOK, yardstick.FromMap(id, m))
}

func (s *server) create(c *fiber.Ctx) error {
	var in struct {
		Type     string          `json:"type"`
		Context  json.RawMessage `json:"context"`
		Estimate int             `json:"estimated_duration_seconds"`
	}
	if err := json.Unmarshal(c.Body(), &in); err != nil || in.Type == "" {
		return httpError{fiber.StatusBadRequest, "bad body"}
	}
	ctxJSON, err := compact(in.Context)
	if err != nil {
		return err
	}
	u, err := uuid.NewV7()
	if err != nil {
		return err
	}
	id, tenant := u.String(), s.tenant(c)
	now := time.Now().UnixMilli()
	nowS := strconv.FormatInt(now, 10)
	if err := yardstick.CreateScript.Run(c.UserContext(), s.rdb, []string{s.record(tenant, id), s.index(tenant)},
		id, nowS, in.Type, ctxJSON, "bench").Err(); err != nil {
		return err
	}
	c.Set(fiber.HeaderLocation, c.BaseURL()+"/v1/requests/"+id)
	r := yardstick.Representation{ID: id, Type: in.Type, Status: "queued", CreatedBy: "bench", CreatedAt: yardstick.MsTime(now),
		UpdatedAt: yardstick.MsTime(now), Version: 1}
	if ctxJSON != "" {
		r.Context = json.RawMessage(ctxJSON)
	}
	return yardstick.Write(c, fiber.StatusAccepted, r)
}

func compact(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", httpError{fiber.StatusBadRequest, "bad JSON"}
	}
	return b.String(), nil
}

func (s *server) processing(c *fiber.Ctx) error {
	var in struct {
		Percent *int   `json:"percent,omitempty"`
		Message string `json:"message,omitempty"`
	}
	if len(c.Body()) > 0 {
		if err := json.Unmarshal(c.Body(), &in); err != nil {
			return httpError{fiber.StatusBadRequest, "bad body"}
		}
	}
	progress, _ := json.Marshal(in)
	return s.transition(c, yardstick.ProcessingScript, string(progress))
}

func (s *server) complete(c *fiber.Ctx) error {
	var in struct {
		ResultType string          `json:"result_type"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(c.Body(), &in); err != nil || in.ResultType == "" {
		return httpError{fiber.StatusBadRequest, "bad body"}
	}
	result, err := compact(in.Result)
	if err != nil {
		return err
	}
	return s.transition(c, yardstick.CompleteScript, in.ResultType, result)
}

// transition runs one compare-and-set script and answers with the new record.
func (s *server) transition(c *fiber.Ctx, sc *redis.Script, args ...string) error {
	id := c.Params("id")
	argv := []any{strconv.FormatInt(time.Now().UnixMilli(), 10)}
	for _, a := range args {
		argv = append(argv, a)
	}
	v, err := sc.Run(c.UserContext(), s.rdb, []string{s.record(s.tenant(c), id)}, argv...).Slice()
	if err != nil {
		return err
	}
	code, _ := v[0].(int64)
	switch code {
	case 0:
		flat, _ := v[1].([]any)
		return yardstick.Write(c, fiber.StatusOK, yardstick.FromFlat(id, flat))
	case 1:
		return errNotFound
	default:
		return httpError{fiber.StatusConflict, "already terminal"}
	}
}

func (s *server) list(c *fiber.Ctx) error {
	limit := c.QueryInt("limit", 50)
	if limit < 1 || limit > 200 {
		return httpError{fiber.StatusBadRequest, "bad limit"}
	}
	tenant := s.tenant(c)
	ctx := c.UserContext()
	ids, err := s.rdb.ZRevRange(ctx, s.index(tenant), 0, int64(limit)).Result()
	if err != nil {
		return err
	}
	more := len(ids) > limit
	if more {
		ids = ids[:limit]
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, s.record(tenant, id))
		}
		return nil
	}); err != nil {
		return err
	}
	out := struct {
		Items      []yardstick.Representation `json:"items"`
		NextCursor *string                    `json:"next_cursor"`
	}{Items: make([]yardstick.Representation, 0, len(ids))}
	for i, cmd := range cmds {
		if m := cmd.Val(); len(m) > 0 {
			out.Items = append(out.Items, yardstick.FromMap(ids[i], m))
		}
	}
	if more && len(out.Items) > 0 {
		last := out.Items[len(out.Items)-1]
		cur := strconv.FormatInt(int64(last.CreatedAt), 10) + ":" + last.ID
		out.NextCursor = &cur
	}
	body, err := json.Marshal(out)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(body)
}
