package nodeagent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
)

const (
	nodesPath  = "/api/v1/nodes"
	leasesPath = "/apis/coordination.k8s.io/v1/namespaces/" + leaseNamespace + "/leases"
)

// Run makes the agent's node a Node of cfg.Server and keeps it fresh until ctx ends (the
// agent's SIGTERM), then returns nil without marking anything: a stopped node is noticed by
// the node lifecycle controller, as a stopped kubelet is. cfg must be Complete and Valid.
// It returns an error when the node cannot be registered for a reason retrying does not
// cure (the token refused, NodeRestriction refusing a label, a Node of that name with
// another provider ID).
func Run(ctx context.Context, cfg Config) error {
	cert := keptCertificate(cfg.CertDir, cfg.NodeName, time.Now())
	if cert == nil {
		var err error
		if cert, err = bootstrap(ctx, &cfg); err != nil {
			return stopped(ctx, err)
		}
	}
	a, err := newAgent(&cfg, cert)
	if err != nil {
		return err
	}
	if err := a.register(ctx); err != nil {
		return stopped(ctx, err)
	}
	fmt.Fprintln(cfg.Out, RegisteredLine(cfg.NodeName, cfg.ProviderID))
	tick := time.NewTicker(cfg.LeaseInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := a.heartbeat(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintf(cfg.Log, "anvil-node-agent: %v\n", err)
		}
	}
}

// stopped is nil when err only says ctx ended: a SIGTERM during the bootstrap is no failure.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}

// agent is a registered node's heartbeat state.
type agent struct {
	cfg        *Config
	c          *client
	facts      Facts
	node       *corev1.Node // as last read or written
	lease      *coordinationv1.Lease
	lastPosted time.Time
}

func newAgent(cfg *Config, cert *tls.Certificate) (*agent, error) {
	c, err := newClient(cfg.Server, cfg.CA, "", cert)
	if err != nil {
		return nil, err
	}
	return &agent{cfg: cfg, c: c, facts: GatherFacts(cfg.NodeName)}, nil
}

// register creates the Node (or takes the one of its name that a previous boot made, when
// its provider ID is this one), posts its status and renews its Lease.
func (a *agent) register(ctx context.Context) error {
	want := NewNode(a.cfg, a.facts)
	var node corev1.Node
	err := retry(ctx, a.cfg.Log, "creating the Node", func() error {
		return a.c.do(ctx, http.MethodPost, nodesPath, contentJSON, want, &node)
	})
	switch {
	case codeOf(err) == http.StatusConflict:
		if err := retry(ctx, a.cfg.Log, "reading the Node", func() error {
			return a.c.do(ctx, http.MethodGet, nodesPath+"/"+want.Name, "", nil, &node)
		}); err != nil {
			return err
		}
		if node.Spec.ProviderID != "" && node.Spec.ProviderID != want.Spec.ProviderID {
			return fmt.Errorf("a Node %s exists with provider ID %s, not %s: delete it, or give this node another name", node.Name, node.Spec.ProviderID, want.Spec.ProviderID)
		}
		fmt.Fprintf(a.cfg.Log, "anvil-node-agent: Node %s exists (an earlier boot's): taking it over\n", node.Name)
	case codeOf(err) == http.StatusForbidden:
		return fmt.Errorf("the apiserver refused to create Node %s as %s (NodeRestriction refuses labels in kubernetes.io or k8s.io a node may not set, see --labels): %w", want.Name, nodeUser(want.Name), err)
	case err != nil:
		return fmt.Errorf("creating Node %s: %w", want.Name, err)
	}
	a.node = &node
	if err := a.postStatus(ctx); err != nil {
		return err
	}
	return a.renewLease(ctx)
}

// heartbeat renews the Lease, reads the Node and posts the status when it must.
func (a *agent) heartbeat(ctx context.Context) error {
	if err := a.renewLease(ctx); err != nil {
		return err
	}
	var node corev1.Node
	if err := a.c.do(ctx, http.MethodGet, nodesPath+"/"+a.cfg.NodeName, "", nil, &node); err != nil {
		if codeOf(err) == http.StatusNotFound {
			// Deleted on purpose (Cluster API deletes a Machine's Node): never made again.
			return fmt.Errorf("Node %s was deleted; not registering it again", a.cfg.NodeName)
		}
		return fmt.Errorf("reading Node %s: %w", a.cfg.NodeName, err)
	}
	a.node = &node
	if !NeedsStatus(a.node, a.lastPosted, time.Now(), a.cfg.StatusInterval) {
		return nil
	}
	return a.postStatus(ctx)
}

// postStatus merges the agent's status into the Node's: the lists it posts (conditions,
// addresses) are replaced whole, which they are the agent's to say.
func (a *agent) postStatus(ctx context.Context) error {
	now := time.Now()
	patch := map[string]any{"status": NodeStatus(a.facts, a.node, now)}
	var node corev1.Node
	if err := a.c.do(ctx, http.MethodPatch, nodesPath+"/"+a.cfg.NodeName+"/status", contentMergePatch, patch, &node); err != nil {
		return fmt.Errorf("posting the status of Node %s: %w", a.cfg.NodeName, err)
	}
	a.node, a.lastPosted = &node, now
	return nil
}

// renewLease updates the Lease's renew time, creating it when missing; a conflict (someone
// else wrote it) is solved by reading it again at the next beat.
func (a *agent) renewLease(ctx context.Context) error {
	path := leasesPath + "/" + a.cfg.NodeName
	if a.lease == nil {
		var lease coordinationv1.Lease
		err := a.c.do(ctx, http.MethodGet, path, "", nil, &lease)
		switch {
		case codeOf(err) == http.StatusNotFound:
			if err := a.c.do(ctx, http.MethodPost, leasesPath, contentJSON, NewLease(a.node, time.Now()), &lease); err != nil {
				return fmt.Errorf("creating Lease %s/%s: %w", leaseNamespace, a.cfg.NodeName, err)
			}
			a.lease = &lease
			return nil
		case err != nil:
			return fmt.Errorf("reading Lease %s/%s: %w", leaseNamespace, a.cfg.NodeName, err)
		}
		a.lease = &lease
	}
	renewed := NewLease(a.node, time.Now())
	renewed.ObjectMeta = a.lease.ObjectMeta
	var lease coordinationv1.Lease
	if err := a.c.do(ctx, http.MethodPut, path, contentJSON, renewed, &lease); err != nil {
		a.lease = nil
		return fmt.Errorf("renewing Lease %s/%s: %w", leaseNamespace, a.cfg.NodeName, err)
	}
	a.lease = &lease
	return nil
}
