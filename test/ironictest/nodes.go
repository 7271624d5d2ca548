package ironictest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/anvil-dev/anvil/internal/ironic"
)

// removeNodes deletes every node irc holds, each put in maintenance first so that Ironic
// deletes it in any state without touching its server (as the provisioner's Detach does).
// A node an operation under way holds (409) is tried again until ctx ends.
func removeNodes(ctx context.Context, irc *ironic.Ironic) error {
	api := NewAPI(irc)
	for {
		var list struct {
			Nodes []struct {
				UUID        string `json:"uuid"`
				Name        string `json:"name"`
				Maintenance bool   `json:"maintenance"`
			} `json:"nodes"`
		}
		if err := api.Call(ctx, http.MethodGet, "v1/nodes?fields=uuid,name,maintenance", nil, &list, http.StatusOK); err != nil {
			return fmt.Errorf("listing the nodes: %w", err)
		}
		if len(list.Nodes) == 0 {
			return nil
		}
		left := map[string]error{}
		for _, n := range list.Nodes {
			var err error
			if !n.Maintenance {
				err = api.Call(ctx, http.MethodPut, "v1/nodes/"+n.UUID+"/maintenance", map[string]string{"reason": "removed after the test"},
					nil, http.StatusAccepted, http.StatusNotFound)
			}
			if err == nil {
				err = api.Call(ctx, http.MethodDelete, "v1/nodes/"+n.UUID, nil, nil, http.StatusNoContent, http.StatusNotFound)
			}
			if err != nil {
				left[n.Name] = err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodes left: %s", describe(left))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// describe lists nodes with why each is still there, sorted by name.
func describe(left map[string]error) string {
	var out []string
	for name, err := range left {
		out = append(out, fmt.Sprintf("%s (%v)", name, err))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// API calls Ironic's API as a script would (JSON over HTTP, basic auth, the latest API
// version), with none of anvil's code between: for removing a test's nodes, and for
// benchmarks that drive Ironic by hand against anvil.
type API struct {
	endpoint, username, password string
	client                       *http.Client
}

// NewAPI is the API of irc, with its credentials.
func NewAPI(irc *ironic.Ironic) API {
	a := API{endpoint: irc.Endpoint(), client: &http.Client{Timeout: 30 * time.Second}}
	a.username, a.password = irc.Credentials()
	return a
}

// Call sends body (JSON, when set; a JSON patch for PATCH) to path (relative to the
// endpoint, such as "v1/nodes") and decodes the answer into out (when set); an answer of
// another status than one of ok is an error carrying Ironic's message.
func (a API) Call(ctx context.Context, method, path string, body, out any, ok ...int) error {
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.endpoint+path, in)
	if err != nil {
		return err
	}
	req.SetBasicAuth(a.username, a.password)
	req.Header.Set("X-OpenStack-Ironic-API-Version", "latest")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if body != nil && method == http.MethodPatch {
		req.Header.Set("Content-Type", "application/json-patch+json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	for _, code := range ok {
		if resp.StatusCode != code {
			continue
		}
		if out != nil && len(bytes.TrimSpace(b)) > 0 {
			return json.Unmarshal(b, out)
		}
		return nil
	}
	return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
}
