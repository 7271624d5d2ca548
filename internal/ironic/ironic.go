package ironic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// InstallHint is what to run when Ironic's programs are missing.
const InstallHint = "run hack/install-deps.sh (it installs the ironic-api, ironic-conductor and ironic-inspector packages)"

// Ironic is a running, supervised Ironic with its ironic-inspector. Its methods are safe
// for concurrent use.
type Ironic struct {
	cfg       Config
	p         paths
	ironic    *service
	inspector *service
	// secrets are the generated credentials between Ironic and ironic-inspector.
	secrets secrets
	http    *http.Client
	logs    []*os.File
	// sharedLog is Config.Log, written by both programs' output one write at a time.
	sharedLog io.Writer
	// bootFiles serves [deploy] http_root to BMCs.
	bootFiles *bootFiles

	cancel context.CancelFunc
	once   sync.Once
}

// programs are the paths of the programs Start runs.
type programs struct {
	ironic, dbsync, inspector, inspectorDBSync string
}

// lookPrograms finds every program before anything starts, so a missing package is
// named at once rather than after Ironic already runs.
func lookPrograms() (programs, error) {
	var pr programs
	for _, f := range []struct {
		dst  *string
		name string
	}{
		{&pr.ironic, "ironic"}, {&pr.dbsync, "ironic-dbsync"},
		{&pr.inspector, "ironic-inspector"}, {&pr.inspectorDBSync, "ironic-inspector-dbsync"},
	} {
		path, err := exec.LookPath(f.name)
		if err != nil {
			return programs{}, fmt.Errorf("%s is not installed (%w): %s", f.name, err, InstallHint)
		}
		*f.dst = path
	}
	return pr, nil
}

// Start writes the configuration, creates or upgrades the databases, starts Ironic and
// ironic-inspector and returns once both APIs answer an authenticated request. ctx bounds
// the start only; both run, each restarted when needed, until Stop.
func Start(ctx context.Context, cfg Config) (*Ironic, error) {
	if err := validate(&cfg); err != nil {
		return nil, err
	}
	progs, err := lookPrograms()
	if err != nil {
		return nil, err
	}
	p := pathsIn(cfg.StateDir)
	for _, d := range []string{p.dir, p.tftp, p.http, p.locks} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating Ironic's state directory: %w", err)
		}
	}
	// Programs left by a process that died without stopping them hold the ports and the
	// databases; they were started by us (the pid files say so), so end them.
	killStale(p.pid, p.conf)
	killStale(p.insp.pid, p.insp.conf)
	if err := pickPorts(cfg.Host, &cfg.Port, &cfg.BootFilesPort, &cfg.InspectorPort); err != nil {
		return nil, err
	}
	sec, err := newSecrets()
	if err != nil {
		return nil, err
	}
	if err := writeFiles(cfg, p, sec); err != nil {
		return nil, err
	}
	i := &Ironic{
		cfg:     cfg,
		p:       p,
		secrets: sec,
		// Loopback only: no proxy, and a short timeout so a hung program counts as down.
		http: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}},
	}
	if err := i.newServices(progs); err != nil {
		i.closeLogs()
		return nil, err
	}
	for _, s := range []*service{i.ironic, i.inspector} {
		if err := s.schema.ensure(ctx, true); err != nil {
			i.closeLogs()
			return nil, err
		}
	}
	if i.bootFiles, err = serveBootFiles(cfg.Host, cfg.BootFilesPort, p.http); err != nil {
		i.closeLogs()
		return nil, err
	}
	if err := i.startBoth(ctx); err != nil {
		i.bootFiles.stop()
		i.closeLogs()
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	i.cancel = cancel
	go i.ironic.supervise(sctx)
	go i.inspector.supervise(sctx)
	i.cfg.Logger.Info("Ironic started", "endpoint", i.Endpoint(), "pid", i.PID(),
		"inspectorEndpoint", i.InspectorEndpoint(), "inspectorPID", i.InspectorPID(), "stateDir", p.dir)
	return i, nil
}

