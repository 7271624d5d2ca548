package consoleapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// The channels of kubectl's streaming protocol (remotecommand) a console uses: what is
// typed comes on stdin, the console's output goes out on stdout, and how the session
// ended on the error channel, as a metav1.Status.
const (
	stdinChannel = iota
	stdoutChannel
	stderrChannel
	errorChannel
	resizeChannel
)

// consoleProtocols are the WebSocket subprotocols served: v5 adds the client's "stdin
// closed" signal; v4 is what older clients ask for.
func consoleProtocols() map[string]wsstream.ChannelProtocolConfig {
	channels := []wsstream.ChannelType{stdinChannel: wsstream.ReadChannel, stdoutChannel: wsstream.WriteChannel,
		stderrChannel: wsstream.IgnoreChannel, errorChannel: wsstream.WriteChannel, resizeChannel: wsstream.IgnoreChannel}
	return map[string]wsstream.ChannelProtocolConfig{
		"v5.channel.k8s.io": {Binary: true, Channels: channels},
		"v4.channel.k8s.io": {Binary: true, Channels: channels},
	}
}

// console serves machines/console: the Machine's serial console over a WebSocket, as
// kubectl exec's streams. stdin=false opens it to read only; otherwise the caller types,
// one writer at a time (a second is refused, the first keeps it). The console is opened
// at the pool before the upgrade, so a refusal is an ordinary HTTP answer.
func (s *Server) console(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.allowed(w, r, ns, name, "console") {
		return
	}
	write, ok := boolParam(w, r.URL.Query(), "stdin", true)
	if !ok {
		return
	}
	if !wsstream.IsWebSocketRequest(r) {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest,
			"machines/console is a WebSocket (v5.channel.k8s.io, as kubectl exec speaks): use anvil console, or machines/consolelog for the log")
		return
	}
	m, ep, found := s.machineConsole(w, r.Context(), ns, name)
	if !found {
		return
	}
	stream, done, err := s.pools.attach(r.Context(), ep, &mriv1alpha1.ConsoleOpen{Id: string(m.UID), Write: write})
	if err != nil {
		writeGRPCError(w, ns, name, err)
		return
	}
	defer done()
	conn := wsstream.NewConn(consoleProtocols())
	_, channels, err := conn.Open(w, r)
	if err != nil {
		return // the upgrade failed; the response is written
	}
	defer conn.Close()
	go func() {
		// What is typed, until the caller closes stdin or the socket; then the session
		// ends at the pool too, a watcher's as well (it would otherwise wait for the
		// machine's next output to find its caller gone).
		_, _ = io.Copy(consoleInput{stream}, channels[stdinChannel])
		_ = stream.CloseSend()
	}()
	var out error
	for {
		msg, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				out = err
			}
			break
		}
		if _, err := channels[stdoutChannel].Write(msg.GetData()); err != nil {
			return // the caller is gone
		}
	}
	writeEnd(channels[errorChannel], ns, name, out)
}

// consoleInput is what a caller types, sent to the console.
type consoleInput struct {
	stream grpc.BidiStreamingClient[mriv1alpha1.ConsoleInput, mriv1alpha1.ConsoleOutput]
}

func (c consoleInput) Write(p []byte) (int, error) {
	if err := c.stream.Send(&mriv1alpha1.ConsoleInput{Data: append([]byte(nil), p...)}); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeEnd says on the error channel how the session ended: success, or why not, as the
// console API would have answered the pool's error before the session.
func writeEnd(ch io.Writer, ns, name string, err error) {
	st := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess}
	if err != nil {
		st = grpcStatus(ns, name, err)
		st.Message = "the console ended: " + st.Message
	}
	raw, _ := json.Marshal(st)
	_, _ = ch.Write(raw)
}
