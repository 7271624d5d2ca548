package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// ConsoleTarget says how a runtime's machines answer at their serial console.
type ConsoleTarget struct {
	// Booted says a machine's console log shows it can take input (the fake's running
	// line, the test OS's ready line).
	Booted func(log []byte) bool
}

// stream is a console stream's output as it arrives, and how it ended.
type stream struct {
	mu    sync.Mutex
	out   bytes.Buffer
	err   error
	ended chan struct{}
	// first is closed when the first message arrives: for an attach, the runtime's word
	// that the console is open (C3).
	first chan struct{}
}

func collect(recv func() (*mriv1alpha1.ConsoleOutput, error)) *stream {
	s := &stream{ended: make(chan struct{}), first: make(chan struct{})}
	go func() {
		defer close(s.ended)
		for n := 0; ; n++ {
			msg, err := recv()
			s.mu.Lock()
			if err != nil {
				s.err = err
				s.mu.Unlock()
				return
			}
			s.out.Write(msg.GetData())
			s.mu.Unlock()
			if n == 0 {
				close(s.first)
			}
		}
	}()
	return s
}

// opened waits for an attach's first message, which says the console is open.
func (s *stream) opened(t *testing.T, within time.Duration, what string) {
	t.Helper()
	select {
	case <-s.first:
	case <-s.ended:
		t.Fatalf("%s ended before the console was open: %v", what, s.err)
	case <-time.After(within):
		t.Fatalf("%s: no first message within %s (C3: it says the console is open)", what, within)
	}
}

func (s *stream) output() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.out.Bytes())
}

// await waits until the output holds want.
func (s *stream) await(t *testing.T, within time.Duration, what string, want []byte) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if bytes.Contains(s.output(), want) {
			return
		}
		select {
		case <-s.ended:
			if bytes.Contains(s.output(), want) {
				return
			}
			t.Fatalf("%s ended (%v) without %q; it had %q", what, s.err, want, tail(s.output()))
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("%s never showed %q within %s; it had %q", what, want, within, tail(s.output()))
}

// end waits for the stream to end and returns how: nil for a clean end.
func (s *stream) end(t *testing.T, within time.Duration, what string) error {
	t.Helper()
	select {
	case <-s.ended:
	case <-time.After(within):
		t.Fatalf("%s did not end within %s", what, within)
	}
	if errors.Is(s.err, io.EOF) {
		return nil
	}
	return s.err
}

func tail(b []byte) []byte { return b[max(len(b)-400, 0):] }

// consoleStream is an AttachConsole stream.
type consoleStream struct {
	send   func(*mriv1alpha1.ConsoleInput) error
	close  func() error
	cancel context.CancelFunc
	*stream
}

func (s *suite) attach(t *testing.T, id string, write bool) *consoleStream {
	t.Helper()
	c, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := s.c.AttachConsole(c)
	if err != nil {
		t.Fatalf("AttachConsole: %v", err)
	}
	if err := st.Send(&mriv1alpha1.ConsoleInput{Open: &mriv1alpha1.ConsoleOpen{Id: id, Write: write}}); err != nil {
		t.Fatalf("AttachConsole: opening: %v", err)
	}
	return &consoleStream{send: st.Send, close: st.CloseSend, cancel: cancel, stream: collect(st.Recv)}
}

func (a *consoleStream) typeLine(t *testing.T, line string) {
	t.Helper()
	if err := a.send(&mriv1alpha1.ConsoleInput{Data: []byte(line + "\r")}); err != nil {
		t.Fatalf("typing %q: %v", line, err)
	}
}

func (s *suite) follow(t *testing.T, req *mriv1alpha1.ReadConsoleLogRequest) *stream {
	t.Helper()
	c, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := s.c.ReadConsoleLog(c, req)
	if err != nil {
		t.Fatalf("ReadConsoleLog: %v", err)
	}
	return collect(st.Recv)
}

