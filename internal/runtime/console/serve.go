package console

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// Machine is one machine's console, as its runtime gives it.
type Machine struct {
	Log Log
	// Gone says the machine has been deleted: a followed log then ends.
	Gone func() bool
	// OpenInput connects a writer to the machine's serial port. It fails with a
	// NO_CONSOLE reason saying why when the machine cannot take input now (not running).
	OpenInput func(ctx context.Context) (io.WriteCloser, error)
}

// Server answers the console calls for a runtime: Lookup finds a machine's console
// (NOT_FOUND for an unknown id, NO_CONSOLE for one without a log).
type Server struct {
	Lookup func(id string) (Machine, error)

	mu      sync.Mutex
	writers map[string]bool
}

// ReadConsoleLog serves the MRI call of that name (CONTRACT.md C2).
func (s *Server) ReadConsoleLog(req *mriv1alpha1.ReadConsoleLogRequest, stream grpc.ServerStreamingServer[mriv1alpha1.ConsoleOutput]) error {
	if err := CheckLogRequest(req); err != nil {
		return err
	}
	m, err := s.Lookup(req.GetId())
	if err != nil {
		return err
	}
	defer closeLog(m.Log)
	from := int64(0)
	if req.GetTailLines() > 0 {
		size, err := m.Log.Size()
		if err != nil {
			return status.Errorf(codes.Internal, "machine %s's console log: %v", req.GetId(), err)
		}
		if from, err = TailStart(m.Log, size, req.GetTailLines()); err != nil {
			return status.Errorf(codes.Internal, "machine %s's console log: %v", req.GetId(), err)
		}
	}
	if since := req.GetSinceSeconds(); since > 0 {
		t, ok := m.Log.(timed)
		if !ok {
			return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "machine %s's console log keeps no times: since_seconds cannot be served", req.GetId())
		}
		at, err := t.SizeAt(time.Now().Add(-time.Duration(since) * time.Second))
		if err != nil {
			return status.Errorf(codes.Internal, "machine %s's console log times: %v", req.GetId(), err)
		}
		from = max(from, at) // with tail_lines too, the later start
	}
	return sendLog(stream.Context(), req.GetId(), m, from, req.GetFollow(), stream.Send)
}

// CheckLogRequest says what is INVALID in a ReadConsoleLog request, if anything.
func CheckLogRequest(req *mriv1alpha1.ReadConsoleLogRequest) error {
	if req.GetId() == "" {
		return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "read console log: no machine id")
	}
	if req.GetTailLines() < 0 {
		return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "read console log: tail_lines %d is below zero", req.GetTailLines())
	}
	if req.GetSinceSeconds() < 0 {
		return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "read console log: since_seconds %d is below zero", req.GetSinceSeconds())
	}
	return nil
}

func sendLog(ctx context.Context, id string, m Machine, from int64, follow bool, send func(*mriv1alpha1.ConsoleOutput) error) error {
	err := Copy(ctx, m.Log, from, follow, m.Gone, func(p []byte) error {
		return send(&mriv1alpha1.ConsoleOutput{Data: p})
	})
	if err != nil && status.Code(err) == codes.Unknown {
		return status.Errorf(codes.Internal, "machine %s's console log: %v", id, err)
	}
	return err
}

// AttachConsole serves the MRI call of that name (CONTRACT.md C3, C4).
func (s *Server) AttachConsole(stream grpc.BidiStreamingServer[mriv1alpha1.ConsoleInput, mriv1alpha1.ConsoleOutput]) error {
	first, err := RecvOpen(stream)
	if err != nil {
		return err
	}
	open := first.GetOpen()
	id := open.GetId()
	m, err := s.Lookup(id)
	if err != nil {
		return err
	}
	defer closeLog(m.Log)
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	var input io.WriteCloser
	if open.GetWrite() {
		if !s.take(id) {
			return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_CONSOLE_BUSY,
				"machine %s's console has a writer already (one at a time): attach to read, or again once it has left", id)
		}
		defer s.release(id)
		if input, err = m.OpenInput(ctx); err != nil {
			return err
		}
		defer input.Close()
	}
	// Output from this moment on: what came before is in the log.
	from, err := m.Log.Size()
	if err != nil {
		return status.Errorf(codes.Internal, "machine %s's console log: %v", id, err)
	}
	// An empty first message says the console is open (and, for a writer, held).
	if err := stream.Send(&mriv1alpha1.ConsoleOutput{}); err != nil {
		return err
	}
	inputErr := make(chan error, 1)
	go func() {
		err := CarryInput(id, first.GetData(), input, stream)
		inputErr <- err
		cancel()
	}()
	outErr := sendLog(ctx, id, m, from, true, stream.Send)
	select {
	case err := <-inputErr:
		return err
	default:
		// The output ended first (the machine is gone, or the caller): the input
		// goroutine's Recv returns once this handler has.
		return outErr
	}
}

// RecvOpen receives an AttachConsole stream's first message, INVALID unless it opens a
// console.
func RecvOpen(stream grpc.BidiStreamingServer[mriv1alpha1.ConsoleInput, mriv1alpha1.ConsoleOutput]) (*mriv1alpha1.ConsoleInput, error) {
	first, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "attach console: the stream ended before its first message opened a console")
	}
	if err != nil {
		return nil, err
	}
	if first.GetOpen().GetId() == "" {
		return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "attach console: the first message must open a console: set open.id")
	}
	return first, nil
}

// CarryInput writes what the caller types to input until the caller closes its side
// (nil) or breaks a rule (INVALID); first is the opening message's data.
func CarryInput(id string, first []byte, input io.Writer, stream grpc.BidiStreamingServer[mriv1alpha1.ConsoleInput, mriv1alpha1.ConsoleOutput]) error {
	data := first
	for {
		if len(data) > 0 {
			if input == nil {
				return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "machine %s's console was opened to read: open it with write to type", id)
			}
			if _, err := input.Write(data); err != nil {
				return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NO_CONSOLE, "machine %s's console stopped taking input (the machine stopped or restarted): attach again", id)
			}
		}
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if msg.GetOpen() != nil {
			return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "machine %s's console is open already: only the first message opens", id)
		}
		data = msg.GetData()
	}
}

func (s *Server) take(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writers[id] {
		return false
	}
	if s.writers == nil {
		s.writers = map[string]bool{}
	}
	s.writers[id] = true
	return true
}

func (s *Server) release(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.writers, id)
}

// closeLog closes a log that holds a file; one kept in memory needs no closing.
func closeLog(log Log) {
	if c, ok := log.(io.Closer); ok {
		_ = c.Close()
	}
}
