// Command pause is a Pod's sandbox process: the pause image of kubeadm clusters
// (hack/kubeimages) and test/cluster's sandbox (containerd's sandbox_image; no image can be
// pulled from the internet here). It holds the Pod's namespaces, reaps the orphans it
// inherits as their PID 1, and ends on SIGTERM or SIGINT.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			if pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
