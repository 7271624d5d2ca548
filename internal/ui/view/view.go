// Package view turns anvil's objects into the rows the fleet UI (anvil ui, docs/ui.md)
// shows: small, flat, and holding nothing a page must not show. It is pure: no clients,
// no clocks.
//
// What a row leaves out is as deliberate as what it keeps: a Host row has no BMC address
// and no credentials reference, a Machine row no first-boot data reference, a pool row no
// console endpoint or network forwards: the browser gets only what the pages draw.
package view

import (
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	computev1alpha1 "github.com/anvil-dev/anvil/api/compute/v1alpha1"
	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
)

// Kind names a row's kind in the feed; the zero value is invalid.
type Kind string

const (
	KindInvalid Kind = ""
	KindPool    Kind = "pool"
	KindMachine Kind = "machine"
	KindHost    Kind = "host"
	KindImage   Kind = "image"
	KindBuild   Kind = "build"
	KindCluster Kind = "cluster"
)

// Condition is one condition as a page shows it.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// Health is an object's summary condition: ok, and why not.
type Health struct {
	OK      bool   `json:"ok"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Usage is allocated against allocatable of one resource.
type Usage struct {
	Allocatable int64 `json:"allocatable"`
	Allocated   int64 `json:"allocated"`
}

// PoolArch is how a pool runs one architecture.
type PoolArch struct {
	Architecture string `json:"architecture"`
	// Execution is Native or Emulated; "" when the pool has not said.
	Execution string `json:"execution"`
	Reason    string `json:"reason,omitempty"`
}

// Pool is a MachinePool's row.
type Pool struct {
	Name string `json:"name"`
	// Kind is the runtime behind the pool, from spec.providerID's scheme (fake, qemu,
	// metal, broker); "" when it names none.
	Kind          string     `json:"kind"`
	Architectures []PoolArch `json:"architectures"`
	// CPU in millicores, Memory in bytes.
	CPU    Usage  `json:"cpu"`
	Memory Usage  `json:"memory"`
	Ready  Health `json:"ready"`
}

// Machine is a Machine's row.
type Machine struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	State        string `json:"state"`
	Pool         string `json:"pool,omitempty"`
	Architecture string `json:"architecture"`
	Image        string `json:"image"`
	// Digest is what the image resolved to when the machine was created.
	Digest string `json:"digest,omitempty"`
	// UpToDate is the ImageUpToDate condition's reason ("" without one).
	UpToDate   string      `json:"upToDate,omitempty"`
	Ready      Health      `json:"ready"`
	Cluster    string      `json:"cluster,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"`
	Created    metav1.Time `json:"created"`
}

// Hardware is what inspection found of a server.
type Hardware struct {
	CPUs      int32 `json:"cpus"`
	MemoryMiB int64 `json:"memoryMiB"`
	Disks     int32 `json:"disks"`
	NICs      int32 `json:"nics"`
}

// Host is a server's row: never its BMC's address or credentials.
type Host struct {
	Namespace    string       `json:"namespace"`
	Name         string       `json:"name"`
	Architecture string       `json:"architecture"`
	State        string       `json:"state"`
	Operational  string       `json:"operational,omitempty"`
	Power        string       `json:"power,omitempty"`
	Online       bool         `json:"online"`
	Consumer     string       `json:"consumer,omitempty"` // namespace/name of the Machine holding it
	Hardware     *Hardware    `json:"hardware,omitempty"`
	WipeStarted  *metav1.Time `json:"wipeStarted,omitempty"`
	LastError    string       `json:"lastError,omitempty"`
	Ready        Health       `json:"ready"`
	Conditions   []Condition  `json:"conditions,omitempty"`
}

// Published is one architecture's entry of a published index.
type Published struct {
	Architecture string `json:"architecture"`
	Digest       string `json:"digest"`
}

// Rollout is an OSImage's rollout to the Machines that boot its tag.
type Rollout struct {
	Target   string `json:"target"`
	Machines int32  `json:"machines"`
	Updated  int32  `json:"updated"`
	Updating int32  `json:"updating"`
	Pending  int32  `json:"pending"`
	// State is the RollingOut condition's reason (RollingOut, Complete, Paused, Stalled),
	// Message its message: a stalled rollout names its Machine there.
	State   string `json:"state,omitempty"`
	Message string `json:"message,omitempty"`
}

// Image is an OSImage's row.
type Image struct {
	Namespace     string      `json:"namespace"`
	Name          string      `json:"name"`
	Architectures []string    `json:"architectures"`
	Output        string      `json:"output"`
	LatestBuild   string      `json:"latestBuild,omitempty"`
	Index         string      `json:"index,omitempty"`
	Published     []Published `json:"published,omitempty"`
	Rollout       *Rollout    `json:"rollout,omitempty"`
	Ready         Health      `json:"ready"`
}

// BuildArch is one architecture of a build.
type BuildArch struct {
	Architecture string `json:"architecture"`
	Phase        string `json:"phase"`
	Attempts     int32  `json:"attempts,omitempty"`
	Digest       string `json:"digest,omitempty"`
	Reason       string `json:"reason,omitempty"`
	Message      string `json:"message,omitempty"`
	LogTail      string `json:"logTail,omitempty"`
}

// Build is an OSImageBuild's row.
type Build struct {
	Namespace     string      `json:"namespace"`
	Name          string      `json:"name"`
	OSImage       string      `json:"osImage"`
	Architectures []BuildArch `json:"architectures"`
	Index         string      `json:"index,omitempty"`
	Created       metav1.Time `json:"created"`
}

// Cluster is a Cluster API Cluster's row; its Machines are the Machine rows labelled
// with its name.
type Cluster struct {
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	Phase     string      `json:"phase,omitempty"`
	Available Health      `json:"available"`
	Created   metav1.Time `json:"created"`
}

// PoolOf is mp's row.
func PoolOf(mp *computev1alpha1.MachinePool) Pool {
	p := Pool{Name: mp.Name, Kind: providerKind(mp.Spec.ProviderID), Ready: health(mp.Status.Conditions, computev1alpha1.ConditionReady)}
	execution := map[computev1alpha1.Architecture]computev1alpha1.ArchitectureExecution{}
	for _, e := range mp.Status.Execution {
		execution[e.Architecture] = e
	}
	for _, a := range mp.Status.Architectures {
		e := execution[a]
		p.Architectures = append(p.Architectures, PoolArch{Architecture: string(a), Execution: string(e.Execution), Reason: e.Reason})
	}
	if p.Architectures == nil {
		p.Architectures = []PoolArch{}
	}
	p.CPU = Usage{Allocatable: mp.Status.Allocatable.Cpu().MilliValue(), Allocated: mp.Status.Allocated.Cpu().MilliValue()}
	p.Memory = Usage{Allocatable: mp.Status.Allocatable.Memory().Value(), Allocated: mp.Status.Allocated.Memory().Value()}
	return p
}

// providerKind is the scheme of a pool's providerID (qemu://host-7 is qemu).
func providerKind(id string) string {
	scheme, _, ok := strings.Cut(id, "://")
	if !ok {
		return ""
	}
	return scheme
}

// MachineOf is m's row.
func MachineOf(m *computev1alpha1.Machine) Machine {
	r := Machine{Namespace: m.Namespace, Name: m.Name, State: string(m.Status.State), Architecture: string(m.Spec.Architecture),
		Image: m.Spec.Image, Ready: health(m.Status.Conditions, computev1alpha1.ConditionReady),
		Cluster: m.Labels[clusterv1.ClusterNameLabel], Conditions: conditions(m.Status.Conditions), Created: m.CreationTimestamp}
	if r.State == "" {
		r.State = string(computev1alpha1.MachineStatePending)
	}
	if m.Spec.MachinePoolRef != nil {
		r.Pool = m.Spec.MachinePoolRef.Name
	}
	if m.Status.Architecture != "" {
		r.Architecture = string(m.Status.Architecture)
	}
	if m.Status.Image != nil {
		r.Digest = m.Status.Image.Digest
	}
	if c := meta.FindStatusCondition(m.Status.Conditions, computev1alpha1.ConditionImageUpToDate); c != nil {
		r.UpToDate = c.Reason
	}
	return r
}

// HostOf is h's row.
func HostOf(h *metalv1alpha1.Host) Host {
	// Ironic's errors quote the BMC's address: it is cut out of every message.
	hide := bmcRedactor(h.Spec.BMC.Address)
	r := Host{Namespace: h.Namespace, Name: h.Name, Architecture: string(h.Spec.Architecture), State: string(h.Status.ProvisioningState),
		Operational: string(h.Status.OperationalStatus), Power: string(h.Status.PowerState), Online: h.Spec.Online,
		WipeStarted: h.Status.WipeStartedAt, LastError: hide.Replace(h.Status.LastError),
		Ready: health(h.Status.Conditions, computev1alpha1.ConditionReady), Conditions: conditions(h.Status.Conditions)}
	r.Ready.Message = hide.Replace(r.Ready.Message)
	for i := range r.Conditions {
		r.Conditions[i].Message = hide.Replace(r.Conditions[i].Message)
	}
	if c := h.Spec.ConsumerRef; c != nil {
		r.Consumer = c.Namespace + "/" + c.Name
	}
	if hw := h.Status.Hardware; hw != nil {
		r.Hardware = &Hardware{CPUs: hw.CPUs, MemoryMiB: hw.MemoryMiB, Disks: hw.Disks, NICs: hw.NICs}
	}
	return r
}

// bmcRedactor replaces, in a message, a BMC's address and the host in it.
func bmcRedactor(address string) *strings.Replacer {
	pairs := []string{}
	add := func(v string) {
		if v != "" {
			pairs = append(pairs, v, "<bmc>")
		}
	}
	add(address) // whole first: it holds the others
	if u, err := url.Parse(address); err == nil {
		add(u.Host)
		add(u.Hostname())
	}
	return strings.NewReplacer(pairs...)
}

// ImageOf is o's row.
func ImageOf(o *imagesv1alpha1.OSImage) Image {
	r := Image{Namespace: o.Namespace, Name: o.Name, Output: o.Spec.Output.Repository + ":" + o.Spec.Output.Tag,
		LatestBuild: o.Status.LatestBuild, Index: o.Status.Index, Ready: health(o.Status.Conditions, computev1alpha1.ConditionReady)}
	for _, a := range o.Status.Architectures {
		r.Architectures = append(r.Architectures, string(a))
	}
	if r.Architectures == nil {
		r.Architectures = []string{}
	}
	for _, p := range o.Status.Published {
		r.Published = append(r.Published, Published{Architecture: string(p.Architecture), Digest: p.Digest})
	}
	if ro := o.Status.Rollout; ro != nil {
		r.Rollout = &Rollout{Target: ro.Target, Machines: ro.Machines, Updated: ro.Updated, Updating: ro.Updating, Pending: ro.Pending}
		if c := meta.FindStatusCondition(o.Status.Conditions, imagesv1alpha1.ConditionRollingOut); c != nil {
			r.Rollout.State, r.Rollout.Message = c.Reason, c.Message
		}
	}
	return r
}

// BuildOf is b's row: each architecture the build names, with its status when it has one.
func BuildOf(b *imagesv1alpha1.OSImageBuild) Build {
	r := Build{Namespace: b.Namespace, Name: b.Name, OSImage: b.Spec.OSImage, Index: b.Status.Index, Created: b.CreationTimestamp,
		Architectures: []BuildArch{}}
	status := map[computev1alpha1.Architecture]imagesv1alpha1.ArchitectureBuildStatus{}
	for _, s := range b.Status.Architectures {
		status[s.Architecture] = s
	}
	for _, in := range b.Spec.Architectures {
		s, ok := status[in.Architecture]
		a := BuildArch{Architecture: string(in.Architecture), Phase: string(s.Phase), Attempts: s.Attempts, Digest: s.Digest,
			Reason: s.Reason, Message: s.Message, LogTail: s.LogTail}
		if !ok || a.Phase == "" {
			a.Phase = string(imagesv1alpha1.BuildPhasePending)
		}
		r.Architectures = append(r.Architectures, a)
	}
	return r
}

// ClusterOf is c's row.
func ClusterOf(c *clusterv1.Cluster) Cluster {
	return Cluster{Namespace: c.Namespace, Name: c.Name, Phase: c.Status.Phase, Created: c.CreationTimestamp,
		Available: health(c.Status.Conditions, clusterv1.AvailableCondition)}
}

// health is the condition typ of conds as a Health; absent, it is not ok and says so.
func health(conds []metav1.Condition, typ string) Health {
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		return Health{Reason: "NotReported", Message: "no " + typ + " condition yet"}
	}
	return Health{OK: c.Status == metav1.ConditionTrue, Reason: c.Reason, Message: c.Message}
}

func conditions(conds []metav1.Condition) []Condition {
	out := make([]Condition, 0, len(conds))
	for _, c := range conds {
		out = append(out, Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
	}
	return out
}
