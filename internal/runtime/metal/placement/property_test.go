package placement

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"pgregory.net/rapid"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

// genInventory draws a small namespace of Hosts in every state, with a few policies.
func genInventory(t *rapid.T) Inventory {
	n := rapid.IntRange(0, 12).Draw(t, "hosts")
	var inv Inventory
	for i := range n {
		opts := []hostOpt{
			arch(rapid.SampledFrom([]computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64}).Draw(t, "arch")),
			size(int32(rapid.IntRange(1, 16).Draw(t, "cpus")), int64(rapid.IntRange(1, 32).Draw(t, "gib"))<<10),
			inState(rapid.SampledFrom([]metalv1alpha1.ProvisioningState{metalv1alpha1.StateAvailable, metalv1alpha1.StateAvailable,
				metalv1alpha1.StateProvisioning, metalv1alpha1.StateProvisioned, metalv1alpha1.StateInspecting}).Draw(t, "state")),
			labelled("rack", rapid.SampledFrom([]string{"1", "2"}).Draw(t, "rack")),
		}
		if rapid.IntRange(0, 5).Draw(t, "error") == 0 {
			opts = append(opts, operational(metalv1alpha1.OperationalError))
		} else {
			opts = append(opts, operational(metalv1alpha1.OperationalOK))
		}
		if rapid.Bool().Draw(t, "held") {
			opts = append(opts, heldBy(fmt.Sprintf("m%d", i)))
		}
		if rapid.IntRange(0, 8).Draw(t, "detached") == 0 {
			opts = append(opts, detached)
		}
		inv.Hosts = append(inv.Hosts, host(fmt.Sprintf("h%02d", i), opts...))
	}
	for range rapid.IntRange(0, 2).Draw(t, "policies") {
		var sel map[string]string
		if rapid.Bool().Draw(t, "policyHostSelector") {
			sel = map[string]string{"rack": rapid.SampledFrom([]string{"1", "2"}).Draw(t, "policyRack")}
		}
		inv.Policies = append(inv.Policies, policy(sel, rapid.SampledFrom([]string{"tenant", "other"}).Draw(t, "policyNamespace")))
	}
	return inv
}

func genRequest(t *rapid.T) Request {
	req := small()
	req.Architecture = rapid.SampledFrom([]computev1alpha1.Architecture{computev1alpha1.ArchitectureAMD64, computev1alpha1.ArchitectureARM64}).Draw(t, "reqArch")
	req.MilliCPU = int64(rapid.IntRange(1, 16).Draw(t, "reqCPUs")) * 1000
	req.MemoryBytes = int64(rapid.IntRange(1, 32).Draw(t, "reqGiB")) << 30
	if rapid.Bool().Draw(t, "reqSelector") {
		rack := rapid.SampledFrom([]string{"1", "2"}).Draw(t, "reqRack")
		req.HostSelector = labels.SelectorFromSet(map[string]string{"rack": rack})
		if rapid.Bool().Draw(t, "reqNotIn") {
			req.HostSelector, _ = labels.Parse("rack notin (" + rack + ")")
		}
	}
	return req
}

// Safety: every candidate matches the request; and the answer does not depend on the
// order Hosts were listed in.
func TestCandidatesSafeAndDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		inv, req := genInventory(t), genRequest(t)
		got, refusal := inv.Candidates(req)
		for _, h := range got {
			if !inv.Matches(req, h) {
				t.Fatalf("candidate %s does not match", h.Name)
			}
		}
		shuffled := inv
		shuffled.Hosts = rapid.Permutation(inv.Hosts).Draw(t, "order")
		again, refusal2 := shuffled.Candidates(req)
		if !slices.Equal(names(got), names(again)) || (refusal == nil) != (refusal2 == nil) || refusal != nil && *refusal != *refusal2 {
			t.Fatalf("order changed the answer: %v %v vs %v %v", names(got), refusal, names(again), refusal2)
		}
	})
}

// Liveness: a Host that matches is always offered, and a refusal means no Host matches.
func TestCandidatesComplete(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		inv, req := genInventory(t), genRequest(t)
		got, refusal := inv.Candidates(req)
		var matching []string
		for _, h := range inv.Hosts {
			if inv.Matches(req, h) {
				matching = append(matching, h.Name)
			}
		}
		slices.Sort(matching)
		if refusal != nil && len(matching) > 0 {
			t.Fatalf("refused (%s) though %v match", refusal.Message, matching)
		}
		if refusal == nil && !slices.Equal(names(got), matching) {
			t.Fatalf("Candidates = %v, matching hosts %v", names(got), matching)
		}
	})
}

// Capacity never counts a Host that is not part of the pool, and counts every held one.
func TestCapacityCountsHeldHosts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		inv := genInventory(t)
		c := inv.Capacity()
		var want int64
		for _, h := range inv.Hosts {
			if Held(h) || Free(h) && Offered(h, inv.Policies) {
				want++
			}
		}
		if c.Hosts != want {
			t.Fatalf("Capacity counts %d Hosts, want %d", c.Hosts, want)
		}
	})
}
