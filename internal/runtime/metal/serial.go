package metal

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
	"github.com/anvil-dev/anvil/internal/mri"
	"github.com/anvil-dev/anvil/internal/runtime/console"
)

// A server's serial console (docs/console.md) is one TCP stream its BMC serves, one
// session at a time: the Redfish System's SerialConsole.Telnet service (the BMC emulator
// has one; IPMI BMCs, whose console is Serial-over-LAN, are not served yet). While a
// claimed server runs, the runtime holds that session and appends what comes to the
// machine's own log file in Options.ConsoleDir, so readers follow a file as on QEMU pools;
// the one writer's input goes into the same session. Output while no session is on (the
// runtime down, the first moments after a deploy) is lost, as on a real serial line. The
// BMC's address and credentials stay here: only the guest's output reaches its tenant. A
// log belongs to one machine id, and goes with it: the next tenant of the server starts
// an empty one.

// errNoSerialConsole: the BMC serves no serial console the runtime can use.
var errNoSerialConsole = errors.New("the server's BMC serves no serial console anvil can use (Redfish SerialConsole.Telnet)")

// serialSession is the session the runtime holds for one claimed server.
type serialSession struct {
	id     string // the machine's
	cancel context.CancelFunc

	mu   sync.Mutex
	conn net.Conn // nil between connections
}

// serialConsoles are the sessions, by Host name, and the Hosts whose BMCs have none.
type serialConsoles struct {
	dir      string
	ctx      context.Context // ends with the runtime
	sessions map[string]*serialSession
	none     map[string]string // machine id, by Host name
}

func (c *serialConsoles) logPath(id string) string { return filepath.Join(c.dir, id+".log") }

// serialLocked keeps the session of Host name's machine m as m's state asks: on while it
// runs, off otherwise (its log stays while m does), and returns what m's status says of
// its console (CONTRACT.md S5): its log's path, or "" when there is none. mu must be held.
func (r *Runtime) serialLocked(name string, h *metalv1alpha1.Host, m *mriv1alpha1.Machine) string {
	c := r.consoles
	if c == nil {
		return ""
	}
	id := m.GetMetadata().GetId()
	s := c.sessions[name]
	if s != nil && s.id != id {
		r.dropSerialLocked(name) // another machine's: gone with it
		s = nil
	}
	running := m.GetStatus().GetState() == mriv1alpha1.MachineState_MACHINE_STATE_RUNNING
	switch {
	case c.none[name] == id || !servesSerial(h):
		return ""
	case running && s == nil:
		ctx, cancel := context.WithCancel(c.ctx)
		s = &serialSession{id: id, cancel: cancel}
		c.sessions[name] = s
		go r.holdSerial(ctx, name, s)
	case !running && s != nil:
		s.cancel() // the log stays for reading; the next start opens a session again
		delete(c.sessions, name)
	}
	if _, err := os.Stat(c.logPath(id)); err != nil && !running {
		return "" // never connected: nothing to read
	}
	return c.logPath(id)
}

// sessionLogs are the logs of the sessions on: the ones that grow.
func (r *Runtime) sessionLogs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.consoles.sessions {
		out = append(out, r.consoles.logPath(s.id))
	}
	return out
}

// dropSerialLocked ends Host name's session, if any. mu must be held.
func (r *Runtime) dropSerialLocked(name string) {
	if s := r.consoles.sessions[name]; s != nil {
		s.cancel()
		delete(r.consoles.sessions, name)
	}
}

// forgetSerialLocked removes the log of machine id, which is gone. mu must be held.
func (r *Runtime) forgetSerialLocked(id string) {
	if r.consoles != nil && id != "" {
		_ = os.Remove(r.consoles.logPath(id))
		_ = os.Remove(console.TimesPath(r.consoles.logPath(id)))
	}
}

// sweepSerialLocked removes the logs of machines that are gone (released while the runtime
// was down). mu must be held.
func (r *Runtime) sweepSerialLocked() {
	if r.consoles == nil {
		return
	}
	entries, _ := os.ReadDir(r.consoles.dir)
	for _, e := range entries {
		id, ok := strings.CutSuffix(strings.TrimSuffix(e.Name(), ".times"), ".log")
		if _, _, _, err := r.Views.ByID(id); ok && err != nil {
			_ = os.Remove(filepath.Join(r.consoles.dir, e.Name()))
		}
	}
}

// servesSerial: a Redfish BMC (with credentials) may have a serial console; the others
// have none the runtime reaches.
func servesSerial(h *metalv1alpha1.Host) bool {
	if h == nil || h.Spec.BMC.CredentialsSecretRef == nil {
		return false
	}
	_, redfish := metalv1alpha1.RedfishSystemURL(h.Spec.BMC.Address)
	return redfish
}

