package rollout

import (
	"fmt"
	"math"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
)

// Machine is what the plan needs of one Machine booting the tag under the Reimage policy.
type Machine struct {
	Name, Pool string
	// Current: it runs the entry the OSImage publishes for its architecture
	// (ImageUpToDate True).
	Current bool
	// Available: it runs (state Running, Ready True).
	Available bool
	// Asked is the index digest it was last asked to reimage to ("": never), AskedAt when.
	Asked   string
	AskedAt time.Time
	// Refused says why its pool refused the reimage ("": it did not).
	Refused string
}

// Input is a rollout's state.
type Input struct {
	// Target is the index digest the tag names now.
	Target   string
	Machines []Machine
	// MaxUnavailable per pool: a count, or a percentage of the pool's Machines of this
	// rollout (rounded down, at least one).
	MaxUnavailable intstr.IntOrString
	Paused         bool
	// Deadline is how long an asked Machine may take to come back current and available.
	Deadline time.Duration
	Now      time.Time
}

// Plan is the decision.
type Plan struct {
	// Ask are the Machines to ask now, by name.
	Ask []string
	// Machines in all; Updated run the target and are available; Updating were asked and
	// are not yet; Pending were not asked. The counts are those once Ask is carried out:
	// a Machine asked now counts as updating, so the status written with the asks is true.
	Machines, Updated, Updating, Pending int
	// Stalled, when set, names the Machine that did not come back and why: nothing more is
	// asked until it does (or the rollout's target changes).
	Stalled string
	// RecheckAt is when the first Machine under way (asked before, or now) passes the
	// deadline (zero: none is under way): nothing else would wake the controller then.
	RecheckAt time.Time
}

// Decide is the next wave. A Machine already current needs nothing (an architecture whose
// entry did not change); unavailable counts every Machine of the pool that does not run,
// whatever the reason, so a pool already short is not made shorter.
func Decide(in Input) (Plan, error) {
	p := Plan{Machines: len(in.Machines)}
	byPool := map[string][]Machine{}
	for _, m := range in.Machines {
		byPool[m.Pool] = append(byPool[m.Pool], m)
	}
	pools := make([]string, 0, len(byPool))
	for pool := range byPool {
		pools = append(pools, pool)
	}
	sort.Strings(pools)
	var candidates [][]string // per pool, the Machines that may be asked, by name
	var room []int
	for _, pool := range pools {
		ms := byPool[pool]
		sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
		limit, err := maxUnavailable(in.MaxUnavailable, len(ms))
		if err != nil {
			return Plan{}, err
		}
		unavailable := 0
		var waiting []string
		for _, m := range ms {
			asked := m.Asked == in.Target
			switch {
			case m.Current && m.Available:
				p.Updated++
			case asked:
				p.Updating++
			default:
				p.Pending++
			}
			if !m.Available || asked && !m.Current {
				unavailable++
			}
			if asked && !(m.Current && m.Available) {
				due := m.AskedAt.Add(in.Deadline)
				switch {
				case p.Stalled != "":
				case m.Refused != "":
					p.Stalled = fmt.Sprintf("Machine %s: its pool refused the new image: %s", m.Name, m.Refused)
				case in.Deadline > 0 && in.Now.After(due):
					p.Stalled = fmt.Sprintf("Machine %s did not come back running the new image within %s", m.Name, in.Deadline)
				case in.Deadline > 0 && (p.RecheckAt.IsZero() || due.Before(p.RecheckAt)):
					p.RecheckAt = due
				}
			}
			if !asked && !m.Current && m.Available {
				waiting = append(waiting, m.Name)
			}
		}
		candidates = append(candidates, waiting)
		room = append(room, limit-unavailable)
	}
	if in.Paused || p.Stalled != "" {
		return p, nil
	}
	for i, names := range candidates {
		for _, name := range names[:max(0, min(room[i], len(names)))] {
			p.Ask = append(p.Ask, name)
			p.Pending--
			p.Updating++
		}
	}
	if due := in.Now.Add(in.Deadline); len(p.Ask) > 0 && in.Deadline > 0 && (p.RecheckAt.IsZero() || due.Before(p.RecheckAt)) {
		p.RecheckAt = due
	}
	return p, nil
}

// maxUnavailable is v resolved against a pool's n Machines: a percentage rounds down but
// is at least one, so a small pool still moves.
func maxUnavailable(v intstr.IntOrString, n int) (int, error) {
	if v.Type == intstr.Int {
		if v.IntVal < 1 {
			return 0, fmt.Errorf("maxUnavailable %d: at least 1", v.IntVal)
		}
		return int(v.IntVal), nil
	}
	got, err := intstr.GetScaledValueFromIntOrPercent(&v, n, false)
	if err != nil {
		return 0, fmt.Errorf("maxUnavailable %q: %w", v.StrVal, err)
	}
	return max(1, min(got, math.MaxInt32)), nil
}

// Condition is the OSImage's RollingOut condition for the plan of index target: its
// status, reason and message.
func (p Plan) Condition(target string, paused bool) (bool, string, string) {
	switch {
	case p.Stalled != "":
		return false, imagesv1alpha1.ReasonRolloutStalled, fmt.Sprintf("stalled on index %s with %d of %d Machines on it: %s; "+
			"nothing more is asked until it is back: fix it and publish again, set its imageUpdatePolicy to Never, or delete it",
			target, p.Updated, p.Machines, p.Stalled)
	case p.Updated == p.Machines:
		return false, imagesv1alpha1.ReasonRolloutComplete, fmt.Sprintf("all %d Machines booting the tag run index %s", p.Machines, target)
	case paused:
		return false, imagesv1alpha1.ReasonRolloutPaused, fmt.Sprintf("paused (spec.rollout.paused) with %d of %d Machines on index %s, %d updating, %d pending",
			p.Updated, p.Machines, target, p.Updating, p.Pending)
	default:
		return true, imagesv1alpha1.ReasonRollingOut, fmt.Sprintf("%d of %d Machines on index %s, %d updating, %d pending",
			p.Updated, p.Machines, target, p.Updating, p.Pending)
	}
}
