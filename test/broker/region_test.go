package broker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/anvil-dev/anvil/test/devproc"
)

// tenant is the region's namespace the test's Machines are made in.
const tenant = "tenant"

// fleet is the region and its two sites, shared by the subtests.
type fleet struct {
	r, s1, s2 *site
	b1, b2    *brokerPool
}

// Three control planes: region R, whose only pools are brokers; site S1 with a fake pool
// (amd64, sized below) and a QEMU amd64 pool; site S2 with a QEMU arm64 pool and the
// bare-metal pool (Ironic, fake-hardware Hosts). R's Machines go through R's scheduler to
// a broker pool, through the broker to a Machine in the site's namespace "region", and
// through the site's scheduler to one of its pools.
func TestRegionPlacesMachinesOnSitesThroughBrokers(t *testing.T) {
	fill := fillMemory
	f := &fleet{}
	// R cannot read the sites' registries (each refuses anonymous reads and R's manager
	// holds only its own registry's credential), so its scheduler assumes every image has
	// every architecture; the brokers check the image against the site's registry at create.
	f.r = startSite(t, "r", "--fake-pool", "", "--qemu-pools=false", "--metal-pool=false", "--image-architectures", "any")
	f.s1 = startSite(t, "s1", "--fake-pool", "s1-fake", "--arch", "amd64", "--cpu", "64", "--memory", doubled(fill),
		"--qemu-architectures", "amd64", "--metal-pool=false")
	f.s2 = startSite(t, "s2", "--fake-pool", "", "--qemu-architectures", "arm64",
		"--metal-image-port", devproc.FreePort(t), "--bmc-port", devproc.FreePort(t))
	for _, s := range []*site{f.s1, f.s2} {
		if out := s.dev.Output(); strings.Contains(out, "not installed") {
			t.Fatalf("site %s lacks a pool this test needs (make deps installs QEMU and Ironic):\n%s", s.name, out)
		}
	}
	for _, s := range []*site{f.r, f.s1, f.s2} {
		s.apply(t, fmt.Sprintf(classes, fill))
	}
	f.r.apply(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+tenant+"}\n")
	// Each site keeps one pool for the Machines that ask for it by toleration: S1's VMs
	// (so the fake Machines below never boot a hundred guests), S2's servers (so the arm64
	// guest boots in QEMU, not on an arm64 Host).
	for _, p := range []struct {
		s           *site
		pool, taint string
	}{{f.s1, "dev-qemu-amd64", "anvil.test/vm"}, {f.s2, "dev-qemu-arm64", ""}, {f.s2, "dev-metal", "anvil.test/metal"}, {f.s1, "s1-fake", ""}} {
		p.s.wait(t, 2*time.Minute, "True", "get", "machinepool", p.pool, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if p.taint != "" {
			p.s.kubectl(t, "", "patch", "machinepool", p.pool, "--type", "merge", "-p",
				`{"spec":{"taints":[{"key":"`+p.taint+`","effect":"NoSchedule"}]}}`)
		}
	}
	f.b1 = startBrokerPool(t, f.r, f.s1, "s1")
	f.b2 = startBrokerPool(t, f.r, f.s2, "s2")

	t.Run("arm64 lands on S2 and boots there", f.arm64LandsOnS2)
	t.Run("a full S1 takes no more", f.fullSiteTakesNoMore)
	t.Run("a broker killed during 100 creates and 100 deletes", f.brokerKilledDuringCreatesAndDeletes)
	t.Run("a severed site keeps its Machines", f.severedSiteKeepsMachines)
	t.Run("the broker's credentials cannot read Secrets or Hosts", f.brokerCredentialsAreNarrow)
	t.Run("a bare-metal Machine lands on a Host of S2", f.metalLandsOnS2)
}

// classes are the MachineClasses of the region and both sites (the broker refuses a
// class whose downstream namesake differs). fill (%[1]s of memory) is larger than a QEMU
// pool (the host's memory) and a fake-hardware Host, so only S1's fake pool supports it.
const classes = `
apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata: {name: e2e-vm}
capabilities: {cpu: "1", memory: 512Mi}
---
apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata: {name: tiny}
capabilities: {cpu: 100m, memory: 64Mi}
---
apiVersion: compute.anvil.dev/v1alpha1
kind: MachineClass
metadata: {name: fill}
capabilities: {cpu: "1", memory: %[1]s}
`

// fillMemory is the fill class's memory: more than any QEMU pool here offers (this host's
// memory, not overcommitted by default) and a fake-hardware Host's 16Gi, so only S1's
// fake pool takes fill Machines.
const fillMemory = "4Ti"

// doubled is twice a quantity: S1's fake pool holds exactly two fill Machines.
func doubled(q string) string {
	v := resource.MustParse(q)
	v.Add(v)
	return v.String()
}
