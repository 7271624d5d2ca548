package measure

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is Linux's USER_HZ, the unit of /proc's CPU times (100 on every architecture
// anvil runs on; reading it needs cgo's sysconf).
const clockTicks = 100

// CPUSeconds is the user plus system CPU time process pid has used so far.
func CPUSeconds(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f, err := statFields(string(raw))
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	// Fields 14 and 15 of proc(5): utime and stime, in clock ticks.
	utime, err1 := strconv.ParseFloat(f[13], 64)
	stime, err2 := strconv.ParseFloat(f[14], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, f[13], f[14])
	}
	return (utime + stime) / clockTicks, nil
}

// statFields splits a /proc/<pid>/stat line into proc(5)'s fields (index 0 is field 1);
// the second, the program's name in parentheses, may hold spaces.
func statFields(line string) ([]string, error) {
	open, close := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || close < open {
		return nil, fmt.Errorf("no (name) in %q", line)
	}
	f := append([]string{strings.TrimSpace(line[:open]), line[open+1 : close]}, strings.Fields(line[close+1:])...)
	if len(f) < 15 {
		return nil, fmt.Errorf("%d fields in %q", len(f), line)
	}
	return f, nil
}

// ChildPID is the pid of this process's child running the program named name, as
// envtest starts kube-apiserver and etcd.
func ChildPID(name string) (int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, err
	}
	self := strconv.Itoa(os.Getpid())
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue // ended since the glob
		}
		f, err := statFields(string(raw))
		// Field 4 is the parent's pid.
		if err == nil && f[1] == name && f[3] == self {
			return strconv.Atoi(f[0])
		}
	}
	return 0, fmt.Errorf("no child process %s of %s", name, self)
}

// RSSBytes is process pid's resident memory now (VmRSS of /proc/<pid>/status).
func RSSBytes(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: VmRSS %q", pid, v)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
}
