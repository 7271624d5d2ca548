package registrynet

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// RegistryCredentialsUsage is the help of --registry-credentials, one flag of one meaning
// wherever a process reads registries for tenants.
const RegistryCredentialsUsage = "a docker config file (its \"auths\") whose logins are presented to the registries it names, and to no other: an infrastructure registry's read-only identity for pools; tenants' registries are read anonymously"

// LoadLogins reads the logins of a docker config file: each entry of "auths", keyed by the
// registry's address (host[:port]; a scheme or path is dropped), from "auth" (base64 of
// user:password) or "username" and "password". Credential helpers are not run: the file
// is all a process presents. An empty path is no logins.
func LoadLogins(path string) (map[string]Login, error) {
	if path == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Auths map[string]struct {
			Auth               string `json:"auth"`
			Username, Password string
		} `json:"auths"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s: not a docker config: %w", path, err)
	}
	logins := map[string]Login{}
	for key, a := range cfg.Auths {
		host := strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
		host, _, _ = strings.Cut(host, "/")
		l := Login{Username: a.Username, Password: a.Password}
		if a.Auth != "" {
			// The error says which registry, never what the value was.
			decoded, err := base64.StdEncoding.DecodeString(a.Auth)
			user, pass, ok := strings.Cut(string(decoded), ":")
			if err != nil || !ok {
				return nil, fmt.Errorf("%s: the auth of %s is not base64 of user:password", path, key)
			}
			l = Login{Username: user, Password: pass}
		}
		if host == "" || l.Username == "" {
			return nil, fmt.Errorf("%s: the entry %q names no registry or no user", path, key)
		}
		logins[host] = l
	}
	return logins, nil
}

// WriteLogins writes a docker config file (0600) giving login to each of hosts: what
// LoadLogins, and any registry client reading DOCKER_CONFIG, reads.
func WriteLogins(path string, login Login, hosts ...string) error {
	auth := map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(login.Username + ":" + login.Password))}
	auths := map[string]any{}
	for _, h := range hosts {
		auths[h] = auth
	}
	raw, err := json.Marshal(map[string]any{"auths": auths})
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o600)
}
