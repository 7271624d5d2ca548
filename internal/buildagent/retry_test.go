package buildagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

func TestTransient(t *testing.T) {
	refused := &url.Error{Op: "Put", URL: "http://127.0.0.1:5000/v2/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", fmt.Errorf("pushing x: %w", refused), true},
		{"connection reset", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{"dropped mid-body", fmt.Errorf("copying: %w", io.ErrUnexpectedEOF), true},
		// What go-containerregistry returned to a builder whose registry was restarting: its
		// https try answered in plain HTTP, its http try was closed before it was written.
		{"closed before the request was written", fmt.Errorf("pulling the base: %w", errors.Join(
			&url.Error{Op: "Get", URL: "https://10.0.2.100:5000/v2/", Err: errors.New("http: server gave HTTP response to HTTPS client")},
			&url.Error{Op: "Get", URL: "http://10.0.2.100:5000/v2/", Err: errors.New("http: server closed idle connection")})), true},
		{"unavailable", &transport.Error{StatusCode: 503}, true},
		{"too many requests", fmt.Errorf("x: %w", &transport.Error{StatusCode: 429}), true},
		{"an upload the restarted registry forgot", &transport.Error{StatusCode: 404, Errors: []transport.Diagnostic{{Code: transport.BlobUploadUnknownErrorCode}}}, true},
		{"unauthorized", &transport.Error{StatusCode: 401}, false},
		{"manifest unknown", &transport.Error{StatusCode: 404, Errors: []transport.Diagnostic{{Code: transport.ManifestUnknownErrorCode}}}, false},
		{"not found", &transport.Error{StatusCode: 404}, false},
		{"cancelled while dialling", &url.Error{Op: "Get", URL: "http://x", Err: context.Canceled}, false},
		{"deadline", context.DeadlineExceeded, false},
		{"bad reference", errors.New(`could not parse reference: "a b"`), false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("%s: transient(%v) = %t, want %t", tc.name, tc.err, got, tc.want)
		}
	}
}

// A forward with no registry behind it accepts and closes: every answer a registry client
// gets from it, whichever way net/http's race goes, is one to wait out.
func TestAForwardWithNoRegistryIsTransient(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ref, err := name.ParseReference(l.Addr().String()+"/anvil/testos:1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		_, err := remote.Head(ref, remote.WithRetryBackoff(remote.Backoff{Steps: 1}))
		if err == nil || !transient(err) {
			t.Fatalf("remote.Head through a closing forward: %v, want a transient error", err)
		}
	}
}

func TestRetrierStopsOnAFinalErrorAndAfterPatience(t *testing.T) {
	r := retrier{first: 10 * time.Millisecond, most: 20 * time.Millisecond, patience: 100 * time.Millisecond}
	unavailable := &transport.Error{StatusCode: 503}
	var log bytes.Buffer

	calls := 0
	err := r.do(context.Background(), &log, "pushing", func() error { calls++; return &transport.Error{StatusCode: 403} })
	if calls != 1 || err == nil {
		t.Errorf("a refusal: %d calls, %v; want 1 call and the error", calls, err)
	}

	calls, start := 0, time.Now()
	err = r.do(context.Background(), &log, "pushing", func() error { calls++; return unavailable })
	if !errors.Is(err, unavailable) || calls < 3 || time.Since(start) > time.Second {
		t.Errorf("a registry that stays away: %d calls in %s, %v; want several within patience, then its error", calls, time.Since(start), err)
	}

	calls = 0
	err = r.do(context.Background(), &log, "pushing", func() error {
		if calls++; calls < 3 {
			return unavailable
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("a registry back on the third try: %d calls, %v", calls, err)
	}
	if !bytes.Contains(log.Bytes(), []byte("pushing: ")) || !bytes.Contains(log.Bytes(), []byte("retrying in 10ms")) {
		t.Errorf("the log does not say what is retried:\n%s", log.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.do(ctx, &log, "pushing", func() error { return unavailable }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
}
