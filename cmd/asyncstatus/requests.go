package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/asyncstatus/asyncstatus/client"
)

// The `asyncstatus requests` commands (docs/reference.md §8) speak only HTTP to a running
// service, through the public client package.

const requestsUsage = `usage:
  asyncstatus requests get ID [--json]
  asyncstatus requests list [--type T] [--status S[,S]] [--label-selector name=value[,...]] [--limit N] [--json]
  asyncstatus requests events ID [--json]
  asyncstatus requests wait ID [--timeout DURATION] [--json]
Every requests command takes:
  --url URL            the service (ASYNCSTATUS_URL; default http://127.0.0.1:8080)
  --key KEY            an API key (ASYNCSTATUS_API_KEY)
  --poll-token TOKEN   or the request's poll token (ASYNCSTATUS_POLL_TOKEN; get, events, wait)
  --json               print the service's JSON instead of text
wait follows the request to its end (long poll where the service offers it), showing
progress on stderr: a bar on a terminal, one line per change elsewhere.
Exit status: 0 done (wait: succeeded); 1 wait: failed, expired or cancelled; 2 wrong usage;
3 wait: --timeout passed first; 4 any other error (not found, credentials, unreachable).`

// Exit statuses of the requests commands (the others are in main.go).
const (
	exitNotSucceeded = 1
	exitTimeout      = 3
	exitOther        = 4
)

// exitError ends a command with a given exit status; main prints its message.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }
func (e exitError) ExitCode() int { return e.code }

// requestsFlags are the flags every requests subcommand takes.
type requestsFlags struct {
	url, key, pollToken string
	json                bool
}

// parseRequestFlags parses a subcommand's flags, which may come before or
// after its arguments, and returns the arguments. help is true after -h/--help
// (the usage has been printed to stdout).
func parseRequestFlags(name string, args []string, getenv func(string) string, stdout io.Writer,
	define func(fs *flag.FlagSet)) (rf requestsFlags, pos []string, help bool, err error) {
	fs := flag.NewFlagSet("requests "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&rf.url, "url", envOr(getenv, "ASYNCSTATUS_URL", "http://127.0.0.1:8080"), "the service's base URL")
	fs.StringVar(&rf.key, "key", getenv("ASYNCSTATUS_API_KEY"), "API key")
	fs.StringVar(&rf.pollToken, "poll-token", getenv("ASYNCSTATUS_POLL_TOKEN"), "poll token")
	fs.BoolVar(&rf.json, "json", false, "print JSON")
	if define != nil {
		define(fs)
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintln(stdout, requestsUsage)
				return rf, nil, true, nil
			}
			return rf, nil, false, usageError{"requests " + name + ": " + err.Error() + "\n" + requestsUsage}
		}
		args = fs.Args()
		if len(args) == 0 {
			return rf, pos, false, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

// newRequestsClient makes the client the flags name.
func newRequestsClient(rf requestsFlags) (*client.Client, error) {
	opts := []client.Option{client.WithUserAgent("asyncstatus-cli/" + version)}
	if rf.key != "" {
		opts = append(opts, client.WithAPIKey(rf.key))
	} else if rf.pollToken != "" {
		opts = append(opts, client.WithPollToken(rf.pollToken))
	}
	c, err := client.New(rf.url, opts...)
	if err != nil {
		return nil, usageError{"requests: --url: " + err.Error()}
	}
	return c, nil
}

// cmdRequests runs `asyncstatus requests get|list|events|wait`.
func cmdRequests(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{requestsUsage}
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, requestsUsage)
		return nil
	case "get", "events":
		return requestsShow(ctx, sub, rest, getenv, stdout)
	case "list":
		return requestsList(ctx, rest, getenv, stdout)
	case "wait":
		return requestsWait(ctx, rest, getenv, stdout, stderr)
	}
	return usageError{fmt.Sprintf("requests: unknown command %q\n%s", sub, requestsUsage)}
}

// oneID checks that a subcommand got exactly its ID.
func oneID(name string, pos []string) (string, error) {
	switch {
	case len(pos) == 0:
		return "", usageError{"requests " + name + ": missing ID\n" + requestsUsage}
	case len(pos) > 1:
		return "", usageError{"requests " + name + ": unexpected argument " + pos[1] + "\n" + requestsUsage}
	}
	return pos[0], nil
}