// newServices opens the logs and describes the two supervised programs.
func (i *Ironic) newServices(progs programs) error {
	c, p := i.cfg, i.p
	ironicOut, err := i.openLog(p.log)
	if err != nil {
		return err
	}
	inspectorOut, err := i.openLog(p.insp.log)
	if err != nil {
		return err
	}
	i.ironic = &service{
		name: "ironic", bin: progs.ironic, conf: p.conf, dir: p.dir, pidFile: p.pid, logPath: p.log, out: ironicOut,
		endpoint:  fmt.Sprintf("http://%s/", net.JoinHostPort(c.Host, strconv.Itoa(c.Port))),
		healthy:   i.Healthy,
		schema:    schema{dbsync: progs.dbsync, conf: p.conf, db: p.db, create: "create_schema", upgrade: "upgrade"},
		onRestart: c.OnRestart, startTimeout: c.StartTimeout, healthInterval: c.HealthInterval, log: c.Logger,
		done: make(chan struct{}),
	}
	i.inspector = &service{
		name: "ironic-inspector", bin: progs.inspector, conf: p.insp.conf, dir: p.dir, pidFile: p.insp.pid, logPath: p.insp.log,
		out:      inspectorOut,
		endpoint: fmt.Sprintf("http://%s/", net.JoinHostPort(c.Host, strconv.Itoa(c.InspectorPort))),
		healthy:  i.inspectorHealthy,
		// ironic-inspector-dbsync has no create_schema: its upgrade creates a schema too.
		schema:       schema{dbsync: progs.inspectorDBSync, conf: p.insp.conf, db: p.insp.db, create: "upgrade", upgrade: "upgrade"},
		startTimeout: c.StartTimeout, healthInterval: c.HealthInterval, log: c.Logger,
		done: make(chan struct{}),
	}
	return nil
}

// openLog opens one program's log file, copied to Config.Log when set.
func (i *Ironic) openLog(name string) (io.Writer, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", name, err)
	}
	i.logs = append(i.logs, f)
	if i.cfg.Log == nil {
		return f, nil
	}
	if i.sharedLog == nil {
		i.sharedLog = &lockedWriter{w: i.cfg.Log}
	}
	return io.MultiWriter(f, i.sharedLog), nil
}

// lockedWriter serialises writes from several goroutines to one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (i *Ironic) closeLogs() {
	for _, f := range i.logs {
		f.Close()
	}
}

// startBoth starts Ironic, then ironic-inspector, each waited for; a failure ends what
// already runs.
func (i *Ironic) startBoth(ctx context.Context) error {
	pr, err := i.ironic.startAndWait(ctx)
	if err != nil {
		return err
	}
	i.ironic.setCurrent(pr)
	ipr, err := i.inspector.startAndWait(ctx)
	if err != nil {
		i.ironic.terminate(pr, 0)
		i.ironic.setCurrent(nil)
		return err
	}
	i.inspector.setCurrent(ipr)
	return nil
}

// Endpoint is the API's base URL, with a trailing slash (http://127.0.0.1:PORT/).
func (i *Ironic) Endpoint() string { return i.ironic.endpoint }

// PID is the process id of the running Ironic (also its process group), 0 between a
// crash and the restart.
func (i *Ironic) PID() int { return i.ironic.PID() }

// Restarts counts how many times the supervisor started Ironic again.
func (i *Ironic) Restarts() int { return i.ironic.Restarts() }

// LogPath is StateDir/ironic.log.
func (i *Ironic) LogPath() string { return i.p.log }

// Credentials are the API's user name and password (Config.Username and Config.Password),
// for a client in this process that uses an Ironic it did not start.
func (i *Ironic) Credentials() (username, password string) { return i.cfg.Username, i.cfg.Password }

// Stop ends supervision, sends both programs' process groups SIGTERM, then SIGKILL after
// a grace, and waits for them. Calling it again does nothing.
func (i *Ironic) Stop() {
	i.once.Do(func() {
		i.cancel()
		<-i.inspector.done
		<-i.ironic.done
		i.bootFiles.stop()
		i.closeLogs()
	})
}

