package consoleapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/apiauth"
	"github.com/anvil-dev/anvil/internal/mri"
)

// Server is the console server. Make it with New; Start serves it.
type Server struct {
	reader client.Reader
	auth   *apiauth.Delegated
	pools  *pools
	lis    net.Listener
	srv    *http.Server
	// CABundle is the PEM of the CA of its serving certificate: the APIService's caBundle.
	CABundle []byte
}

// New listens on address with serving's certificate. cfg is the server's own identity: it
// reads kube-apiserver's front-proxy settings, reviews callers, and presents its bearer
// token to poollets. reader reads Machines and MachinePools.
func New(ctx context.Context, cfg *rest.Config, reader client.Reader, address string, serving *Serving) (*Server, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	auth, err := apiauth.New(ctx, cs, true)
	if err != nil {
		return nil, err
	}
	token, err := bearerToken(cfg)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("console server: %w", err)
	}
	s := &Server{reader: reader, auth: auth, pools: &pools{token: token}, lis: lis, CABundle: serving.CABundle}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /apis/"+Group+"/"+Version, serveDiscovery)
	mux.HandleFunc("GET /apis/"+Group+"/"+Version+"/namespaces/{namespace}/machines/{name}/consolelog", s.consoleLog)
	mux.HandleFunc("GET /apis/"+Group+"/"+Version+"/namespaces/{namespace}/machines/{name}/console", s.console)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		// The front proxy's client certificate is checked by the authenticator, against
		// kube-apiserver's front-proxy CA; a caller with a token presents none.
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{serving.Cert}, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}}
	return s, nil
}

// Address is where the server listens.
func (s *Server) Address() string { return s.lis.Addr().String() }

// NeedLeaderElection: every replica of the manager serves consoles (behind one Service).
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends (a controller-runtime Runnable).
func (s *Server) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.srv.Shutdown(shutdown)
	}()
	if err := s.srv.ServeTLS(s.lis, "", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// consoleLog serves machines/consolelog: the Machine's console log as plain text, with
// follow (keep sending what comes), tailLines (start that many lines before the end) and
// sinceSeconds (start at what was written in that many last seconds; with tailLines, the
// later start), as a Pod's log.
func (s *Server) consoleLog(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.allowed(w, r, ns, name, "consolelog") {
		return
	}
	req := &mriv1alpha1.ReadConsoleLogRequest{}
	q := r.URL.Query()
	var ok bool
	if req.Follow, ok = boolParam(w, q, "follow", false); !ok {
		return
	}
	if req.TailLines, ok = countParam(w, q, "tailLines"); !ok {
		return
	}
	if req.SinceSeconds, ok = countParam(w, q, "sinceSeconds"); !ok {
		return
	}
	m, ep, ok := s.machineConsole(w, r.Context(), ns, name)
	if !ok {
		return
	}
	req.Id = string(m.UID)
	stream, done, err := s.pools.readLog(r.Context(), ep, req)
	if err != nil {
		writeGRPCError(w, ns, name, err)
		return
	}
	defer done()
	// The first message, or an error that ends the stream at once, decides the status; a
	// followed log that stays quiet gets its 200 after firstWait, so a client sees the
	// answer begin rather than wait for the machine to write.
	type received struct {
		msg *mriv1alpha1.ConsoleOutput
		err error
	}
	next := make(chan received, 1)
	recv := func() {
		msg, err := stream.Recv()
		next <- received{msg, err}
	}
	go recv()
	var got received
	select {
	case got = <-next:
		if got.err != nil && !errors.Is(got.err, io.EOF) {
			writeGRPCError(w, ns, name, got.err)
			return
		}
	case <-time.After(firstWait):
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	if got == (received{}) {
		got = <-next
	}
	for got.err == nil {
		if _, err := w.Write(got.msg.GetData()); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		go recv()
		got = <-next
	}
	if !errors.Is(got.err, io.EOF) && r.Context().Err() == nil {
		log.FromContext(r.Context()).Info("console log stream ended", "machine", ns+"/"+name, "error", got.err.Error())
	}
}

// firstWait is how long a console log's answer waits for its first bytes before its status
// is sent.
const firstWait = time.Second

// allowed authenticates the request and asks whether its user may get the Machine's
// subresource, answering 401, 403 or 503 itself when not.
func (s *Server) allowed(w http.ResponseWriter, r *http.Request, ns, name, subresource string) bool {
	err := s.auth.Check(r, authorizer.AttributesRecord{
		Verb: "get", Namespace: ns, APIGroup: Group, APIVersion: Version,
		Resource: "machines", Subresource: subresource, Name: name, ResourceRequest: true,
	})
	var refusal *apiauth.Refusal
	switch {
	case err == nil:
		return true
	case errors.As(err, &refusal) && refusal.Unauthenticated:
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, refusal.Message)
	case errors.As(err, &refusal):
		writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, refusal.Message)
	default:
		writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, err.Error())
	}
	return false
}

