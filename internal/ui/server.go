// Package ui is anvil ui (docs/ui.md): the fleet in a browser, live, as the user of one
// kubeconfig may see it. One process serves one user on loopback: it watches what that
// user may list (Scope, Watch), keeps the rows the pages draw (Feed) and sends them to the
// browser as server-sent events; a Machine's Events and console log are read on demand,
// with the same credentials.
package ui

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/anvil-dev/anvil/internal/consoleapi"
)

//go:embed assets
var assets embed.FS

// sessionPrefix starts every path served: /s/<token>/. The token is in the path, not in a
// cookie: a browser sends a host's cookies to every port of it, so a cookie would reach
// any other server on 127.0.0.1 the user visits, and with it the fleet. Pages use relative
// addresses and send no Referer.
const sessionPrefix = "/s/"

// feedBuffer is how many changes a browser may fall behind by before it is disconnected
// (and reconnects for a new snapshot): the bound on the memory a slow browser holds.
const feedBuffer = 4096

// Server serves the pages, the feed and the per-Machine streams.
type Server struct {
	Feed  *Feed
	Scope Scope
	// User is who the kubeconfig says the user is, for the page's header.
	User string
	// Clientset reads Events and console logs as the user.
	Clientset kubernetes.Interface
	// Config attaches to consoles as the user.
	Config *rest.Config
	// Token is the secret in the path of the address the user opens (Start prints it):
	// without it nothing is served, so another account on the host cannot read the fleet
	// through this process's credentials.
	Token string
}

// Path is where the session's pages are: the address to open, after the host.
func (s *Server) Path() string { return sessionPrefix + s.Token + "/" }

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		index, _ := fs.ReadFile(static, "index.html")
		_, _ = w.Write(index)
	})
	mux.HandleFunc("GET /api/me", s.me)
	mux.HandleFunc("GET /api/feed", s.feed)
	mux.HandleFunc("GET /api/events", s.events)
	mux.HandleFunc("GET /api/consolelog", s.consoleLog)
	mux.HandleFunc("GET /api/console", s.console)
	return s.guard(mux)
}

// guard lets in only requests for this host by name (a page elsewhere that points a name
// of its own at 127.0.0.1 is refused: DNS rebinding), GETs, under the session's path.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			http.Error(w, "anvil ui answers only to 127.0.0.1, [::1] and localhost", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodGet {
			http.Error(w, "anvil ui only reads", http.StatusMethodNotAllowed)
			return
		}
		token, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, sessionPrefix), "/")
		if strings.HasPrefix(r.URL.Path, sessionPrefix) && !ok && s.tokenOK(token) {
			http.Redirect(w, r, s.Path(), http.StatusMovedPermanently) // the pages' relative addresses need the slash
			return
		}
		if !strings.HasPrefix(r.URL.Path, sessionPrefix) || !ok || !s.tokenOK(token) {
			http.Error(w, "open the address anvil ui printed (it carries the session's token)", http.StatusUnauthorized)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path, r2.URL.RawPath = "/"+rest, ""
		// connect-src 'self' covers the console's WebSocket on this origin (ws: of the same host).
		w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r2)
	})
}

func (s *Server) tokenOK(t string) bool {
	return s.Token != "" && subtle.ConstantTimeCompare([]byte(t), []byte(s.Token)) == 1
}

func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// me is who the user is and what the UI watches for them: the pages hide what is not.
func (s *Server) me(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"user": s.User, "scope": s.Scope})
}

// feed streams every row, then each change, as server-sent events: each message a JSON
// array of Changes (the first the snapshot, then what came since the last message).
func (s *Server) feed(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	snapshot, sub := s.Feed.Subscribe(feedBuffer)
	defer sub.Cancel()
	startEvents(w)
	if snapshot == nil {
		snapshot = []Change{}
	}
	if err := sendEvent(w, "snapshot", snapshot); err != nil {
		return
	}
	flusher.Flush()
	keepalive := time.NewTicker(20 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keepalive.C:
			// A comment line: proxies and the browser see the stream is alive.
			if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
				return
			}
		case c, ok := <-sub.C:
			if !ok {
				return // fell behind: the browser reconnects for a new snapshot
			}
			batch := []Change{c}
			for more := true; more && len(batch) < 512; {
				select {
				case c, ok := <-sub.C:
					if !ok {
						return
					}
					batch = append(batch, c)
				default:
					more = false
				}
			}
			if err := sendEvent(w, "changes", batch); err != nil {
				return
			}
		}
		flusher.Flush()
	}
}

func startEvents(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

func sendEvent(w io.Writer, event string, data any) error {
	raw, err := json.Marshal(data)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, raw)
	return err
}

