package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

const (
	// SnapshotPath holds what a running (or killed) node changed on the host: Start writes
	// it before its first change, Stop removes it once everything is restored.
	SnapshotPath = "/run/anvil-test-cluster/snapshot.json"
	// LockPath is held (flock) while a node runs: one node per machine.
	LockPath = "/run/anvil-test-cluster.lock"
)

// snapshotSysctls are the kernel settings the kubelet (kernel.*, vm.*), the bridge plugin
// (forwarding), kube-proxy (route_localnet, conntrack) or the bridge netfilter hooks may
// change. A key missing on this kernel is recorded as absent and left alone.
var snapshotSysctls = []string{
	"kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory", "vm.panic_on_oom",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
	"net.ipv4.ip_forward", "net.ipv4.conf.all.forwarding", "net.ipv6.conf.all.forwarding",
	"net.ipv4.conf.all.route_localnet",
	"net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables",
	"net.netfilter.nf_conntrack_max", "net.netfilter.nf_conntrack_tcp_timeout_established",
	"net.netfilter.nf_conntrack_tcp_timeout_close_wait", "net.netfilter.nf_conntrack_tcp_be_liberal",
}

// hostPaths are the paths outside Dir that the kubelet, containerd 1.6 and the CNI plugins
// write whatever their configuration says (device-plugin socket, /var/log/containers,
// network namespaces, shim sockets, CNI's result cache), and those they would use by
// default, checked so a change of default shows up in the restore test.
var hostPaths = []string{
	"/var/lib/kubelet", "/var/lib/cni", "/var/log/containers", "/var/log/pods",
	"/etc/cni", "/opt/cni", "/run/containerd", "/run/netns", "/var/lib/containerd",
	"/opt/containerd", "/etc/kubernetes",
}

// iptablesTables are the tables kube-proxy, the kubelet's canary chains and the guard write.
var iptablesTables = []string{"filter", "nat", "mangle", "raw"}

// snapshot is the host as it was before a run, and the processes the run started.
type snapshot struct {
	// Dir is the run's directory: its processes name it on their command lines, its
	// mounts are under it.
	Dir string
	// Sysctls maps a key to its value; a key the kernel lacks is not there.
	Sysctls map[string]string
	// IPTables maps "iptables/nat" (or "ip6tables/...") to iptables-save's output (which
	// shows a table that does not exist as an empty one).
	IPTables map[string]string
	// Tables are the netfilter tables that existed ("ip nat", "ip6 filter", ...): those
	// iptables made and kube-proxy may make.
	Tables []string
	Paths  map[string]pathState
	// Links maps an interface name the run makes (cni0, the node bridge) to whether it
	// existed.
	Links map[string]bool
	// Cgroups maps a cgroup directory the kubelet makes (each controller's kubepods) to
	// whether it existed.
	Cgroups map[string]bool
	// Processes are the ones the run started, for a later run to stop them.
	Processes []process
}

type pathState struct {
	Existed bool
	// Entries are the names directly inside, when it existed: new ones are removed.
	Entries []string `json:",omitempty"`
}

// process is a started process: its PID is trusted only while /proc/PID/cmdline still
// reads Cmdline, so a reused PID is never killed.
type process struct {
	PID     int
	Cmdline string
}

// snapshotLinks are the interfaces a run makes.
var snapshotLinks = []string{CNIBridge, NodeLink}

// takeSnapshot reads the host's state before a run in dir changes it; extraPaths are host
// paths the run's workloads write besides hostPaths (Options.HostPaths).
func takeSnapshot(dir string, extraPaths []string) (_ *snapshot, err error) {
	s := &snapshot{Dir: dir, Sysctls: map[string]string{}, IPTables: map[string]string{},
		Paths: map[string]pathState{}, Links: map[string]bool{}, Cgroups: map[string]bool{}}
	for _, k := range snapshotSysctls {
		if v, err := readSysctl(k); err == nil {
			s.Sysctls[k] = v
		}
	}
	for _, fam := range []string{"iptables", "ip6tables"} {
		for _, t := range iptablesTables {
			out, err := iptablesSave(fam, t)
			if err != nil {
				return nil, err
			}
			s.IPTables[fam+"/"+t] = out
		}
	}
	if s.Tables, err = nftTables(); err != nil {
		return nil, err
	}
	for _, p := range append(slices.Clone(hostPaths), extraPaths...) {
		entries, err := os.ReadDir(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			s.Paths[p] = pathState{}
		case err != nil:
			return nil, err
		default:
			st := pathState{Existed: true}
			for _, e := range entries {
				st.Entries = append(st.Entries, e.Name())
			}
			s.Paths[p] = st
		}
	}
	for _, l := range snapshotLinks {
		s.Links[l] = linkExists(l)
	}
	for _, c := range kubepodsCgroups() {
		s.Cgroups[c] = exists(c)
	}
	return s, nil
}

