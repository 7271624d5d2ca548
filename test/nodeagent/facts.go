package nodeagent

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// GatherFacts reads what the Node reports from the machine the agent runs on: its
// architecture and OS as compiled in (a static binary per GOARCH, so the guest's own),
// kernel, OS image, boot id, CPUs, memory and addresses. What cannot be read is left empty.
func GatherFacts(hostname string) Facts {
	f := Facts{Arch: runtime.GOARCH, OS: runtime.GOOS, CPUs: runtime.NumCPU()}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		f.KernelVersion = unix.ByteSliceToString(u.Release[:])
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		f.BootID = strings.TrimSpace(string(raw))
	}
	f.OSImage = osImage()
	f.MemoryBytes = memTotal()
	f.Addresses = addresses(hostname)
	return f
}

// osImage is /etc/os-release's PRETTY_NAME, else "Linux".
func osImage() string {
	raw, err := os.ReadFile("/etc/os-release")
	if err == nil {
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "PRETTY_NAME="); ok {
				return strings.Trim(v, `"'`)
			}
		}
	}
	return "Linux"
}

// memTotal is /proc/meminfo's MemTotal in bytes.
func memTotal() int64 {
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// addresses are the host's global unicast addresses as InternalIPs, then its hostname.
func addresses(hostname string) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.IsGlobalUnicast() {
				out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ipn.IP.String()})
			}
		}
	}
	return append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: hostname})
}
