package buildagent

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// registryRetry is how the agent waits out a registry it cannot reach. The registry a builder
// talks to restarts with the manager that runs it (anvil dev runs both in one process), and a
// builder that gave up in that minute would lose its whole attempt: the controller could only
// start the architecture again on a new Machine. It gives up well inside an attempt's
// default timeout (30 minutes), so a registry that stays away still ends in an Error result.
var registryRetry = retrier{first: time.Second, most: 15 * time.Second, patience: 10 * time.Minute}

// retrier retries an operation while its error is transient, waiting first, then twice as
// long each time up to most, until patience has passed since the first try.
type retrier struct {
	first, most, patience time.Duration
}

// do runs op, named what in the log, until it succeeds, fails for good, or patience runs out.
func (r retrier) do(ctx context.Context, log io.Writer, what string, op func() error) error {
	start, wait := time.Now(), r.first
	for {
		err := op()
		if err == nil || !transient(err) || time.Since(start)+wait > r.patience {
			return err
		}
		say(log, "%s: %v; retrying in %s", what, err, wait)
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, r.most)
	}
}

// transient reports whether err is one a registry that is restarting or overloaded gives:
// no connection, a dropped one, a 5xx or 429 answer, or an upload it forgot. A refusal
// (4xx), a bad reference or a cancelled context is final.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var te *transport.Error
	if errors.As(err, &te) {
		if te.StatusCode >= http.StatusInternalServerError || te.StatusCode == http.StatusTooManyRequests {
			return true
		}
		// An upload begun before the registry restarted is unknown to it: a new push
		// starts a new one.
		for _, d := range te.Errors {
			if d.Code == transport.BlobUploadUnknownErrorCode {
				return true
			}
		}
		return false
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || closedBeforeAnswering(err) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// closedBeforeAnswering reports net/http's error for a connection the server closed before
// the request was written. A builder sees it when the registry behind its guest forward is
// down: slirp accepts the guest's connection at once, and the forward closes it on finding no
// registry. net/http does not export the error, and go-containerregistry joins its https and
// http tries in a list errors.As cannot walk, so it is recognised by its text.
func closedBeforeAnswering(err error) bool {
	return strings.Contains(err.Error(), "http: server closed idle connection")
}
