package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asyncstatus/asyncstatus/client"
)

// A backend creates a request and hands the poll token to the client that
// waits; a job (here a goroutine) does the work. serviceURL and apiKey point
// at a running service.
func Example() {
	ctx := context.Background()
	c, err := client.New(serviceURL, client.WithAPIKey(apiKey))
	if err != nil {
		panic(err)
	}
	created, err := c.Create(ctx, client.CreateParams{
		Type:    "statement.export",
		Context: map[string]any{"account": "acc_881204", "year": 2025},
	})
	if err != nil {
		panic(err)
	}

	go func() { // the job, usually in another process
		_, _ = c.RunJob(ctx, created.ID, func(ctx context.Context, p *client.Reporter) (client.Result, error) {
			p.Report(50, "page 1 of 2")
			return &client.Link{URL: "https://files.example/statement.pdf", ExpiresAt: time.Now().Add(time.Hour)}, nil
		}, nil)
	}()

	// The waiting side needs only the poll token.
	poller, _ := client.New(serviceURL, client.WithPollToken(created.PollToken))
	final, err := poller.Wait(ctx, created.ID, &client.WaitOptions{RetryAfter: created.RetryAfter})
	if err != nil {
		panic(err)
	}
	link, _ := final.Link()
	fmt.Println(final.Status, link.URL)
	// Output: succeeded https://files.example/statement.pdf
}

// A job function runs as the work of one request: RunJob marks it processing,
// keeps it alive with heartbeats, and completes or fails it with what the
// function returns.
func ExampleClient_RunJob() {
	ctx := context.Background()
	c, _ := client.New(serviceURL, client.WithAPIKey(apiKey))
	ok, _ := c.Create(ctx, client.CreateParams{Type: "report.build"})
	bad, _ := c.Create(ctx, client.CreateParams{Type: "report.build"})

	final, err := c.RunJob(ctx, ok.ID, func(ctx context.Context, p *client.Reporter) (client.Result, error) {
		for page := 1; page <= 3; page++ {
			p.Report(page*100/3, fmt.Sprintf("page %d of 3", page))
		}
		return &client.Answer{Value: map[string]int{"rows": 42}}, nil
	}, &client.JobOptions{HeartbeatInterval: time.Minute})
	if err != nil {
		panic(err)
	}
	var answer struct{ Rows int }
	_ = final.DecodeAnswer(&answer)
	fmt.Println(final.Status, answer.Rows)

	final, err = c.RunJob(ctx, bad.ID, func(ctx context.Context, p *client.Reporter) (client.Result, error) {
		return nil, &client.Failure{Code: "ERR_UPSTREAM", Reason: "ledger service unavailable"}
	}, nil)
	var f *client.Failure
	fmt.Println(final.Status, final.Failure.Code, errors.As(err, &f))
	// Output:
	// succeeded 42
	// failed ERR_UPSTREAM true
}

// List walks every page of a listing, newest first.
func ExampleClient_List() {
	ctx := context.Background()
	c, _ := client.New(serviceURL, client.WithAPIKey(apiKey))
	for i := range 3 {
		_, _ = c.Create(ctx, client.CreateParams{Type: "invoice.render", Context: map[string]int{"n": i}})
	}
	n := 0
	for r, err := range c.List(ctx, client.ListOptions{Type: "invoice.render", Limit: 2}) {
		if err != nil {
			panic(err)
		}
		fmt.Println(r.Type, r.Status, string(r.Context))
		n++
	}
	fmt.Println(n, "requests")
	// Output:
	// invoice.render queued {"n":2}
	// invoice.render queued {"n":1}
	// invoice.render queued {"n":0}
	// 3 requests
}

// Errors of the service match the package's sentinels.
func ExampleError() {
	ctx := context.Background()
	c, _ := client.New(serviceURL, client.WithAPIKey(apiKey))
	created, _ := c.Create(ctx, client.CreateParams{Type: "statement.export"})
	_, _ = c.Cancel(ctx, created.ID, "not needed")

	_, err := c.Complete(ctx, created.ID, &client.Confirmation{Confirmed: true})
	var e *client.Error
	if errors.Is(err, client.ErrAlreadyTerminal) && errors.As(err, &e) {
		fmt.Println(e.Status, e.Code, e.Request.Status)
	}
	_, err = c.Get(ctx, "01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a")
	fmt.Println(errors.Is(err, client.ErrNotFound))
	// Output:
	// 409 ASYNC_REQUEST_ALREADY_TERMINAL cancelled
	// true
}
