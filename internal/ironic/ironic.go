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
const InstallHint = "run hack/install-deps.sh (it installs the ironic-api and ironic-conductor packages)"

// Ironic is a running, supervised Ironic. Its methods are safe for concurrent use.
type Ironic struct {
	cfg      Config
	p        paths
	endpoint string
	bin      string // ironic
	dbsync   string // ironic-dbsync
	out      io.Writer
	logFile  *os.File
	http     *http.Client
	// bootFiles serves [deploy] http_root to BMCs.
	bootFiles *bootFiles

	mu       sync.Mutex
	cur      *proc
	restarts int

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Start writes the configuration, creates or upgrades the database, starts Ironic and
// returns once its API answers an authenticated request. ctx bounds the start only; Ironic
// runs, restarted when needed, until Stop.
func Start(ctx context.Context, cfg Config) (*Ironic, error) {
	if err := validate(&cfg); err != nil {
		return nil, err
	}
	bin, err := exec.LookPath("ironic")
	if err != nil {
		return nil, fmt.Errorf("ironic is not installed (%w): %s", err, InstallHint)
	}
	dbsync, err := exec.LookPath("ironic-dbsync")
	if err != nil {
		return nil, fmt.Errorf("ironic-dbsync is not installed (%w): %s", err, InstallHint)
	}
	p := pathsIn(cfg.StateDir)
	for _, d := range []string{p.dir, p.tftp, p.http, p.locks} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating Ironic's state directory: %w", err)
		}
	}
	// An Ironic left by a process that died without stopping it holds the port and the
	// database; it was started by us (the pid file says so), so end it.
	killStale(p)
	for _, port := range []*int{&cfg.Port, &cfg.BootFilesPort} {
		if *port == 0 {
			if *port, err = freePort(cfg.Host); err != nil {
				return nil, err
			}
		}
	}
	if err := writeFiles(cfg, p); err != nil {
		return nil, err
	}
	if err := ensureSchema(ctx, dbsync, p, true); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening Ironic's log: %w", err)
	}
	var out io.Writer = logFile
	if cfg.Log != nil {
		out = io.MultiWriter(logFile, cfg.Log)
	}
	i := &Ironic{
		cfg:      cfg,
		p:        p,
		endpoint: fmt.Sprintf("http://%s/", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))),
		bin:      bin,
		dbsync:   dbsync,
		out:      out,
		logFile:  logFile,
		// Loopback only: no proxy, and a short timeout so a hung Ironic counts as down.
		http: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}},
		done: make(chan struct{}),
	}
	if i.bootFiles, err = serveBootFiles(cfg.Host, cfg.BootFilesPort, p.http); err != nil {
		logFile.Close()
		return nil, err
	}
	pr, err := i.startAndWait(ctx)
	if err != nil {
		i.bootFiles.stop()
		logFile.Close()
		return nil, err
	}
	i.cur = pr
	sctx, cancel := context.WithCancel(context.Background())
	i.cancel = cancel
	go i.supervise(sctx)
	i.cfg.Logger.Info("Ironic started", "endpoint", i.endpoint, "pid", pr.pid, "stateDir", p.dir)
	return i, nil
}

// Endpoint is the API's base URL, with a trailing slash (http://127.0.0.1:PORT/).
func (i *Ironic) Endpoint() string { return i.endpoint }

// PID is the process id of the running Ironic (also its process group), 0 between a
// crash and the restart.
func (i *Ironic) PID() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.cur == nil {
		return 0
	}
	return i.cur.pid
}

// Restarts counts how many times the supervisor started Ironic again.
func (i *Ironic) Restarts() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.restarts
}

// LogPath is StateDir/ironic.log.
func (i *Ironic) LogPath() string { return i.p.log }

// Stop ends supervision, sends Ironic's process group SIGTERM, then SIGKILL after a grace,
// and waits for it. Calling it again does nothing.
func (i *Ironic) Stop() {
	i.once.Do(func() {
		i.cancel()
		<-i.done
		i.bootFiles.stop()
		i.logFile.Close()
	})
}

// Healthy reports whether the API answers an authenticated request now.
func (i *Ironic) Healthy(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// /v1 itself answers without credentials; listing one node checks auth and the
	// database as well.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, i.endpoint+"v1/nodes?limit=1", nil)
	if err != nil {
		return false
	}
	req.SetBasicAuth(i.cfg.Username, i.cfg.Password)
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

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("finding a free port for Ironic: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeFiles writes the htpasswd file and ironic.conf, both readable by the owner only.
func writeFiles(c Config, p paths) error {
	// The password is 32 random bytes in practice, so bcrypt's cost buys nothing; and
	// Ironic checks the hash on every request, blocking its one event loop (cost 10 takes
	// ~50 ms a request here, cost 4 under 1 ms).
	hash, err := bcrypt.GenerateFromPassword([]byte(c.Password), bcrypt.MinCost)
	if err != nil {
		return fmt.Errorf("hashing Ironic's password: %w", err)
	}
	if err := writeFile(p.htpasswd, c.Username+":"+string(hash)+"\n"); err != nil {
		return err
	}
	return writeFile(p.conf, renderConfig(c, p))
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

// ensureSchema creates the database when its file is missing or empty (SQLite creates an
// empty file when Ironic opens a deleted database), and runs the migrations on an existing
// one when upgrade is set (cheap and idempotent: about a second at the head revision).
func ensureSchema(ctx context.Context, dbsync string, p paths, upgrade bool) error {
	st, err := os.Stat(p.db)
	switch {
	case err == nil && st.Size() > 0:
		if !upgrade {
			return nil
		}
		return runDBSync(ctx, dbsync, p, "upgrade")
	case err == nil || errors.Is(err, os.ErrNotExist):
		if err := os.Remove(p.db); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing Ironic's empty database: %w", err)
		}
		return runDBSync(ctx, dbsync, p, "create_schema")
	default:
		return fmt.Errorf("checking Ironic's database: %w", err)
	}
}

func runDBSync(ctx context.Context, dbsync string, p paths, command string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, dbsync, "--config-file", p.conf, command).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ironic-dbsync %s: %w; its output ends with:\n%s", command, err, lastLines(string(out), 15))
	}
	return nil
}

// tail returns the last lines of ironic.log, for errors about a failed start.
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
