package broker

import (
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/consoleapi"
	"github.com/anvil-dev/anvil/internal/runtime/console"
)

// The console calls are passed on to the cluster below (docs/console.md): the downstream
// Machine's machines/consolelog and machines/console, through its kube-apiserver, as the
// broker's own identity there (its Role grants both in its namespace). The downstream
// runtime keeps the log and the one-writer rule; the broker holds no console state.

// ReadConsoleLog serves the MRI call of that name (CONTRACT.md C2) from the downstream
// Machine's console log.
func (r *Runtime) ReadConsoleLog(req *mriv1alpha1.ReadConsoleLogRequest, stream grpc.ServerStreamingServer[mriv1alpha1.ConsoleOutput]) error {
	if err := console.CheckLogRequest(req); err != nil {
		return err
	}
	_, name, err := r.machine(req.GetId())
	if err != nil {
		return err
	}
	if r.opts.Config == nil {
		return status.Error(codes.Unimplemented, "this broker was given no downstream configuration for consoles")
	}
	body, err := consoleapi.OpenLog(stream.Context(), r.opts.Config, r.opts.Namespace, name,
		consoleapi.LogOptions{Follow: req.GetFollow(), TailLines: req.GetTailLines(), SinceSeconds: req.GetSinceSeconds()})
	if err != nil {
		return consoleapi.MRIError(err)
	}
	defer body.Close()
	// One buffer for the whole stream (C5): the downstream sends at the caller's pace.
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if err := stream.Send(&mriv1alpha1.ConsoleOutput{Data: buf[:n]}); err != nil {
				return err
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil && stream.Context().Err() != nil:
			return nil // the caller ended it
		case err != nil:
			return status.Errorf(codes.Unavailable, "the downstream console log of machine %s: %v", req.GetId(), err)
		}
	}
}

// AttachConsole serves the MRI call of that name (CONTRACT.md C3, C4) by attaching to
// the downstream Machine's console: its refusals (busy, not running) come back with
// their reasons.
func (r *Runtime) AttachConsole(stream grpc.BidiStreamingServer[mriv1alpha1.ConsoleInput, mriv1alpha1.ConsoleOutput]) error {
	first, err := console.RecvOpen(stream)
	if err != nil {
		return err
	}
	id, write := first.GetOpen().GetId(), first.GetOpen().GetWrite()
	_, name, err := r.machine(id)
	if err != nil {
		return err
	}
	if r.opts.Config == nil {
		return status.Error(codes.Unimplemented, "this broker was given no downstream configuration for consoles")
	}
	session, err := consoleapi.OpenSession(stream.Context(), r.opts.Config, r.opts.Namespace, name, write)
	if err != nil {
		return consoleapi.MRIError(err)
	}
	defer session.Close()
	// An empty first message says the console is open (and, for a writer, held).
	if err := stream.Send(&mriv1alpha1.ConsoleOutput{}); err != nil {
		return err
	}
	inputErr := make(chan error, 1)
	go func() {
		var input io.Writer
		if write {
			input = session
		}
		err := console.CarryInput(id, first.GetData(), input, stream)
		if err == nil {
			// The caller closed its side: so does the broker downstream, which ends the
			// session there and then here.
			err = session.CloseInput()
		}
		inputErr <- err
		if err != nil {
			session.Close() // after the send: the output loop then finds why
		}
	}()
	for {
		out, err := session.Next()
		if err != nil {
			select {
			case inErr := <-inputErr:
				if inErr != nil && !errors.Is(err, io.EOF) {
					return inErr // the caller broke a rule: the session was closed for it
				}
			default:
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return consoleapi.MRIError(err)
		}
		if err := stream.Send(&mriv1alpha1.ConsoleOutput{Data: out}); err != nil {
			return err
		}
	}
}
