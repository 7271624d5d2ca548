package nodeagent

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Backoff of retry: a guest's network may come up after the agent starts, and an apiserver
// restarts; neither is a reason to give up.
const (
	firstBackoff = time.Second
	maxBackoff   = 10 * time.Second
)

// retry runs fn until it succeeds, fails with an error that is not transient (returned), or
// ctx ends. Each transient failure is logged, saying what was being done.
func retry(ctx context.Context, log io.Writer, what string, fn func() error) error {
	wait := firstBackoff
	for {
		err := fn()
		if err == nil || !transient(err) {
			return err
		}
		fmt.Fprintf(log, "anvil-node-agent: %s: %v (retrying in %s)\n", what, err, wait)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, maxBackoff)
	}
}