// kubepodsCgroups are the kubelet's top cgroup (cgroupfs driver, cgroup root "/") in each
// cgroup v1 hierarchy.
func kubepodsCgroups() []string {
	var dirs []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", e.Name(), "kubepods"))
		}
	}
	return dirs
}

func (s *snapshot) save() error {
	raw, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(SnapshotPath), 0o700); err != nil {
		return err
	}
	tmp := SnapshotPath + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, SnapshotPath)
}

// loadSnapshot reads the snapshot a run left, or nil when there is none.
func loadSnapshot() (*snapshot, error) {
	raw, err := os.ReadFile(SnapshotPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s := &snapshot{}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("%s is not a snapshot (%v): restore the host by hand and remove it", SnapshotPath, err)
	}
	return s, nil
}

func readSysctl(key string) (string, error) {
	raw, err := os.ReadFile(sysctlPath(key))
	return strings.TrimSpace(string(raw)), err
}

func writeSysctl(key, value string) error {
	return os.WriteFile(sysctlPath(key), []byte(value), 0o644)
}

func sysctlPath(key string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
}

// iptablesSave is one table's rules, without counters and comment lines (their dates
// differ), so two saves of one state compare equal.
func iptablesSave(family, table string) (string, error) {
	out, err := exec.Command(family+"-save", "-t", table).Output()
	if err != nil {
		return "", fmt.Errorf("%s-save -t %s: %w (is iptables installed? run hack/install-deps.sh)", family, table, err)
	}
	return normalizeIPTables(string(out)), nil
}

// nftTables lists the ip and ip6 tables that exist, sorted. (iptables-nft, Debian's
// iptables, keeps each iptables table as an nftables table of the same name.)
func nftTables() ([]string, error) {
	out, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil, fmt.Errorf("nft list tables: %w (run hack/install-deps.sh)", err)
	}
	var tables []string
	for _, l := range strings.Split(string(out), "\n") {
		fields := strings.Fields(l)
		if len(fields) == 3 && fields[0] == "table" && (fields[1] == "ip" || fields[1] == "ip6") {
			tables = append(tables, fields[1]+" "+fields[2])
		}
	}
	slices.Sort(tables)
	return tables, nil
}

var counters = regexp.MustCompile(`\[\d+:\d+\]`)

func normalizeIPTables(save string) string {
	var lines []string
	for _, l := range strings.Split(save, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		lines = append(lines, counters.ReplaceAllString(l, "[0:0]"))
	}
	return strings.Join(lines, "\n")
}

func linkExists(name string) bool { return exists(filepath.Join("/sys/class/net", name)) }

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// diff lists what differs between the host now and s (nil when restored): the restore test's
// assertion, and Stop's last check.
func (s *snapshot) diff() []string {
	now, err := takeSnapshot(s.Dir, slices.Sorted(maps.Keys(s.Paths)))
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for k, v := range s.Sysctls {
		if now.Sysctls[k] != v {
			out = append(out, fmt.Sprintf("sysctl %s is %q, was %q", k, now.Sysctls[k], v))
		}
	}
	for k, v := range s.IPTables {
		if now.IPTables[k] != v {
			out = append(out, fmt.Sprintf("%s is now:\n%s\nwas:\n%s", k, now.IPTables[k], v))
		}
	}
	if !slices.Equal(now.Tables, s.Tables) {
		out = append(out, fmt.Sprintf("netfilter tables are %v, were %v", now.Tables, s.Tables))
	}
	for p, st := range s.Paths {
		if n := now.Paths[p]; n.Existed != st.Existed || !slices.Equal(n.Entries, st.Entries) {
			out = append(out, fmt.Sprintf("%s: existed %v with %v, now %v with %v", p, st.Existed, st.Entries, n.Existed, n.Entries))
		}
	}
	for l, was := range s.Links {
		if now.Links[l] != was {
			out = append(out, fmt.Sprintf("interface %s: existed %v, now %v", l, was, now.Links[l]))
		}
	}
	for c, was := range s.Cgroups {
		if now.Cgroups[c] != was {
			out = append(out, fmt.Sprintf("cgroup %s: existed %v, now %v", c, was, now.Cgroups[c]))
		}
	}
	slices.Sort(out)
	return out
}
