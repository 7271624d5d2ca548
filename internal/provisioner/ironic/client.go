package ironic

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/gophercloud/gophercloud/v2"

	"github.com/anvil-dev/anvil/internal/provisioner"
)

// Options configure a Provisioner.
type Options struct {
	// Endpoint is Ironic's base URL (http://127.0.0.1:PORT/); a trailing /v1 is allowed.
	Endpoint string
	// Username and Password are Ironic's HTTP basic credentials.
	Username, Password string
	// MaxConcurrentDeploy bounds nodes deploying or adopting at once, from this process;
	// 0 means 250 (Ironic's default limit).
	MaxConcurrentDeploy int
	// MaxConcurrentClean bounds nodes cleaning (Provide, Deprovision) at once; 0 means 50.
	MaxConcurrentClean int
	// HTTPClient talks to Ironic; a client with a 30 s timeout when nil.
	HTTPClient *http.Client
	Logger     logr.Logger
	// OnSlotFree, when set, is called with a node that was told ErrBusy for want of a
	// deploy or clean slot once a slot is free for it, so the caller can retry at once
	// instead of polling. It must not block.
	OnSlotFree func(name string)
	// CheckInterval is how often the nodes holding a slot are looked at; 1 s when zero.
	CheckInterval time.Duration
}

// Microversions: anvil needs 1.56 (JSON config drive); it asks for at most the newest it
// was tested with; 1.81 added the inventory API.
const (
	minVersion       = 56
	maxVersion       = 82
	inventoryVersion = 81
)

// Defaults of Options left zero.
const (
	DefaultMaxConcurrentDeploy = 250
	DefaultMaxConcurrentClean  = 50
	defaultCheckInterval       = time.Second
	// Calls retry temporary failures (503, connection refused) this many times in all,
	// backing off from retryBase, doubling, with jitter.
	attempts  = 5
	retryBase = 200 * time.Millisecond
)

// Provisioner is provisioner.Provisioner on Ironic. Safe for concurrent use.
type Provisioner struct {
	sc        *gophercloud.ServiceClient
	version   int // the negotiated 1.x
	hashKey   string
	log       logr.Logger
	notify    func(string)
	interval  time.Duration
	deploys   *queue
	cleans    *queue
	checkMu   sync.Mutex
	checking  bool
	closed    chan struct{}
	closeOnce sync.Once
	recent    recentReads
}

var _ provisioner.Provisioner = (*Provisioner)(nil)