// holdSerial keeps a session with Host name's serial console until ctx ends, appending
// what comes to the machine's log; it connects again a second after each loss.
func (r *Runtime) holdSerial(ctx context.Context, name string, s *serialSession) {
	log := r.opts.Logger.WithValues("host", name, "machine", s.id)
	f, err := os.OpenFile(r.consoles.logPath(s.id), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		log.Error(err, "cannot open the serial console's log")
		return
	}
	defer f.Close()
	for wait := time.Second; ctx.Err() == nil; {
		conn, err := r.dialSerial(ctx, name)
		if errors.Is(err, errNoSerialConsole) {
			log.Info("no serial console", "why", err.Error())
			r.mu.Lock()
			r.consoles.none[name] = s.id
			r.refreshLocked(name)
			r.mu.Unlock()
			return
		}
		if err == nil {
			s.setConn(conn)
			stop := context.AfterFunc(ctx, func() { conn.Close() })
			_, _ = io.Copy(f, conn)
			stop()
			s.setConn(nil)
			conn.Close()
			wait = time.Second
		} else if ctx.Err() == nil {
			log.V(1).Info("serial console not reached; trying again", "error", err.Error(), "retry", wait)
			wait = min(2*wait, 10*time.Second)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

func (s *serialSession) setConn(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn = c
}

// Write types p into the session that is on.
func (s *serialSession) Write(p []byte) (int, error) {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	if c == nil {
		return 0, errors.New("the serial console is not connected")
	}
	return c.Write(p)
}

// dialSerial asks Host name's BMC where its serial console is (the Redfish System's
// SerialConsole.Telnet) and connects to it.
func (r *Runtime) dialSerial(ctx context.Context, name string) (net.Conn, error) {
	h := &metalv1alpha1.Host{}
	if err := r.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: r.opts.Namespace, Name: name}, h); err != nil {
		return nil, err
	}
	if !servesSerial(h) {
		return nil, errNoSerialConsole
	}
	secret := &corev1.Secret{}
	if err := r.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: r.opts.Namespace, Name: h.Spec.BMC.CredentialsSecretRef.Name}, secret); err != nil {
		return nil, fmt.Errorf("the BMC's credentials: %w", err)
	}
	system, ok := metalv1alpha1.RedfishSystemURL(h.Spec.BMC.Address)
	if !ok {
		return nil, errNoSerialConsole
	}
	reqCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, system.String(), nil)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(string(secret.Data["username"]), string(secret.Data["password"]))
	transport := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: h.Spec.BMC.DisableCertificateVerification}} //nolint:gosec // the Host's operators ask for it
	defer transport.CloseIdleConnections()
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the BMC answered %s", resp.Status)
	}
	var sys struct {
		SerialConsole struct {
			Telnet struct {
				ServiceEnabled bool
				Port           int
			}
		}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&sys); err != nil {
		return nil, fmt.Errorf("the BMC's System: %w", err)
	}
	telnet := sys.SerialConsole.Telnet
	if !telnet.ServiceEnabled || telnet.Port <= 0 || telnet.Port > 65535 {
		return nil, errNoSerialConsole
	}
	return (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", net.JoinHostPort(system.Hostname(), strconv.Itoa(telnet.Port)))
}

// The MRI console calls (CONTRACT.md C1-C7).

func (r *Runtime) ReadConsoleLog(req *mriv1alpha1.ReadConsoleLogRequest, stream mriv1alpha1.MachineRuntime_ReadConsoleLogServer) error {
	if r.consoles == nil {
		return r.UnimplementedMachineRuntimeServer.ReadConsoleLog(req, stream)
	}
	return r.consoleServer.ReadConsoleLog(req, stream)
}

func (r *Runtime) AttachConsole(stream mriv1alpha1.MachineRuntime_AttachConsoleServer) error {
	if r.consoles == nil {
		return r.UnimplementedMachineRuntimeServer.AttachConsole(stream)
	}
	return r.consoleServer.AttachConsole(stream)
}

// lookupConsole is machine id's console: its log, and its server's session for input.
func (r *Runtime) lookupConsole(id string) (console.Machine, error) {
	m, name, err := r.machine(id)
	if err != nil {
		return console.Machine{}, err
	}
	if m.GetStatus().GetConsole() == "" {
		return console.Machine{}, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NO_CONSOLE,
			"machine %s has no serial console: its server's BMC serves none anvil can use, or it has not run yet", id)
	}
	return console.Machine{
		Log: &console.FileLog{Path: r.consoles.logPath(id)},
		Gone: func() bool {
			_, _, err := r.machine(id)
			return err != nil
		},
		OpenInput: func(context.Context) (io.WriteCloser, error) {
			r.mu.Lock()
			s := r.consoles.sessions[name]
			r.mu.Unlock()
			if s == nil || s.id != id || !s.connected() {
				return nil, mri.Errorf(mriv1alpha1.ErrorReason_ERROR_REASON_NO_CONSOLE,
					"machine %s is not running, or its server's serial console is not connected yet: attach again in a moment", id)
			}
			return sessionInput{s}, nil
		},
	}, nil
}

// sessionInput types into a session; closing it leaves the session on (the runtime's).
type sessionInput struct{ s *serialSession }

func (i sessionInput) Write(p []byte) (int, error) { return i.s.Write(p) }
func (sessionInput) Close() error                  { return nil }

func (s *serialSession) connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn != nil
}
