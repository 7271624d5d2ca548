package sites

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on Linux).
const clockTicks = 100

// CPU returns the CPU seconds (user and system) each process of the hierarchy has used so
// far, keyed "<level> <process>": the manager, the runtime (fake or broker), the poollet,
// and the level's kube-apiserver and etcd. On a shared machine a figure's wall time is
// partly how much work each level does; this says which.
func (h *Hierarchy) CPU() (map[string]float64, error) {
	out := map[string]float64{}
	for _, l := range h.Levels {
		for _, p := range l.procs {
			s, err := cpuSeconds(p.PID())
			if err != nil {
				return nil, err
			}
			out[strings.Replace(p.name, "-", " ", 1)] = s
		}
		apiserver, etcd, err := controlPlanePids(l)
		if err != nil {
			return nil, err
		}
		for name, pid := range map[string]int{"kube-apiserver": apiserver, "etcd": etcd} {
			s, err := cpuSeconds(pid)
			if err != nil {
				return nil, err
			}
			out[l.Name+" "+name] = s
		}
	}
	return out, nil
}

// cpuSeconds reads a process's user and system time.
func cpuSeconds(pid int) (float64, error) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// The fields after the command name (which may hold spaces) in parentheses: state is
	// the first, utime the 12th and stime the 13th.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	user, err1 := strconv.ParseInt(f[11], 10, 64)
	sys, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	return float64(user+sys) / clockTicks, nil
}

// controlPlanePids finds the level's kube-apiserver (by its --secure-port, the port of
// the level's address) and etcd (by the client URL the apiserver uses) among this
// process's children, which envtest started.
func controlPlanePids(l *Level) (apiserver, etcd int, err error) {
	u, err := url.Parse(l.Env.Config.Host)
	if err != nil {
		return 0, 0, err
	}
	children, err := childCommandLines(os.Getpid())
	if err != nil {
		return 0, 0, err
	}
	var etcdURL string
	for pid, args := range children {
		if filepath.Base(args[0]) == "kube-apiserver" && flagValue(args, "--secure-port") == u.Port() {
			apiserver, etcdURL = pid, flagValue(args, "--etcd-servers")
		}
	}
	for pid, args := range children {
		if filepath.Base(args[0]) == "etcd" && etcdURL != "" && flagValue(args, "--listen-client-urls") == etcdURL {
			etcd = pid
		}
	}
	if apiserver == 0 || etcd == 0 {
		return 0, 0, fmt.Errorf("level %s: kube-apiserver (pid %d) or etcd (pid %d) not found among this process's children", l.Name, apiserver, etcd)
	}
	return apiserver, etcd, nil
}

// childCommandLines are the argument lists of ppid's children, by pid.
func childCommandLines(ppid int) (map[int][]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int][]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(ppid) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		out[pid] = strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	}
	return out, nil
}

// flagValue is the value of --name=value or --name value in args.
func flagValue(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