// readLog reads the whole log (or its last lines) once.
func (s *suite) readLog(t *testing.T, id string, lines int64) []byte {
	t.Helper()
	st := s.follow(t, &mriv1alpha1.ReadConsoleLogRequest{Id: id, TailLines: lines})
	if err := st.end(t, s.target.Timeout, "ReadConsoleLog without follow"); err != nil {
		t.Fatalf("ReadConsoleLog: %v", err)
	}
	return st.output()
}

// consoleNone: a runtime without consoles says so for both calls.
func (s *suite) consoleNone(t *testing.T) {
	err := s.follow(t, &mriv1alpha1.ReadConsoleLogRequest{Id: "any"}).end(t, s.target.Timeout, "ReadConsoleLog")
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("ReadConsoleLog of a runtime without consoles: %v, want UNIMPLEMENTED (C1)", err)
	}
	err = s.attach(t, "any", false).end(t, s.target.Timeout, "AttachConsole")
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("AttachConsole of a runtime without consoles: %v, want UNIMPLEMENTED (C1)", err)
	}
}

// consoleRefusals: unknown ids and malformed streams (C1, C3).
func (s *suite) consoleRefusals(t *testing.T) {
	wantReason(t, s.follow(t, &mriv1alpha1.ReadConsoleLogRequest{Id: "no-such-machine"}).end(t, s.target.Timeout, "ReadConsoleLog"),
		codes.NotFound, mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND)
	wantReason(t, s.follow(t, &mriv1alpha1.ReadConsoleLogRequest{Id: "no-such-machine", TailLines: -1}).end(t, s.target.Timeout, "ReadConsoleLog"),
		codes.InvalidArgument, mriv1alpha1.ErrorReason_ERROR_REASON_INVALID)
	wantReason(t, s.attach(t, "no-such-machine", true).end(t, s.target.Timeout, "AttachConsole"),
		codes.NotFound, mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND)
	// A first message that does not open.
	c, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := s.c.AttachConsole(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&mriv1alpha1.ConsoleInput{Data: []byte("ls\r")}); err != nil {
		t.Fatal(err)
	}
	wantReason(t, collect(st.Recv).end(t, s.target.Timeout, "AttachConsole without open"),
		codes.InvalidArgument, mriv1alpha1.ErrorReason_ERROR_REASON_INVALID)
}

