package consoleapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	gwebsocket "github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport/websocket"
)

// Session is a Machine's console attached through the console API by a program rather
// than a terminal (a broker passing AttachConsole on to the cluster below it): the
// v5.channel.k8s.io streams over one WebSocket, read and written message by message.
type Session struct {
	conn *gwebsocket.Conn
	// writeMu orders writes: gorilla's connection takes one writer at a time.
	writeMu sync.Mutex
}

// streamClose is v5.channel.k8s.io's signal that a stream (stdin) is closed.
const streamClose = 255

// OpenSession attaches to Machine ns/name's console through cfg's API server, to type
// (write) or only to watch. A refusal is the status the console server answered
// (MRIError reads its reason); once it returns, the console is open.
func OpenSession(ctx context.Context, cfg *rest.Config, ns, name string, write bool) (*Session, error) {
	rt, holder, err := websocket.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	url := strings.TrimSuffix(cfg.Host, "/") + machinePath(ns, name, "console") + "?stdin=" + strconv.FormatBool(write)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	conn, err := websocket.Negotiate(rt, holder, req, "v5.channel.k8s.io")
	if err != nil {
		return nil, err
	}
	return &Session{conn: conn}, nil
}

// Write types p at the console.
func (s *Session) Write(p []byte) (int, error) {
	if err := s.send(append([]byte{stdinChannel}, p...)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// CloseInput says nothing more will be typed; the server then ends the session.
func (s *Session) CloseInput() error { return s.send([]byte{streamClose, stdinChannel}) }

func (s *Session) send(frame []byte) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.conn.WriteMessage(gwebsocket.BinaryMessage, frame)
}

// Next returns the console's next output: io.EOF once the session ended as it should, the
// server's status as an error when it ended otherwise. One caller at a time.
func (s *Session) Next() ([]byte, error) {
	for {
		_, frame, err := s.conn.ReadMessage()
		if err != nil {
			if gwebsocket.IsCloseError(err, gwebsocket.CloseNormalClosure) {
				return nil, io.EOF
			}
			return nil, err
		}
		if len(frame) < 2 {
			continue // an empty message carries nothing
		}
		switch frame[0] {
		case stdoutChannel:
			return frame[1:], nil
		case errorChannel:
			st := &metav1.Status{}
			if err := json.Unmarshal(frame[1:], st); err != nil {
				return nil, fmt.Errorf("the console ended with an answer that is not a Status: %q", frame[1:])
			}
			if st.Status == metav1.StatusSuccess {
				return nil, io.EOF
			}
			return nil, &apierrors.StatusError{ErrStatus: *st}
		}
	}
}

// Close ends the session.
func (s *Session) Close() error { return s.conn.Close() }