// callFailed is the exit-4 error of a failed call: the problem's code and
// detail when the service answered one.
func callFailed(name string, err error) error {
	var e *client.Error
	switch {
	case errors.As(err, &e) && e.Code != "":
		msg := fmt.Sprintf("requests %s: %s: %s", name, e.Code, e.Detail)
		if e.RequestID != "" {
			msg += " (request_id " + e.RequestID + ")"
		}
		return exitError{exitOther, msg}
	case errors.As(err, &e):
		return exitError{exitOther, fmt.Sprintf("requests %s: HTTP %d: %s", name, e.Status, e.Detail)}
	}
	return exitError{exitOther, fmt.Sprintf("requests %s: %v", name, err)}
}

// requestsShow runs `requests get ID` and `requests events ID`.
func requestsShow(ctx context.Context, name string, args []string, getenv func(string) string, stdout io.Writer) error {
	rf, pos, help, err := parseRequestFlags(name, args, getenv, stdout, nil)
	if err != nil || help {
		return err
	}
	id, err := oneID(name, pos)
	if err != nil {
		return err
	}
	c, err := newRequestsClient(rf)
	if err != nil {
		return err
	}
	if name == "get" {
		r, err := c.Get(ctx, id)
		var e *client.Error
		if errors.As(err, &e) && e.Code == client.CodePolledTooEarly && e.RetryAfter <= maxGetDelay {
			// A person who runs get twice in a row has not polled in a loop:
			// come back when the service said, once, instead of failing.
			if err := sleepCtx(ctx, e.RetryAfter); err != nil {
				return callFailed(name, err)
			}
			r, err = c.Get(ctx, id)
		}
		if err != nil {
			return callFailed(name, err)
		}
		if rf.json {
			_, err = fmt.Fprintf(stdout, "%s\n", r.Raw())
			return err
		}
		return printRequest(stdout, r)
	}
	evs, err := c.Events(ctx, id)
	if err != nil {
		return callFailed(name, err)
	}
	if rf.json {
		return printJSON(stdout, eventsJSON(evs))
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tAT\tFROM\tTO\tBY")
	for _, e := range evs {
		from := "-"
		if e.From != nil {
			from = string(*e.From)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", e.Seq, stamp(e.At), from, e.To, e.By)
	}
	return tw.Flush()
}

// maxGetDelay is the longest POLLED_TOO_EARLY that `requests get` waits out.
const maxGetDelay = 30 * time.Second

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// eventsJSON is the events listing as the service writes it.
func eventsJSON(evs []client.Event) any {
	type event struct {
		Seq  int            `json:"seq"`
		At   string         `json:"at"`
		From *client.Status `json:"from"`
		To   client.Status  `json:"to"`
		By   string         `json:"by"`
	}
	out := make([]event, len(evs))
	for i, e := range evs {
		out[i] = event{e.Seq, stamp(e.At), e.From, e.To, e.By}
	}
	return map[string]any{"items": out}
}

// requestsList runs `requests list`.
func requestsList(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var typ, status, selector string
	limit := 50
	rf, pos, help, err := parseRequestFlags("list", args, getenv, stdout, func(fs *flag.FlagSet) {
		fs.StringVar(&typ, "type", "", "only requests of this type")
		fs.StringVar(&status, "status", "", "only requests in these statuses (comma-separated)")
		fs.IntVar(&limit, "limit", 50, "at most this many requests, newest first")
		fs.StringVar(&selector, "label-selector", "", "only requests carrying every one of these labels (name=value, comma-separated, at most 4)")
	})
	if err != nil || help {
		return err
	}
	if len(pos) > 0 {
		return usageError{"requests list: unexpected argument " + pos[0] + "\n" + requestsUsage}
	}
	if limit < 1 {
		return usageError{"requests list: --limit must be at least 1"}
	}
	o := client.ListOptions{Type: typ, Limit: min(limit, 200)}
	for term := range strings.SplitSeq(selector, ",") {
		if term = strings.TrimSpace(term); term == "" {
			continue
		}
		n, v, ok := strings.Cut(term, "=")
		if !ok {
			return usageError{"requests list: --label-selector takes name=value terms, not " + term}
		}
		if o.Labels == nil {
			o.Labels = map[string]string{}
		}
		if _, twice := o.Labels[n]; twice {
			return usageError{"requests list: --label-selector names " + n + " twice"}
		}
		o.Labels[n] = v
	}
	for s := range strings.SplitSeq(status, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.Statuses = append(o.Statuses, client.Status(s))
		}
	}
	c, err := newRequestsClient(rf)
	if err != nil {
		return err
	}
	var items []*client.Request
	for r, err := range c.List(ctx, o) {
		if err != nil {
			return callFailed("list", err)
		}
		items = append(items, r)
		if len(items) == limit {
			break
		}
	}
	if rf.json {
		raw := make([]json.RawMessage, len(items))
		for i, r := range items {
			raw[i] = r.Raw()
		}
		return printJSON(stdout, map[string]any{"items": raw})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTYPE\tSTATUS\tPROGRESS\tCREATED")
	for _, r := range items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Type, r.Status, progressText(r.Progress, "-"), stamp(r.CreatedAt))
	}
	return tw.Flush()
}

