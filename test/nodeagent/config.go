package nodeagent

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
)

// Config is what the agent needs; ./cmd/anvil-node-agent fills it from flags and metadata.
type Config struct {
	// Server is the apiserver's https URL, as the node dials it.
	Server string
	// CA is the PEM of the CA the apiserver's serving certificate is checked against.
	CA []byte
	// Token is a bootstrap token (id.secret), used only to ask for the node's certificate.
	Token string
	// NodeName is the Node's name; ProviderID its spec.providerID.
	NodeName   string
	ProviderID string
	// Labels are added to the agent's own (kubernetes.io/arch, os, hostname); the apiserver's
	// NodeRestriction refuses those a node may not set on itself.
	Labels map[string]string
	// CertDir keeps the node's key and certificate, so a restarted agent is the node again
	// without a bootstrap token ("" keeps nothing).
	CertDir string
	// LeaseInterval is how often the Lease is renewed and the Node looked at;
	// StatusInterval how often the status is posted when nothing changed.
	LeaseInterval  time.Duration
	StatusInterval time.Duration
	// Out receives the line RegisteredLine; Log progress and errors.
	Out, Log io.Writer
}

// Defaults of the intervals, the kubelet's: a Lease renewed every 10 s (a quarter of its
// 40 s duration), the status posted every minute when unchanged.
const (
	DefaultLeaseInterval  = 10 * time.Second
	DefaultStatusInterval = time.Minute
	leaseDurationSeconds  = 40
)

// RegisteredLine is printed on Out once the Node exists with its Ready status: tests read
// guests' consoles for it.
func RegisteredLine(node, providerID string) string {
	return fmt.Sprintf("ANVIL-NODE-REGISTERED node=%s providerID=%s", node, providerID)
}

// Complete fills NodeName and ProviderID from md where the flags left them empty (NodeName
// last from the host's name, lowercased as the kubelet does) and the intervals' defaults.
func (c *Config) Complete(md Metadata) {
	if c.NodeName == "" {
		c.NodeName = md.Hostname
	}
	if c.NodeName == "" {
		c.NodeName, _ = os.Hostname()
	}
	c.NodeName = strings.ToLower(c.NodeName)
	if c.ProviderID == "" {
		c.ProviderID = md.ProviderID
	}
	if c.LeaseInterval == 0 {
		c.LeaseInterval = DefaultLeaseInterval
	}
	if c.StatusInterval == 0 {
		c.StatusInterval = DefaultStatusInterval
	}
}

// ownLabels are set by the agent from what it runs on; the Labels may not override them.
var ownLabels = []string{labelArch, labelOS, labelHostname}

const (
	labelArch     = "kubernetes.io/arch"
	labelOS       = "kubernetes.io/os"
	labelHostname = "kubernetes.io/hostname"
)

// Validate says what to fix, naming the flag. The token may be missing when CertDir holds
// the node's certificate already.
func (c *Config) Validate() error {
	u, err := url.Parse(c.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("--server %q: want the apiserver's https://HOST:PORT URL", c.Server)
	}
	if len(c.CA) == 0 {
		return fmt.Errorf("--ca-file: the apiserver's CA certificate (PEM) is required")
	}
	if !bootstraputil.IsValidBootstrapToken(c.Token) && keptCertificate(c.CertDir, c.NodeName, time.Now()) == nil {
		return fmt.Errorf("--token: not a bootstrap token (want [a-z0-9]{6}.[a-z0-9]{16}, as kubeadm token create prints)")
	}
	if c.NodeName == "" {
		return fmt.Errorf("no node name: pass --node-name, or give the guest's metadata a local-hostname")
	}
	if errs := validation.IsDNS1123Subdomain(c.NodeName); len(errs) != 0 {
		return fmt.Errorf("node name %q: %s", c.NodeName, strings.Join(errs, "; "))
	}
	if c.ProviderID == "" {
		return fmt.Errorf("no provider ID: pass --provider-id, or give the guest's metadata a provider-id")
	}
	for k, v := range c.Labels {
		for _, own := range ownLabels {
			if k == own {
				return fmt.Errorf("--labels: %s is set by the agent", k)
			}
		}
		if errs := validation.IsQualifiedName(k); len(errs) != 0 {
			return fmt.Errorf("--labels: key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) != 0 {
			return fmt.Errorf("--labels: value of %s %q: %s", k, v, strings.Join(errs, "; "))
		}
	}
	if c.LeaseInterval <= 0 || c.StatusInterval <= 0 {
		return fmt.Errorf("--lease-interval and --status-interval must be positive")
	}
	return nil
}

// ParseLabels reads k=v,k2=v2 ("" is none).
func ParseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--labels: %q is not key=value", kv)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("--labels: %s is given twice", k)
		}
		out[k] = v
	}
	return out, nil
}
