package dev

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/anvil-dev/anvil/internal/registry"
	"github.com/anvil-dev/anvil/internal/registrynet"
)

// registryAuthFile holds anvil dev's registry credentials, made on the first start and
// kept, so what was given out (builders' job Secrets, a user's DOCKER_CONFIG) stays valid.
const registryAuthFile = "registry-auth.json"

// pushUser and readUser are the user names of the registry's push credential and of the
// pools' read-only one.
const (
	pushUser = "anvil-push"
	readUser = "anvil-pools"
)

// registryAuth loads anvil dev's registry credentials from stateDir, or makes them. A
// file from before scoped or read credentials gets what it lacks added.
func registryAuth(stateDir string) (*registry.Auth, error) {
	path := filepath.Join(stateDir, registryAuthFile)
	a := &registry.Auth{}
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(raw, a); err != nil || a.Push.Username == "" || a.Push.Password == "" {
			return nil, fmt.Errorf("%s: not anvil dev's registry credentials (remove it to make new ones): %v", path, err)
		}
		if len(a.ScopeKey) > 0 && a.Read != nil {
			return a, nil
		}
	case errors.Is(err, fs.ErrNotExist):
		a.Push = registry.Credential{Username: pushUser, Password: randomHex(24)}
	default:
		return nil, err
	}
	if len(a.ScopeKey) == 0 {
		a.ScopeKey = make([]byte, 32)
		if _, err := rand.Read(a.ScopeKey); err != nil {
			return nil, err
		}
	}
	if a.Read == nil {
		a.Read = &registry.Credential{Username: readUser, Password: randomHex(24)}
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

// randomHex is n random bytes in hex: a password. crypto/rand does not fail on Linux.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// writeDockerConfig writes, into stateDir/docker (0700), a docker config giving the push
// credential for the registry at host (and as localhost), and returns the folder: what
// DOCKER_CONFIG names for this process's pushes and a user's `anvil image push`.
func writeDockerConfig(stateDir, host string, push registry.Credential) (string, error) {
	dir := filepath.Join(stateDir, "docker")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	login := registrynet.Login{Username: push.Username, Password: push.Password}
	return dir, registrynet.WriteLogins(filepath.Join(dir, "config.json"), login, devRegistry(host)...)
}

// poolsCredentialsFile is the docker config of the pools' read credential
// (--registry-credentials of the manager and pools).
const poolsCredentialsFile = "registry-read.json"

// writePoolsCredentials writes the pools' read credential for the registry at host (and
// as localhost) into stateDir, and returns the file and its logins.
func writePoolsCredentials(stateDir, host string, read registry.Credential) (string, map[string]registrynet.Login, error) {
	path := filepath.Join(stateDir, poolsCredentialsFile)
	if err := registrynet.WriteLogins(path, registrynet.Login{Username: read.Username, Password: read.Password}, devRegistry(host)...); err != nil {
		return "", nil, err
	}
	logins, err := registrynet.LoadLogins(path)
	return path, logins, err
}

// builderPush mints the credentials builders push with: each writes to one build's output
// repository only, since its job Secret is in the tenant's namespace.
func builderPush(a *registry.Auth) func(repository string, reads []string, expires time.Time) authn.Basic {
	return func(repository string, reads []string, expires time.Time) authn.Basic {
		c := registry.ScopedPush(a.ScopeKey, repository, reads, expires)
		return authn.Basic{Username: c.Username, Password: c.Password}
	}
}