// requestsWait runs `requests wait ID`.
func requestsWait(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var timeout time.Duration
	rf, pos, help, err := parseRequestFlags("wait", args, getenv, stdout, func(fs *flag.FlagSet) {
		fs.DurationVar(&timeout, "timeout", 0, "give up after this long (exit status 3); default: never")
	})
	if err != nil || help {
		return err
	}
	id, err := oneID("wait", pos)
	if err != nil {
		return err
	}
	if timeout < 0 {
		return usageError{"requests wait: --timeout must not be negative"}
	}
	c, err := newRequestsClient(rf)
	if err != nil {
		return err
	}
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	show := newProgressView(stderr)
	final, err := c.Wait(wctx, id, &client.WaitOptions{OnChange: show.update})
	show.end()
	switch {
	case err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		msg := fmt.Sprintf("requests wait: --timeout %s passed", timeout)
		if final != nil {
			msg += "; the request is " + string(final.Status)
		}
		return exitError{exitTimeout, msg}
	case err != nil:
		return callFailed("wait", err)
	}
	if rf.json {
		if _, err := fmt.Fprintf(stdout, "%s\n", final.Raw()); err != nil {
			return err
		}
	} else if err := printRequest(stdout, final); err != nil {
		return err
	}
	if final.Status == client.StatusSucceeded {
		return nil
	}
	msg := fmt.Sprintf("request %s %s", final.ID, final.Status)
	switch {
	case final.Failure != nil:
		msg += ": " + final.Failure.Error()
	case final.Cancellation != nil && final.Cancellation.Reason != "":
		msg += ": " + final.Cancellation.Reason
	}
	return exitError{exitNotSucceeded, msg}
}

// stamp writes a time as the service does (RFC 3339, UTC, milliseconds).
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// progressText is "40% page 4 of 10", or none when nothing was reported.
func progressText(p *client.Progress, none string) string {
	if p == nil {
		return none
	}
	var parts []string
	if p.Percent != nil {
		parts = append(parts, fmt.Sprintf("%d%%", *p.Percent))
	}
	if p.Message != "" {
		parts = append(parts, p.Message)
	}
	if len(parts) == 0 {
		return none
	}
	return strings.Join(parts, " ")
}

// printRequest writes a request for people: one "name: value" line per member
// that is set.
func printRequest(w io.Writer, r *client.Request) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	line := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	line("id", r.ID)
	line("type", r.Type)
	line("status", string(r.Status))
	if p := progressText(r.Progress, ""); p != "" {
		line("progress", p)
	}
	if len(r.Context) > 0 {
		line("context", string(r.Context))
	}
	if r.ResultType != "" {
		line("result", r.ResultType+" "+string(r.Result))
	}
	if r.Failure != nil {
		line("failure", r.Failure.Error())
	}
	if r.Cancellation != nil && r.Cancellation.Reason != "" {
		line("cancelled", r.Cancellation.Reason)
	}
	line("created_by", r.CreatedBy)
	line("created_at", stamp(r.CreatedAt))
	line("updated_at", stamp(r.UpdatedAt))
	if r.CompletedAt != nil {
		line("completed_at", stamp(*r.CompletedAt))
	}
	if r.ExpiresAt != nil {
		line("expires_at", stamp(*r.ExpiresAt))
	}
	line("version", fmt.Sprint(r.Version))
	return tw.Flush()
}
