package kit

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Lifecycle is a runtime's start and stop. Run reads what the runtime reports before any
// call answers (Open marks that point; calls wait in AwaitReady until it); Close ends Run
// and waits for it. Run may be called once, and not after Close.
type Lifecycle struct {
	name    string // "metal runtime": how errors name the runtime
	reading string // what AwaitReady says a call waited for: "reading its Hosts"

	closing context.Context
	cancel  context.CancelFunc
	ready   chan struct{}
	runDone chan struct{}

	mu      sync.Mutex
	running bool
	closed  bool
}

// NewLifecycle makes the lifecycle of the runtime called name, whose Run starts by reading.
func NewLifecycle(name, reading string) *Lifecycle {
	l := &Lifecycle{name: name, reading: reading, ready: make(chan struct{}), runDone: make(chan struct{})}
	l.closing, l.cancel = context.WithCancel(context.Background())
	return l
}

// Begin marks Run started and returns its context, which ends with ctx or with Close, and
// the function Run defers. It refuses a second Run, or one after Close.
func (l *Lifecycle) Begin(ctx context.Context) (context.Context, func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.running {
		return nil, nil, fmt.Errorf("%s: Run called twice or after Close", l.name)
	}
	l.running = true
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.closing, cancel)
	return ctx, func() {
		stop()
		cancel()
		close(l.runDone)
	}, nil
}

// Open lets the calls answer: Run has read what the runtime reports.
func (l *Lifecycle) Open() { close(l.ready) }

// Ready is closed once Run has read what the runtime reports; calls made before wait for it.
func (l *Lifecycle) Ready() <-chan struct{} { return l.ready }

// Closing ends when Close is called.
func (l *Lifecycle) Closing() context.Context { return l.closing }

// AwaitReady holds a call until Run has read what the runtime reports: before that, every
// answer would be about an empty pool.
func (l *Lifecycle) AwaitReady(ctx context.Context) error {
	select {
	case <-l.ready:
		return nil
	case <-l.closing.Done():
		return status.Errorf(codes.Unavailable, "%s: closed", l.name)
	case <-ctx.Done():
		return status.Errorf(codes.Unavailable, "%s: still %s", l.name, l.reading)
	}
}

// Stop ends Run: the first call closes the lifecycle, runs stop (what ends the runtime's
// own loops and streams) and waits for Run to return, or, when Run never started, runs
// never (what Run would have released). It reports whether this call closed it.
func (l *Lifecycle) Stop(stop, never func()) bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.closed = true
	running := l.running
	l.mu.Unlock()
	l.cancel()
	if stop != nil {
		stop()
	}
	if running {
		<-l.runDone
	} else if never != nil {
		never()
	}
	return true
}