// Healthy reports whether the API answers an authenticated request now.
func (i *Ironic) Healthy(ctx context.Context) bool {
	// /v1 itself answers without credentials; listing one node checks auth and the
	// database as well.
	return i.answers(ctx, i.Endpoint()+"v1/nodes?limit=1", i.cfg.Username, i.cfg.Password)
}

// answers reports whether an authenticated GET of url returns 200 now.
func (i *Ironic) answers(ctx context.Context, url, user, password string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	req.SetBasicAuth(user, password)
	resp, err := i.http.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

func validate(c *Config) error {
	if c.StateDir == "" {
		return errors.New("ironic: StateDir is required")
	}
	dir, err := filepath.Abs(c.StateDir)
	if err != nil {
		return fmt.Errorf("ironic: StateDir: %w", err)
	}
	c.StateDir = dir
	if c.Username == "" || c.Password == "" {
		return errors.New("ironic: Username and Password are required")
	}
	if strings.ContainsAny(c.Username, ":\n") || strings.Contains(c.Password, "\n") {
		return errors.New("ironic: Username must not contain ':' or a newline, nor Password a newline")
	}
	if c.Username == inspectorIronicUser {
		return fmt.Errorf("ironic: Username %q is ironic-inspector's own user; choose another", inspectorIronicUser)
	}
	if c.ESPImage != "" {
		esp, err := filepath.Abs(c.ESPImage)
		if err != nil {
			return fmt.Errorf("ironic: ESPImage: %w", err)
		}
		if _, err := os.Stat(esp); err != nil {
			return fmt.Errorf("ironic: ESPImage: %w (make esp builds one)", err)
		}
		c.ESPImage = esp
	}
	if c.Host == "" {
		c.Host = DefaultHost
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.HealthInterval <= 0 {
		c.HealthInterval = DefaultHealthInterval
	}
	return nil
}

// pickPorts sets each port left 0 to a free one, all different: every listener is held
// until all are picked, so the kernel cannot hand out one port twice.
func pickPorts(host string, ports ...*int) error {
	for _, port := range ports {
		if *port != 0 {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return fmt.Errorf("finding a free port for Ironic: %w", err)
		}
		defer l.Close()
		*port = l.Addr().(*net.TCPAddr).Port
	}
	return nil
}

// writeFiles writes the htpasswd files and the configurations of Ironic and
// ironic-inspector, all readable by the owner only.
func writeFiles(c Config, p paths, sec secrets) error {
	ironicUsers, err := htpasswd(c.Username, c.Password, inspectorIronicUser, sec.toIronic)
	if err != nil {
		return err
	}
	inspectorUsers, err := htpasswd(ironicInspectorUser, sec.toInspector)
	if err != nil {
		return err
	}
	for _, f := range []struct{ name, content string }{
		{p.htpasswd, ironicUsers},
		{p.conf, renderConfig(c, p, sec)},
		{p.grubTemplate, grubTemplate},
		{p.insp.htpasswd, inspectorUsers},
		{p.insp.conf, renderInspectorConfig(c, p, sec)},
	} {
		if err := writeFile(f.name, f.content); err != nil {
			return err
		}
	}
	return nil
}

// htpasswd is an htpasswd file of the user, password pairs given.
func htpasswd(userPasswords ...string) (string, error) {
	var b strings.Builder
	for k := 0; k+1 < len(userPasswords); k += 2 {
		// The passwords are 32 random bytes in practice, so bcrypt's cost buys nothing;
		// and the programs check the hash on every request, blocking their one event
		// loop (cost 10 takes ~50 ms a request here, cost 4 under 1 ms).
		hash, err := bcrypt.GenerateFromPassword([]byte(userPasswords[k+1]), bcrypt.MinCost)
		if err != nil {
			return "", fmt.Errorf("hashing the password of %s: %w", userPasswords[k], err)
		}
		b.WriteString(userPasswords[k] + ":" + string(hash) + "\n")
	}
	return b.String(), nil
}

// writeFile replaces name atomically, so a crash never leaves half a file.
func writeFile(name, content string) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Base(name), err)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Base(name), err)
	}
	return nil
}

// tail returns the last lines of a log, for errors about a failed start.
func tail(name string, n int) string {
	f, err := os.Open(name)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	const max = 8 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return lastLines(string(b), n)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
