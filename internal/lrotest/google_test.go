package lrotest

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	longrunning "cloud.google.com/go/longrunning/autogen"
	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"github.com/bufbuild/protocompile"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// registerProtos compiles the repository's .proto files (api/proto) and
// registers their messages, as a client that generated code from them would:
// without them, Google's clients cannot decode an Operation's metadata and
// response.
var registerProtos = sync.OnceValue(func() error {
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		ImportPaths: []string{filepath.Join("..", "..", "api", "proto")}})}
	files, err := c.Compile(context.Background(), "asyncstatus/v1/operations.proto")
	if err != nil {
		return err
	}
	msgs := files[0].Messages()
	for i := 0; i < msgs.Len(); i++ {
		if err := protoregistry.GlobalTypes.RegisterMessage(dynamicpb.NewMessageType(msgs.Get(i))); err != nil {
			return err
		}
	}
	return nil
})

// apiKeyTransport adds the API key to every call.
type apiKeyTransport struct{ key string }

func (k apiKeyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return http.DefaultTransport.RoundTrip(r)
}

// operationsClient is Google's Operations REST client on s with key.
func operationsClient(ctx context.Context, t *testing.T, s *service, key string) *longrunning.OperationsClient {
	t.Helper()
	c, err := longrunning.NewOperationsRESTClient(ctx, option.WithEndpoint(s.URL),
		option.WithHTTPClient(&http.Client{Transport: apiKeyTransport{s.Keys[key]}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// field reads a field of a dynamic message by name.
func field(m proto.Message, name string) protoreflect.Value {
	r := m.ProtoReflect()
	return r.Get(r.Descriptor().Fields().ByName(protoreflect.Name(name)))
}

// createOf creates a request of typ and returns its id.
func (s *service) createOf(t *testing.T, typ string) string {
	t.Helper()
	var r struct {
		ID string `json:"id"`
	}
	if code := s.call(t, "POST", "/v1/requests", "rw", `{"type":"`+typ+`"}`, &r); code != 202 {
		t.Fatalf("create: %d", code)
	}
	return r.ID
}

// TestGoogleOperationsClient: Google's generated Operations REST client gets,
// lists (with a filter, across pages), cancels and deletes operations, and
// decodes their metadata and response with the repository's .proto files.
func TestGoogleOperationsClient(t *testing.T) {
	t.Parallel()
	if err := registerProtos(); err != nil {
		t.Fatalf("compile api/proto: %v", err)
	}
	eachBackend(t, func(t *testing.T, s *service) {
		ctx, cancel := context.WithTimeout(context.Background(), clientBound)
		defer cancel()
		ops := operationsClient(ctx, t, s, "admin")

		t.Run("every end", func(t *testing.T) {
			ids := map[domain.Status]string{}
			var wg sync.WaitGroup
			for _, end := range ends {
				typ := scenarioType("google", end)
				found := s.worker(ctx, t, typ, end)
				ids[end] = s.createOf(t, typ)
				wg.Add(1)
				go func() { defer wg.Done(); <-found }()
			}
			// Running: not done, no result, the metadata decoded.
			op, err := ops.GetOperation(ctx, &longrunningpb.GetOperationRequest{Name: "operations/" + ids[domain.StatusExpired]})
			if err != nil {
				t.Fatal(err)
			}
			if op.GetDone() || op.GetResult() != nil || op.GetName() != "operations/"+ids[domain.StatusExpired] {
				t.Fatalf("a queued request's operation: %v", op)
			}
			md, err := op.GetMetadata().UnmarshalNew()
			if err != nil {
				t.Fatalf("metadata: %v", err)
			}
			if field(md, "status").String() != "queued" || field(md, "type").String() != scenarioType("google", domain.StatusExpired) ||
				field(md, "version").Int() != 1 {
				t.Fatalf("metadata %v", md)
			}
			wg.Wait()
			deadline := time.Now().Add(queuedTimeout + 5*time.Second)
			for _, end := range ends {
				for {
					op, err = ops.GetOperation(ctx, &longrunningpb.GetOperationRequest{Name: "operations/" + ids[end]})
					if err != nil {
						t.Fatalf("%s: %v", end, err)
					}
					if op.GetDone() || time.Now().After(deadline) {
						break
					}
					time.Sleep(time.Second) // the pacing schedule's step
				}
				checkEnded(t, end, op)
			}
		})

		t.Run("list with a filter across pages", func(t *testing.T) {
			const typ = "lro.google.list"
			var done []string
			for i := 0; i < 5; i++ {
				id := s.createOf(t, typ)
				if i%2 == 0 {
					if err := ops.CancelOperation(ctx, &longrunningpb.CancelOperationRequest{Name: "operations/" + id}); err != nil {
						t.Fatal(err)
					}
					done = append(done, "operations/"+id)
				}
			}
			it := ops.ListOperations(ctx, &longrunningpb.ListOperationsRequest{Name: "operations",
				Filter: `done = true AND metadata.type = "` + typ + `"`})
			pager := iterator.NewPager(it, 2, "")
			var got []string
			pages := 0
			for {
				var page []*longrunningpb.Operation
				next, err := pager.NextPage(&page)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				for _, op := range page {
					if !op.GetDone() || op.GetError().GetCode() != int32(codes.Canceled) {
						t.Fatalf("listed %v", op)
					}
					got = append(got, op.GetName())
				}
				if next == "" {
					break
				}
			}
			sort.Strings(got)
			sort.Strings(done)
			if pages != 2 || len(got) != 3 || got[0] != done[0] || got[1] != done[1] || got[2] != done[2] {
				t.Fatalf("listed %v in %d pages, want %v in 2", got, pages, done)
			}
			// The iterator alone walks every page too.
			n := 0
			all := ops.ListOperations(ctx, &longrunningpb.ListOperationsRequest{Name: "operations", PageSize: 1,
				Filter: `metadata.type = "` + typ + `" AND done = false`})
			for {
				op, err := all.Next()
				if errors.Is(err, iterator.Done) {
					break
				} else if err != nil {
					t.Fatal(err)
				}
				if op.GetDone() {
					t.Fatalf("done = false listed %v", op)
				}
				n++
			}
			if n != 2 {
				t.Fatalf("done = false listed %d, want 2", n)
			}
		})

		t.Run("cancel, delete and misses", func(t *testing.T) {
			id := s.createOf(t, "lro.google.cancel")
			name := "operations/" + id
			for range 2 { // a second cancel of a cancelled operation is no error
				if err := ops.CancelOperation(ctx, &longrunningpb.CancelOperationRequest{Name: name}); err != nil {
					t.Fatal(err)
				}
			}
			op, err := ops.GetOperation(ctx, &longrunningpb.GetOperationRequest{Name: name})
			if err != nil || !op.GetDone() || op.GetError().GetCode() != int32(codes.Canceled) {
				t.Fatalf("after cancel: %v %v", op, err)
			}
			won := s.createOf(t, "lro.google.cancel")
			if code := s.call(t, "POST", "/v1/requests/"+won+"/complete", "rw", `{"result_type":"answer","result":{}}`, nil); code != 200 {
				t.Fatal(code)
			}
			// FAILED_PRECONDITION is 400 over HTTP, which the REST client reads
			// as InvalidArgument; the status name and reason are in the body.
			err = ops.CancelOperation(ctx, &longrunningpb.CancelOperationRequest{Name: "operations/" + won})
			var ae *apierror.APIError
			if !errors.As(err, &ae) || ae.HTTPCode() != 400 || ae.Reason() != "ASYNC_REQUEST_ALREADY_TERMINAL" || ae.Domain() != "asyncstatus" ||
				!strings.Contains(ae.Unwrap().(*googleapi.Error).Body, `"status":"FAILED_PRECONDITION"`) {
				t.Fatalf("cancel of a succeeded operation: %v, want 400 FAILED_PRECONDITION", err)
			}
			if err := ops.DeleteOperation(ctx, &longrunningpb.DeleteOperationRequest{Name: name}); err != nil {
				t.Fatal(err)
			}
			other := operationsClient(ctx, t, s, "other")
			for _, miss := range []struct {
				what string
				ops  *longrunning.OperationsClient
				name string
			}{
				{"deleted", ops, name},
				{"unknown", ops, "operations/01936f7e-8a3c-7b51-9a56-2f3c1e0d4b7a"},
				{"malformed", ops, "operations/nope"},
				{"another tenant's", other, "operations/" + won},
			} {
				_, err := miss.ops.GetOperation(ctx, &longrunningpb.GetOperationRequest{Name: miss.name})
				if status.Code(err) != codes.NotFound {
					t.Errorf("get %s: %v, want NotFound", miss.what, err)
				}
				if err := miss.ops.DeleteOperation(ctx, &longrunningpb.DeleteOperationRequest{Name: miss.name}); status.Code(err) != codes.NotFound {
					t.Errorf("delete %s: %v, want NotFound", miss.what, err)
				}
			}
		})
	})
}

// checkEnded checks the operation of a request that reached end.
func checkEnded(t *testing.T, end domain.Status, op *longrunningpb.Operation) {
	t.Helper()
	if !op.GetDone() {
		t.Fatalf("%s: not done: %v", end, op)
	}
	md, err := op.GetMetadata().UnmarshalNew()
	if err != nil {
		t.Fatalf("%s: metadata: %v", end, err)
	}
	if field(md, "status").String() != string(end) || !field(md, "done").Bool() {
		t.Fatalf("%s: metadata %v", end, md)
	}
	if end == domain.StatusSucceeded {
		res, err := op.GetResponse().UnmarshalNew()
		if err != nil {
			t.Fatalf("response: %v", err)
		}
		rows := field(res, "result").Message().Interface()
		if field(res, "result_type").String() != "answer" || rows == nil {
			t.Fatalf("response %v", res)
		}
		if op.GetError() != nil {
			t.Fatalf("succeeded with error %v", op.GetError())
		}
		return
	}
	want := map[domain.Status]struct {
		code   codes.Code
		reason string
	}{
		domain.StatusFailed:    {codes.Unknown, "ERR_UPSTREAM"},
		domain.StatusCancelled: {codes.Canceled, "CANCELLED"},
		domain.StatusExpired:   {codes.DeadlineExceeded, "REQUEST_EXPIRED"},
	}[end]
	e := op.GetError()
	if e == nil || codes.Code(e.GetCode()) != want.code || e.GetMessage() == "" || len(e.GetDetails()) != 1 {
		t.Fatalf("%s: error %v, want code %v", end, e, want.code)
	}
	var info errdetails.ErrorInfo
	if err := e.GetDetails()[0].UnmarshalTo(&info); err != nil || info.GetReason() != want.reason || info.GetDomain() != "asyncstatus" {
		t.Fatalf("%s: details %v (%v), want reason %s", end, e.GetDetails(), err, want.reason)
	}
}
