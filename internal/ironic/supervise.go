package ironic

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// Back-off between restarts: doubles from minBackoff up to maxBackoff, and starts over
// once a run lasted stableRun.
const (
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
	stableRun  = time.Minute
)

// service is one supervised program (ironic, ironic-inspector): started in its own
// process group with a pid file, asked whether it answers, and started again when it
// exits or stops answering. Its methods are safe for concurrent use.
type service struct {
	// name is the program, as logs and errors name it.
	name string
	bin  string
	// conf is the --config-file; a leftover process is recognised by it (killStale).
	conf     string
	dir      string
	pidFile  string
	logPath  string
	out      io.Writer
	endpoint string
	// healthy reports whether the program answers an authenticated request now.
	healthy func(context.Context) bool
	// schema is created again before a restart when the database was lost.
	schema schema
	// onRestart, when set, is called each time a restarted program answers again.
	onRestart      func()
	startTimeout   time.Duration
	healthInterval time.Duration
	log            logr.Logger

	mu       sync.Mutex
	cur      *proc
	restarts int
	done     chan struct{} // closed when supervise has stopped the program
}

// supervise restarts the program when it exits or fails healthFailures health checks in
// a row, until ctx ends; then it stops the program.
func (s *service) supervise(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(s.healthInterval)
	defer tick.Stop()
	backoff := minBackoff
	failures := 0
	pr := s.current()
	for {
		select {
		case <-ctx.Done():
			s.terminate(pr, stopGrace)
			s.setCurrent(nil)
			return
		case <-pr.exited:
			s.log.Info("Program exited; restarting", "program", s.name, "pid", pr.pid, "result", errString(pr.err))
		case <-tick.C:
			if s.healthy(ctx) {
				failures = 0
				continue
			}
			if failures++; failures < healthFailures {
				continue
			}
			s.log.Info("Program stopped answering; restarting", "program", s.name, "pid", pr.pid, "failedChecks", failures)
			s.terminate(pr, 0)
		}
		failures = 0
		s.setCurrent(nil)
		if time.Since(pr.started) >= stableRun {
			backoff = minBackoff
		}
		next, ok := s.restart(ctx, &backoff)
		if !ok {
			return
		}
		pr = next
		tick.Reset(s.healthInterval)
	}
}

// restart starts the program again, after the back-off, until it answers or ctx ends.
// The schema is created again first when the database was lost; for Ironic, the Host
// controller then enrolls the nodes again and adopts the provisioned ones.
func (s *service) restart(ctx context.Context, backoff *time.Duration) (*proc, bool) {
	for {
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(*backoff):
		}
		*backoff = min(2**backoff, maxBackoff)
		s.mu.Lock()
		s.restarts++
		s.mu.Unlock()
		if err := s.schema.ensure(ctx, false); err != nil {
			s.log.Error(err, "The database cannot be created; retrying", "program", s.name)
			continue
		}
		pr, err := s.startAndWait(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false
			}
			s.log.Error(err, "The program did not start again; retrying", "program", s.name, "backoff", *backoff)
			continue
		}
		s.setCurrent(pr)
		s.log.Info("Program restarted", "program", s.name, "pid", pr.pid, "restarts", s.Restarts())
		if s.onRestart != nil {
			s.onRestart()
		}
		return pr, true
	}
}

// PID is the running process's id (also its process group), 0 between a crash and the
// restart.
func (s *service) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return 0
	}
	return s.cur.pid
}

// Restarts counts how many times the supervisor started the program again.
func (s *service) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

func (s *service) current() *proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

func (s *service) setCurrent(pr *proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = pr
}

func errString(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}
