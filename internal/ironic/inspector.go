package ironic

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ironic-inspector runs beside Ironic for in-band inspection (the inspect interface
// "inspector"): Ironic asks it to introspect a node, it has Ironic boot the node into an
// agent ramdisk, and the ramdisk posts what it found to its /v1/continue. Each side calls
// the other's API with a user of its own whose password Start generates, so the caller's
// Ironic password is never written anywhere in clear.
const (
	// inspectorIronicUser is the user ironic-inspector calls Ironic's API as.
	inspectorIronicUser = "anvil-ironic-inspector"
	// ironicInspectorUser is the user Ironic calls ironic-inspector's API as; the only
	// user of ironic-inspector's htpasswd.
	ironicInspectorUser = "ironic"
)

// secrets are the generated passwords between Ironic and ironic-inspector: new on every
// Start (which rewrites both sides' files), kept across restarts, never logged.
type secrets struct {
	toInspector string // Ironic → ironic-inspector, as ironicInspectorUser
	toIronic    string // ironic-inspector → Ironic, as inspectorIronicUser
}

func newSecrets() (secrets, error) {
	var s secrets
	for _, dst := range []*string{&s.toInspector, &s.toIronic} {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return secrets{}, fmt.Errorf("generating ironic-inspector's passwords: %w", err)
		}
		*dst = base64.RawURLEncoding.EncodeToString(b)
	}
	return s, nil
}

// InspectorEndpoint is ironic-inspector's base URL, with a trailing slash
// (http://127.0.0.1:PORT/). Its API needs credentials only Ironic has; /v1/continue,
// where an agent ramdisk posts what it found, needs none.
func (i *Ironic) InspectorEndpoint() string { return i.inspector.endpoint }

// InspectorPID is the process id of the running ironic-inspector (also its process
// group), 0 between a crash and the restart.
func (i *Ironic) InspectorPID() int { return i.inspector.PID() }

// InspectorLogPath is StateDir/ironic-inspector.log.
func (i *Ironic) InspectorLogPath() string { return i.p.insp.log }

// inspectorHealthy reports whether ironic-inspector answers an authenticated request
// now. Listing introspections checks auth and the database; its root answers anyone.
func (i *Ironic) inspectorHealthy(ctx context.Context) bool {
	return i.answers(ctx, i.InspectorEndpoint()+"v1/introspection?limit=1", ironicInspectorUser, i.secrets.toInspector)
}

// renderInspectorConfig is ironic-inspector's inspector.conf for c (defaults applied),
// the files in p and the generated credentials sec. Option names are those of
// ironic_inspector/conf/*.py (11.1) and keystoneauth1's http_basic plugin.
func renderInspectorConfig(c Config, p paths, sec secrets) string {
	var b strings.Builder
	line := func(k string, v any) { fmt.Fprintf(&b, "%s = %v\n", k, v) }
	b.WriteString("# Written by anvil (internal/ironic) on every start; edits are lost.\n[DEFAULT]\n")
	// API and conductor in one process (the ironic-inspector command runs both only in
	// standalone mode); their RPC stays in the process (oslo.messaging's fake driver)
	// instead of looking for RabbitMQ, its default.
	line("standalone", "true")
	line("transport_url", "fake://")
	line("listen_address", c.Host)
	line("listen_port", c.InspectorPort)
	// A fixed name: the RPC server's, the same after a host rename.
	line("host", "anvil-ironic-inspector")
	line("auth_strategy", "http_basic")
	line("http_basic_auth_user_file", p.insp.htpasswd)
	line("use_stderr", "true")
	line("debug", "false")
	line("default_log_levels", quietLogLevels)
	b.WriteString("\n[database]\n")
	line("connection", "sqlite:///"+p.insp.db)
	b.WriteString("\n[coordination]\n")
	// Coordination elects a leader among conductors, of which there is one. A standalone
	// ironic-inspector whose backend cannot start runs as the only one ("assuming no
	// other instances are running", conductor/manager.py); a backend no driver has
	// ends that at once, where the default would look for memcached on localhost and
	// tooz's file driver warns every 10 s that it cannot elect.
	line("backend_url", "none://")
	b.WriteString("\n[pxe_filter]\n")
	// The default (iptables) rewrites the host's firewall through rootwrap; no DHCP here
	// serves the ramdisk anyway, so there is nothing to filter.
	line("driver", "noop")
	b.WriteString("\n[processing]\n")
	// What a ramdisk reports is kept in the database, where Ironic fetches it once the
	// introspection finished ([inventory] data_backend, Ironic's default "database").
	line("store_data", "database")
	b.WriteString("\n[ironic]\n")
	line("auth_type", "http_basic")
	line("username", inspectorIronicUser)
	line("password", sec.toIronic)
	line("endpoint_override", "http://"+net.JoinHostPort(c.Host, strconv.Itoa(c.Port)))
	return b.String()
}