// New connects to Ironic: it negotiates the API microversion, then learns once which
// nodes are deploying or cleaning, so the queues start with the slots they hold.
func New(ctx context.Context, o Options) (*Provisioner, error) {
	if o.Endpoint == "" || o.Username == "" || o.Password == "" {
		return nil, fmt.Errorf("ironic provisioner: Endpoint, Username and Password are required")
	}
	base := strings.TrimSuffix(strings.TrimRight(o.Endpoint, "/"), "/v1") + "/"
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	if o.MaxConcurrentDeploy <= 0 {
		o.MaxConcurrentDeploy = DefaultMaxConcurrentDeploy
	}
	if o.MaxConcurrentClean <= 0 {
		o.MaxConcurrentClean = DefaultMaxConcurrentClean
	}
	if o.CheckInterval <= 0 {
		o.CheckInterval = defaultCheckInterval
	}
	p := &Provisioner{
		sc: &gophercloud.ServiceClient{
			ProviderClient: &gophercloud.ProviderClient{HTTPClient: *hc},
			Endpoint:       base + "v1/",
			Type:           "baremetal",
			MoreHeaders: map[string]string{
				"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(o.Username+":"+o.Password)),
			},
		},
		hashKey:  o.Password,
		log:      o.Logger,
		notify:   o.OnSlotFree,
		interval: o.CheckInterval,
		deploys:  newQueue("deploy", o.MaxConcurrentDeploy, stDeploying, stDeployWait, stAdopting),
		cleans:   newQueue("clean", o.MaxConcurrentClean, stCleaning, stCleanWait, stDeleting),
		closed:   make(chan struct{}),
	}
	if err := p.negotiate(ctx, base); err != nil {
		return nil, err
	}
	if err := p.seed(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// Close stops the background check of the nodes holding a slot.
func (p *Provisioner) Close() {
	p.closeOnce.Do(func() { close(p.closed) })
}

// Microversion is the negotiated API version, as "1.x".
func (p *Provisioner) Microversion() string { return p.sc.Microversion }

// negotiate picks min(Ironic's newest, maxVersion) and refuses an Ironic older than
// minVersion.
func (p *Provisioner) negotiate(ctx context.Context, base string) error {
	var root struct {
		Versions []struct {
			ID      string `json:"id"`
			Version string `json:"version"`
		} `json:"versions"`
		DefaultVersion struct {
			Version string `json:"version"`
		} `json:"default_version"`
	}
	err := p.do(ctx, "reading Ironic's API versions", func(ctx context.Context) error {
		_, err := p.sc.Get(ctx, base, &root, &gophercloud.RequestOpts{OkCodes: []int{200}})
		return err
	})
	if err != nil {
		return err
	}
	have := root.DefaultVersion.Version
	for _, v := range root.Versions {
		if v.ID == "v1" {
			have = v.Version
		}
	}
	minor, ok := minorOf(have)
	if !ok || minor < minVersion {
		return fmt.Errorf("Ironic at %s speaks API %q; anvil needs 1.%d or newer (Ironic 13.0, Train): %w",
			base, have, minVersion, provisioner.ErrInvalid)
	}
	p.version = min(minor, maxVersion)
	p.sc.Microversion = "1." + strconv.Itoa(p.version)
	return nil
}

func minorOf(v string) (int, bool) {
	major, minor, ok := strings.Cut(v, ".")
	if !ok || major != "1" {
		return 0, false
	}
	n, err := strconv.Atoi(minor)
	return n, err == nil
}

// seed lists the nodes once, only their names and states, and gives those deploying or
// cleaning their slots.
func (p *Provisioner) seed(ctx context.Context) error {
	next := p.sc.ServiceURL("nodes") + "?fields=uuid,name,provision_state&limit=1000"
	for next != "" {
		var page struct {
			Nodes []struct {
				UUID           string `json:"uuid"`
				Name           string `json:"name"`
				ProvisionState string `json:"provision_state"`
			} `json:"nodes"`
			Next string `json:"next"`
		}
		url := next
		err := p.do(ctx, "listing the nodes being deployed or cleaned", func(ctx context.Context) error {
			_, err := p.sc.Get(ctx, url, &page, &gophercloud.RequestOpts{OkCodes: []int{200}})
			return err
		})
		if err != nil {
			return err
		}
		for _, n := range page.Nodes {
			name := n.Name
			if name == "" {
				name = n.UUID
			}
			for _, q := range []*queue{p.deploys, p.cleans} {
				if containsState(q.states, n.ProvisionState) {
					q.hold(name)
				}
			}
		}
		next = page.Next
	}
	p.kick()
	return nil
}

func containsState(states []string, s string) bool {
	for _, x := range states {
		if x == s {
			return true
		}
	}
	return false
}

// do runs f, retrying temporary failures with exponential back-off and jitter; a failure
// that remains is classified (ErrUnavailable for the temporary ones).
func (p *Provisioner) do(ctx context.Context, what string, f func(context.Context) error) error {
	delay := retryBase
	for attempt := 1; ; attempt++ {
		err := f(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, ctx.Err())
		}
		if !temporary(err) || attempt >= attempts {
			return classify(what, err)
		}
		wait := delay/2 + rand.N(delay)
		delay *= 2
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// validName: Ironic node names are URL path segments of unreserved characters.
var validName = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,255}$`)

func checkName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("node name %q: only letters, digits and . _ ~ - are allowed: %w", name, provisioner.ErrInvalid)
	}
	return nil
}

// rawJSON is a request body gophercloud sends as it is.
type rawJSON map[string]any

func (r rawJSON) ToNodeCreateMap() (map[string]any, error) { return r, nil }
func (r rawJSON) ToPortCreateMap() (map[string]any, error) { return r, nil }