// machineConsole finds the Machine and its pool's console endpoint, answering itself when
// there is none.
func (s *Server) machineConsole(w http.ResponseWriter, ctx context.Context, ns, name string) (*computev1alpha1.Machine, *computev1alpha1.PoolConsoleEndpoint, bool) {
	m := &computev1alpha1.Machine{}
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
		if apierrors.IsNotFound(err) {
			writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("Machine %s/%s not found", ns, name))
		} else {
			writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "reading the Machine: "+err.Error())
		}
		return nil, nil, false
	}
	if m.Spec.MachinePoolRef == nil || m.Spec.MachinePoolRef.Name == "" {
		writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable,
			fmt.Sprintf("Machine %s/%s is not on a pool yet: it has no console", ns, name))
		return nil, nil, false
	}
	pool := m.Spec.MachinePoolRef.Name
	mp := &computev1alpha1.MachinePool{}
	if err := s.reader.Get(ctx, client.ObjectKey{Name: pool}, mp); err != nil || mp.Status.Console == nil {
		writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable,
			fmt.Sprintf("pool %s of Machine %s/%s serves no consoles (its poollet has no console endpoint)", pool, ns, name))
		return nil, nil, false
	}
	return m, mp.Status.Console, true
}

func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	writeStatusDetails(w, code, reason, msg, nil)
}

func writeStatusDetails(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string, details *metav1.StatusDetails) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg, Details: details})
}

// writeGRPCError answers with what the poollet (or the runtime behind it) said.
func writeGRPCError(w http.ResponseWriter, ns, name string, err error) {
	st := grpcStatus(ns, name, err)
	writeStatusDetails(w, int(st.Code), st.Reason, st.Message, st.Details)
}

// grpcStatus is the Status the console API gives for the pool's error (MRIError reads it
// back): a refusal (409) carries its MRI reason as a cause, since busy and no console
// share the code.
func grpcStatus(ns, name string, err error) *metav1.Status {
	st := status.Convert(err)
	out := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure}
	switch st.Code() {
	case codes.NotFound:
		out.Code, out.Reason, out.Message = http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("Machine %s/%s has no machine on its pool yet: %s", ns, name, st.Message())
	case codes.InvalidArgument:
		out.Code, out.Reason, out.Message = http.StatusBadRequest, metav1.StatusReasonBadRequest, st.Message()
	case codes.FailedPrecondition:
		out.Code, out.Reason, out.Message = http.StatusConflict, metav1.StatusReasonConflict, st.Message()
		out.Details = &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: ReasonCause, Message: mri.ReasonOf(err).String()}}}
	case codes.Unauthenticated, codes.PermissionDenied:
		out.Code, out.Reason, out.Message = http.StatusBadGateway, metav1.StatusReasonServiceUnavailable,
			"the pool's poollet refused the console server (it needs get on the pool's machinepools/proxy): "+st.Message()
	default:
		out.Code, out.Reason, out.Message = http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the pool's console: "+st.Message()
	}
	return out
}

// countParam reads query parameter name, a whole number (0 when absent), answering 400
// itself when it is not one.
func countParam(w http.ResponseWriter, q url.Values, name string) (int64, bool) {
	v := q.Get(name)
	if v == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, name+" must be a whole number, 0 or more")
		return 0, false
	}
	return n, true
}

// boolParam reads query parameter name (def when absent), answering 400 itself when it is
// not a boolean.
func boolParam(w http.ResponseWriter, q url.Values, name string, def bool) (bool, bool) {
	v := q.Get(name)
	if v == "" {
		return def, true
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, name+" must be true or false")
		return false, false
	}
	return b, true
}
