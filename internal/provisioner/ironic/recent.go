package ironic

import (
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// reuseFor is how long the node a caller has just read with Get stands in for the read an
// operation would otherwise start with. The Host controller reads a node and acts on it in
// the same breath; Ironic is one Python process whose CPU is the limit of a fleet's
// provisioning, so that second read is worth saving. Ironic itself refuses a transition
// the node has moved away from meanwhile.
const reuseFor = time.Second

// recentReads holds each node's last Get, to be used once. A write to a node forgets its
// read, and a read that started before a write is never kept.
type recentReads struct {
	mu     sync.Mutex
	nodes  map[string]recentRead
	writes map[string]uint64
}

type recentRead struct {
	node *nodes.Node // nil: Ironic said there is no such node
	at   time.Time
}

// begin is called before a read; its answer is put with what begin returned.
func (r *recentReads) begin(name string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes[name]
}

// put keeps a read unless the node was written since the read began.
func (r *recentReads) put(name string, n *nodes.Node, began uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.writes[name] != began {
		return
	}
	if r.nodes == nil {
		r.nodes = map[string]recentRead{}
	}
	r.nodes[name] = recentRead{node: n, at: time.Now()}
}

// written forgets the node's read: it is about to change, or just did.
func (r *recentReads) written(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.writes == nil {
		r.writes = map[string]uint64{}
	}
	r.writes[name]++
	delete(r.nodes, name)
}

// take returns and forgets the node's last Get if it is fresh enough; found says whether
// there was one (a nil node then means "not found").
func (r *recentReads) take(name string) (n *nodes.Node, found bool) { return r.lookup(name, true) }

// peek is take without forgetting: for reads that change nothing, so the operation that
// follows them may still use the node.
func (r *recentReads) peek(name string) (n *nodes.Node, found bool) { return r.lookup(name, false) }

func (r *recentReads) lookup(name string, forget bool) (*nodes.Node, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	read, ok := r.nodes[name]
	if forget {
		delete(r.nodes, name)
	}
	if !ok || time.Since(read.at) > reuseFor {
		return nil, false
	}
	return read.node, true
}
