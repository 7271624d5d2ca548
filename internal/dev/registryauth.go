package dev

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/anvil-dev/anvil/internal/registry"
)

// registryAuthFile holds anvil dev's registry credentials, made on the first start and
// kept, so what was given out (builders' job Secrets, a user's DOCKER_CONFIG) stays valid.
const registryAuthFile = "registry-auth.json"

// pushUser is the user name of the registry's push credential.
const pushUser = "anvil-push"

// registryAuth loads anvil dev's registry credentials from stateDir, or makes them. A
// file from before scoped credentials gets a scope key added.
func registryAuth(stateDir string) (*registry.Auth, error) {
	path := filepath.Join(stateDir, registryAuthFile)
	a := &registry.Auth{}
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(raw, a); err != nil || a.Push.Username == "" || a.Push.Password == "" {
			return nil, fmt.Errorf("%s: not anvil dev's registry credentials (remove it to make new ones): %v", path, err)
		}
		if len(a.ScopeKey) > 0 {
			return a, nil
		}
	case errors.Is(err, fs.ErrNotExist):
		secret := make([]byte, 24)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
		a.Push = registry.Credential{Username: pushUser, Password: hex.EncodeToString(secret)}
	default:
		return nil, err
	}
	a.ScopeKey = make([]byte, 32)
	if _, err := rand.Read(a.ScopeKey); err != nil {
		return nil, err
	}
	raw, err = json.Marshal(a)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return nil, fmt.Errorf("saving the registry's credentials: %w", err)
	}
	return a, nil
}

// writeDockerConfig writes, into stateDir/docker (0700), a docker config giving the push
// credential for the registry at host (and as localhost), and returns the folder: what
// DOCKER_CONFIG names for this process's pushes and a user's `anvil image push`.
func writeDockerConfig(stateDir, host string, push registry.Credential) (string, error) {
	dir := filepath.Join(stateDir, "docker")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	auth := map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(push.Username + ":" + push.Password))}
	auths := map[string]any{host: auth}
	if _, port, err := net.SplitHostPort(host); err == nil {
		auths[net.JoinHostPort("localhost", port)] = auth
	}
	raw, err := json.Marshal(map[string]any{"auths": auths})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o600); err != nil {
		return "", err
	}
	return dir, nil
}

// builderPush mints the credentials builders push with: each writes to one build's output
// repository only, since its job Secret is in the tenant's namespace.
func builderPush(a *registry.Auth) func(repository string, expires time.Time) authn.Basic {
	return func(repository string, expires time.Time) authn.Basic {
		c := registry.ScopedPush(a.ScopeKey, repository, expires)
		return authn.Basic{Username: c.Username, Password: c.Password}
	}
}
