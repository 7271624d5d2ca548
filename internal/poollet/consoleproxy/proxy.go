package consoleproxy

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	poolletv1alpha1 "github.com/anvil-dev/anvil/api/poollet/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
)

// Server serves the console calls of the Machines on Runtime's pool to the callers Gate
// lets in.
type Server struct {
	poolletv1alpha1.UnimplementedPoolletConsoleServer
	Runtime mriv1alpha1.MachineRuntimeClient
	Gate    *Gate
}

// machineID finds the runtime's machine of the Machine with uid.
func (s *Server) machineID(ctx context.Context, uid string) (string, error) {
	if uid == "" {
		return "", mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "no Machine UID")
	}
	resp, err := s.Runtime.ListMachines(ctx, &mriv1alpha1.ListMachinesRequest{LabelSelector: map[string]string{mri.LabelMachineUID: uid}})
	if err != nil {
		return "", err
	}
	if len(resp.GetMachines()) != 1 {
		return "", mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NOT_FOUND, "this pool runs no machine of Machine %s", uid)
	}
	return resp.GetMachines()[0].GetMetadata().GetId(), nil
}

func (s *Server) ReadConsoleLog(req *mriv1alpha1.ReadConsoleLogRequest, stream grpc.ServerStreamingServer[mriv1alpha1.ConsoleOutput]) error {
	ctx := stream.Context()
	if err := s.Gate.Check(ctx); err != nil {
		return err
	}
	id, err := s.machineID(ctx, req.GetId())
	if err != nil {
		return err
	}
	up := proto.Clone(req).(*mriv1alpha1.ReadConsoleLogRequest)
	up.Id = id
	from, err := s.Runtime.ReadConsoleLog(ctx, up)
	if err != nil {
		return err
	}
	return relay(from.Recv, stream.Send)
}

func (s *Server) AttachConsole(stream grpc.BidiStreamingServer[mriv1alpha1.ConsoleInput, mriv1alpha1.ConsoleOutput]) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	if err := s.Gate.Check(ctx); err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if first.GetOpen() == nil {
		return mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_INVALID, "attach console: the first message must open a console: set open.id")
	}
	id, err := s.machineID(ctx, first.GetOpen().GetId())
	if err != nil {
		return err
	}
	up, err := s.Runtime.AttachConsole(ctx)
	if err != nil {
		return err
	}
	opening := proto.Clone(first).(*mriv1alpha1.ConsoleInput)
	opening.Open.Id = id
	if err := up.Send(opening); err != nil {
		return err
	}
	go func() {
		// The caller's input, until it closes its side (passed on) or the call ends.
		if err := relay(stream.Recv, up.Send); err == nil {
			_ = up.CloseSend()
		}
	}()
	return relay(up.Recv, stream.Send)
}

// relay passes messages from recv to send until recv's stream ends: nil at its clean
// end, else the error (a runtime's status passes unchanged).
func relay[T any](recv func() (T, error), send func(T) error) error {
	for {
		msg, err := recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := send(msg); err != nil {
			if _, ok := status.FromError(err); ok {
				return err
			}
			return status.Error(codes.Unavailable, err.Error())
		}
	}
}
