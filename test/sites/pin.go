package sites

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// PinLevels gives each level a core of its own (level i on core i modulo the cores there
// are): its kube-apiserver, etcd, manager, runtime (fake or broker) and poollet, every
// thread. In a fleet a region and its sites are separate machines; on one small machine
// unpinned levels contend for the same cores, and a figure comparing one level's work with
// two levels' then measures the contention, not the hop. The calling process is left
// alone.
func (h *Hierarchy) PinLevels() error {
	cores := unix.CPUSet{}
	if err := unix.SchedGetaffinity(0, &cores); err != nil {
		return err
	}
	var allowed []int
	for c := 0; c < 1024 && len(allowed) < cores.Count(); c++ {
		if cores.IsSet(c) {
			allowed = append(allowed, c)
		}
	}
	for i, l := range h.Levels {
		var one unix.CPUSet
		one.Set(allowed[i%len(allowed)])
		apiserver, etcd, err := controlPlanePids(l)
		if err != nil {
			return err
		}
		pids := []int{apiserver, etcd}
		for _, p := range l.procs {
			pids = append(pids, p.PID())
		}
		for _, pid := range pids {
			if err := pinProcess(pid, &one); err != nil {
				return fmt.Errorf("level %s: %w", l.Name, err)
			}
		}
	}
	return nil
}

// pinProcess sets every thread of pid to set; threads made later inherit it.
func pinProcess(pid int, set *unix.CPUSet) error {
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		// A thread that ended since the listing is no error.
		if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("pinning thread %d of process %d: %w", tid, pid, err)
		}
	}
	return nil
}
