package ironic

import (
	"context"
	"time"
)

// Back-off between restarts: doubles from minBackoff up to maxBackoff, and starts over
// once a run lasted stableRun.
const (
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
	stableRun  = time.Minute
)

// supervise restarts Ironic when it exits or fails healthFailures health checks in a
// row, until ctx ends; then it stops Ironic.
func (i *Ironic) supervise(ctx context.Context) {
	defer close(i.done)
	tick := time.NewTicker(i.cfg.HealthInterval)
	defer tick.Stop()
	backoff := minBackoff
	failures := 0
	pr := i.current()
	for {
		select {
		case <-ctx.Done():
			i.terminate(pr, stopGrace)
			i.setCurrent(nil)
			return
		case <-pr.exited:
			i.cfg.Logger.Info("Ironic exited; restarting", "pid", pr.pid, "result", errString(pr.err))
		case <-tick.C:
			if i.Healthy(ctx) {
				failures = 0
				continue
			}
			if failures++; failures < healthFailures {
				continue
			}
			i.cfg.Logger.Info("Ironic stopped answering; restarting", "pid", pr.pid, "failedChecks", failures)
			i.terminate(pr, 0)
		}
		failures = 0
		i.setCurrent(nil)
		if time.Since(pr.started) >= stableRun {
			backoff = minBackoff
		}
		next, ok := i.restart(ctx, &backoff)
		if !ok {
			return
		}
		pr = next
		tick.Reset(i.cfg.HealthInterval)
	}
}

// restart starts Ironic again, after the back-off, until it answers or ctx ends. The
// schema is created again first when the database was lost; the Host controller then
// enrolls the nodes again and adopts the provisioned ones.
func (i *Ironic) restart(ctx context.Context, backoff *time.Duration) (*proc, bool) {
	for {
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(*backoff):
		}
		*backoff = min(2**backoff, maxBackoff)
		i.mu.Lock()
		i.restarts++
		i.mu.Unlock()
		if err := ensureSchema(ctx, i.dbsync, i.p, false); err != nil {
			i.cfg.Logger.Error(err, "Ironic's database cannot be created; retrying")
			continue
		}
		pr, err := i.startAndWait(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false
			}
			i.cfg.Logger.Error(err, "Ironic did not start again; retrying", "backoff", *backoff)
			continue
		}
		i.setCurrent(pr)
		i.cfg.Logger.Info("Ironic restarted", "pid", pr.pid, "restarts", i.Restarts())
		if i.cfg.OnRestart != nil {
			i.cfg.OnRestart()
		}
		return pr, true
	}
}

func (i *Ironic) current() *proc {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.cur
}

func (i *Ironic) setCurrent(pr *proc) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.cur = pr
}

func errString(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}
