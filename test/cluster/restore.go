package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// runBinaries are the executables a run starts, directly or through containerd: a process
// naming the run's Dir is killed only when it is one of these, so a shell tailing a log
// there is left alone.
var runBinaries = []string{
	"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy",
	"kubelet", "containerd", "containerd-shim-runc-v2", "runc",
}

// restore stops every process of the run s describes and puts the host back as s recorded
// it. Each step runs even when an earlier one failed; the errors are joined. Processes go
// first, so nothing rewrites a rule or remounts after it is restored.
func restore(s *snapshot) error {
	errs := []error{killRun(s)}
	errs = append(errs, unmountRun(s), removePaths(s), removeLinks(s), removeCgroups(s))
	errs = append(errs, restoreIPTables(s), restoreSysctls(s))
	return errors.Join(errs...)
}

// killRun SIGKILLs the run's processes and waits until they are gone: those it recorded
// (while their command line still matches), every process in the kubelet's cgroups (the
// Pods' processes), and any run binary whose command line names Dir (containerd's shims,
// which outlive containerd).
func killRun(s *snapshot) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var left []int
		for _, p := range s.Processes {
			if cmdline(p.PID) == p.Cmdline && alive(p.PID) {
				left = append(left, p.PID)
			}
		}
		left = append(left, podProcesses()...)
		left = append(left, namingDir(s.Dir)...)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of the run in %s still alive after SIGKILL: %v", s.Dir, left)
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// podProcesses are the live processes in every kubepods cgroup tree.
func podProcesses() []int {
	var pids []int
	for _, root := range kubepodsCgroups() {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			raw, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			for _, f := range strings.Fields(string(raw)) {
				if pid, err := strconv.Atoi(f); err == nil && alive(pid) && !slices.Contains(pids, pid) {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// namingDir are the live run binaries whose command line names dir (never this process).
func namingDir(dir string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !alive(pid) {
			continue
		}
		args := strings.Split(cmdline(pid), "\x00")
		if !slices.Contains(runBinaries, filepath.Base(args[0])) {
			continue
		}
		if strings.Contains(cmdline(pid), dir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// NamingDir lists every live process whose command line names dir, whatever it runs: what
// a test checks is empty after Stop.
func NamingDir(dir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !alive(pid) {
			continue
		}
		if c := cmdline(pid); strings.Contains(c, dir+"/") {
			out = append(out, fmt.Sprintf("%d: %s", pid, strings.ReplaceAll(c, "\x00", " ")))
		}
	}
	return out
}

func cmdline(pid int) string {
	raw, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.TrimRight(string(raw), "\x00")
}

// alive is false for a process that is gone or a zombie (this machine's init may never reap
// a killed container's orphans; a zombie holds nothing).
func alive(pid int) bool {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may hold spaces.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// unmountRun detaches every mount under Dir (container root filesystems, Pod volumes,
// sandbox /dev/shm) and under the host paths the run created or added to (network
// namespaces in /run/netns), deepest first.
func unmountRun(s *snapshot) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var targets []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if ours(s, mp) {
			targets = append(targets, mp)
		}
	}
	// Deepest first: a parent cannot go while a child is mounted on it.
	slices.SortFunc(targets, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, t := range targets {
		if err := syscall.Unmount(t, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
}

// ours says whether path is the run's: under Dir, under a host path that did not exist
// before, or a new entry of one that did.
func ours(s *snapshot, path string) bool {
	if strings.HasPrefix(path, s.Dir+"/") {
		return true
	}
	for p, st := range s.Paths {
		if path == p && !st.Existed {
			return true
		}
		if !strings.HasPrefix(path, p+"/") {
			continue
		}
		if !st.Existed {
			return true
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(path, p+"/"), "/")
		return !slices.Contains(st.Entries, first)
	}
	return false
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(p string) string {
	if !strings.Contains(p, `\`) {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+3 < len(p) {
			if n, err := strconv.ParseUint(p[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// removePaths removes the host paths the run created, and what it added to those that were
// there before.
func removePaths(s *snapshot) error {
	var errs []error
	for p, st := range s.Paths {
		if !st.Existed {
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		entries, _ := os.ReadDir(p)
		for _, e := range entries {
			if !slices.Contains(st.Entries, e.Name()) {
				if err := os.RemoveAll(filepath.Join(p, e.Name())); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

func removeLinks(s *snapshot) error {
	var errs []error
	for l, existed := range s.Links {
		if !existed && linkExists(l) {
			if out, err := exec.Command("ip", "link", "del", l).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("ip link del %s: %v: %s", l, err, out))
			}
		}
	}
	return errors.Join(errs...)
}

// removeCgroups removes the kubepods trees the kubelet made, leaves first; the processes
// in them are gone (killRun).
func removeCgroups(s *snapshot) error {
	var errs []error
	for root, existed := range s.Cgroups {
		if existed || !exists(root) {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// restoreIPTables puts back each table that changed: iptables-restore replaces a table's
// chains and rules wholesale, and a table that did not exist is deleted (with nft: iptables
// cannot delete a table).
func restoreIPTables(s *snapshot) error {
	var errs []error
	tables, err := nftTables()
	if err != nil {
		return err
	}
	for _, t := range tables {
		if !slices.Contains(s.Tables, t) {
			if out, err := exec.Command("nft", "delete", "table", t).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("nft delete table %s: %v: %s", t, err, out))
			}
		}
	}
	for key, was := range s.IPTables {
		family, table, _ := strings.Cut(key, "/")
		if !slices.Contains(s.Tables, map[string]string{"iptables": "ip ", "ip6tables": "ip6 "}[family]+table) {
			continue // deleted above, or never made
		}
		if now, err := iptablesSave(family, table); err != nil || now != was {
			errs = append(errs, err, iptablesRestore(family, was+"\n"))
		}
	}
	return errors.Join(errs...)
}

func iptablesRestore(family, rules string) error {
	cmd := exec.Command(family+"-restore", "-w")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s-restore: %v: %s", family, err, out)
	}
	return nil
}

func restoreSysctls(s *snapshot) error {
	var errs []error
	for k, v := range s.Sysctls {
		if now, err := readSysctl(k); err == nil && now != v {
			if err := writeSysctl(k, v); err != nil {
				errs = append(errs, fmt.Errorf("restoring %s=%s: %w", k, v, err))
			}
		}
	}
	return errors.Join(errs...)
}