// Event is one Kubernetes Event as the Machine and Host pages show it.
type Event struct {
	Type    string      `json:"type"`
	Reason  string      `json:"reason"`
	Message string      `json:"message"`
	Count   int32       `json:"count"`
	Last    metav1.Time `json:"last"`
	From    string      `json:"from"`
}

// events streams the Events of one object (kind Machine or Host, namespace, name): those
// there are, then each new or updated one, through a watch with a field selector.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	kind, ns, name := q.Get("kind"), q.Get("namespace"), q.Get("name")
	if kind != "Machine" && kind != "Host" {
		http.Error(w, "kind must be Machine or Host", http.StatusBadRequest)
		return
	}
	if err := objectName(ns, name); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	selector := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}.AsSelector().String()
	events := s.Clientset.CoreV1().Events(ns)
	list, err := events.List(r.Context(), metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		http.Error(w, err.Error(), httpStatus(err))
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	startEvents(w)
	rows := []Event{}
	for i := range list.Items {
		rows = append(rows, eventOf(&list.Items[i]))
	}
	if sendEvent(w, "events", rows) != nil {
		return
	}
	flusher.Flush()
	wi, err := events.Watch(r.Context(), metav1.ListOptions{FieldSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return // the browser reconnects
	}
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		e, ok := ev.Object.(*corev1.Event)
		if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
			continue
		}
		if sendEvent(w, "events", []Event{eventOf(e)}) != nil {
			return
		}
		flusher.Flush()
	}
}

func eventOf(e *corev1.Event) Event {
	last := e.LastTimestamp
	if last.IsZero() {
		last = metav1.NewTime(e.EventTime.Time)
	}
	from := e.Source.Component
	if from == "" {
		from = e.ReportingController
	}
	count := e.Count
	if e.Series != nil {
		count = e.Series.Count
	}
	return Event{Type: e.Type, Reason: e.Reason, Message: e.Message, Count: max(count, 1), Last: last, From: from}
}

// consoleTail is how many lines of a console log the Machine page starts with.
const consoleTail = "500"

// consoleLog streams a Machine's console log through the console API (docs/console.md),
// as the user: its last lines, then what comes.
func (s *Server) consoleLog(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ns, name := q.Get("namespace"), q.Get("name")
	if err := objectName(ns, name); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	stream, err := s.Clientset.CoreV1().RESTClient().Get().AbsPath("/apis/subresources.compute.anvil.dev/v1alpha1/namespaces", ns, "machines", name, "consolelog").
		Param("tailLines", consoleTail).Param("follow", "true").Stream(r.Context())
	if err != nil {
		http.Error(w, err.Error(), httpStatus(err))
		return
	}
	defer stream.Close()
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	buf := make([]byte, 32<<10)
	for {
		n, err := stream.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			flusher.Flush()
		}
		if err != nil {
			return
		}
	}
}

// objectName refuses a namespace or name that is not one: they are put in API paths, and
// "..", "/" or "?" there would send the user's credentials elsewhere than asked.
func objectName(namespace, name string) error {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return fmt.Errorf("namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("name %q: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// console attaches the page to a Machine's serial console through the console API, as the
// user (docs/console.md): a WebSocket whose messages are typed at the console. What the
// console writes reaches the page by the log stream, which follows it, so nothing comes
// back here but the session's end and why (a close frame's reason: "has a writer already",
// forbidden, ...).
func (s *Server) console(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ns, name := q.Get("namespace"), q.Get("name")
	if err := objectName(ns, name); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	up := websocket.Upgrader{CheckOrigin: func(r *http.Request) bool {
		return r.Header.Get("Origin") == "http://"+r.Host // the page's own script only
	}}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	typed, typing := io.Pipe()
	defer typed.Close() // a line sent after the session ended is not waited on
	go func() {
		defer cancel() // the page went: end the session
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				typing.CloseWithError(err)
				return
			}
			if _, err := typing.Write(msg); err != nil {
				return
			}
		}
	}()
	why := "the session ended"
	if err := consoleapi.Attach(ctx, s.Config, ns, name, typed, io.Discard); err != nil {
		why = err.Error()
	}
	if len(why) > 120 { // a close frame's reason holds 123 bytes
		why = why[:120]
	}
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, why), time.Now().Add(time.Second))
}

// httpStatus is the status of an API error, 502 for one that is not.
func httpStatus(err error) int {
	var status interface{ Status() metav1.Status }
	if errors.As(err, &status) && status.Status().Code != 0 {
		return int(status.Status().Code)
	}
	return http.StatusBadGateway
}

// Serve serves s on lis until ctx ends.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		// Streams end with ctx: Shutdown waits for no open feed.
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