// consoleUse: one machine's log and console through its life (C2-C5).
func (s *suite) consoleUse(t *testing.T) {
	m := s.create(t, s.newMachine(t))
	id := m.Metadata.Id
	s.await(t, id, "ran", settledIn(mriv1alpha1.MachineState_MACHINE_STATE_RUNNING))
	deadline := time.Now().Add(s.target.Timeout)
	var log []byte
	for log = s.readLog(t, id, 0); !s.target.Console.Booted(log); log = s.readLog(t, id, 0) {
		if time.Now().After(deadline) {
			t.Fatalf("machine %s's console log never showed it booted within %s: %q", id, s.target.Timeout, tail(log))
		}
		time.Sleep(100 * time.Millisecond)
	}

	// C2: the last line is the log's end, and no more than one line.
	last := s.readLog(t, id, 1)
	if full := s.readLog(t, id, 0); !bytes.HasSuffix(full, last) || bytes.Count(bytes.TrimSuffix(last, []byte("\n")), []byte("\n")) > 0 {
		t.Errorf("tail_lines 1 gave %q, not the last line of %q", last, tail(full))
	}

	follower := s.follow(t, &mriv1alpha1.ReadConsoleLogRequest{Id: id, TailLines: 1, Follow: true})
	reader := s.attach(t, id, false)
	writer := s.attach(t, id, true)
	reader.opened(t, s.target.Timeout, "a reader")
	writer.opened(t, s.target.Timeout, "a writer")
	// C4: one writer at a time; the second is refused and the first keeps typing.
	wantReason(t, s.attach(t, id, true).end(t, s.target.Timeout, "a second writer"),
		codes.FailedPrecondition, mriv1alpha1.ErrorReason_ERROR_REASON_CONSOLE_BUSY)
	token := []byte(fmt.Sprintf("conformance-%d", time.Now().UnixNano()))
	writer.typeLine(t, "echo "+string(token))
	for what, st := range map[string]*stream{"the writer": writer.stream, "a reader": reader.stream, "a follower of the log": follower} {
		st.await(t, s.target.Timeout, what, token)
	}
	// C3: a reader may not type.
	if err := reader.send(&mriv1alpha1.ConsoleInput{Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	wantReason(t, reader.end(t, s.target.Timeout, "a reader that typed"), codes.InvalidArgument, mriv1alpha1.ErrorReason_ERROR_REASON_INVALID)
	// A writer that leaves frees the console for the next.
	if err := writer.close(); err != nil {
		t.Fatal(err)
	}
	if err := writer.end(t, s.target.Timeout, "a writer that closed its side"); err != nil {
		t.Fatalf("a writer that closed its side: %v, want a clean end", err)
	}
	next := s.attach(t, id, true)
	next.opened(t, s.target.Timeout, "the next writer")
	again := []byte(fmt.Sprintf("again-%d", time.Now().UnixNano()))
	next.typeLine(t, "echo "+string(again))
	next.await(t, s.target.Timeout, "the next writer", again)
	// C7: since_seconds starts at what was written in that last while: a line typed after
	// a quiet spell is in the last two seconds, the line before the spell is not.
	time.Sleep(3500 * time.Millisecond)
	late := []byte(fmt.Sprintf("late-%d", time.Now().UnixNano()))
	next.typeLine(t, "echo "+string(late))
	next.await(t, s.target.Timeout, "the next writer", late)
	recent := s.follow(t, &mriv1alpha1.ReadConsoleLogRequest{Id: id, SinceSeconds: 2})
	if err := recent.end(t, s.target.Timeout, "since_seconds 2"); err != nil {
		t.Fatal(err)
	}
	if got := recent.output(); !bytes.Contains(got, late) || bytes.Contains(got, again) {
		t.Errorf("since_seconds 2 gave %q: want the line typed just now (%s) and not the one typed 3.5 s before (%s)", tail(got), late, again)
	}
	wantReason(t, s.follow(t, &mriv1alpha1.ReadConsoleLogRequest{Id: id, SinceSeconds: -1}).end(t, s.target.Timeout, "since_seconds -1"),
		codes.InvalidArgument, mriv1alpha1.ErrorReason_ERROR_REASON_INVALID)
	next.cancel()

	// A machine powered off takes no input; its log can still be read.
	if _, err := s.c.UpdateMachinePower(ctx(t), &mriv1alpha1.UpdateMachinePowerRequest{Id: id, Power: mriv1alpha1.Power_POWER_OFF}); err != nil {
		t.Fatal(err)
	}
	s.await(t, id, "shut down", settledIn(mriv1alpha1.MachineState_MACHINE_STATE_SHUTDOWN))
	wantReason(t, s.attach(t, id, true).end(t, s.target.Timeout, "a writer of a machine powered off"),
		codes.FailedPrecondition, mriv1alpha1.ErrorReason_ERROR_REASON_NO_CONSOLE)
	if got := s.readLog(t, id, 0); !bytes.Contains(got, again) {
		t.Errorf("the log of a machine powered off lost what it wrote: %q", tail(got))
	}

	// C2: a followed log ends once its machine is gone.
	if _, err := s.c.DeleteMachine(ctx(t), &mriv1alpha1.DeleteMachineRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	if err := follower.end(t, s.target.Timeout, "a followed log of a deleted machine"); err != nil {
		t.Errorf("a followed log of a deleted machine ended with %v, want a clean end", err)
	}
}
