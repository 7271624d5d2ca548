package registry

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"
)

// scopedPrefix starts the user name of a scoped credential:
// "scoped-push/<expiry, Unix seconds>/<repository>[+<read repository>...]". A repository
// name holds neither a colon nor a plus, so the user name fits HTTP basic auth and splits
// one way only.
const scopedPrefix = "scoped-push/"

// Scope is what a scoped credential may do: write to and read Push, and read Reads.
type Scope struct {
	Push  string
	Reads []string
}

func (s Scope) reads(repository string) bool {
	return repository == s.Push || slices.Contains(s.Reads, repository)
}

// ScopedPush mints a credential that writes to repository only (as the registry names it:
// "team-a/my-os", no host) and reads it and reads (a build's base) only, until expires. Its
// password is an HMAC of its user name under key, so the registry checks it without storing
// anything, and nobody without the key can widen its scope or extend it.
func ScopedPush(key []byte, repository string, reads []string, expires time.Time) Credential {
	user := scopedPrefix + strconv.FormatInt(expires.Unix(), 10) + "/" + strings.Join(append([]string{repository}, reads...), "+")
	return Credential{Username: user, Password: scopedPassword(key, user)}
}

func scopedPassword(key []byte, user string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(user))
	return hex.EncodeToString(m.Sum(nil))
}

// scopeOf is what a scoped credential may do, or ok false when user and pass are not a
// scoped credential made with key that is still valid at now.
func scopeOf(key []byte, user, pass string, now time.Time) (scope Scope, ok bool) {
	rest, found := strings.CutPrefix(user, scopedPrefix)
	if !found || len(key) == 0 {
		return Scope{}, false
	}
	// The password first, in constant time: nothing else about the user name is believed
	// before it is known to be the registry's own.
	if !hmac.Equal([]byte(pass), []byte(scopedPassword(key, user))) {
		return Scope{}, false
	}
	expiry, repositories, found := strings.Cut(rest, "/")
	if !found {
		return Scope{}, false
	}
	unix, err := strconv.ParseInt(expiry, 10, 64)
	if err != nil || !now.Before(time.Unix(unix, 0)) {
		return Scope{}, false
	}
	names := strings.Split(repositories, "+")
	if slices.Contains(names, "") {
		return Scope{}, false
	}
	return Scope{Push: names[0], Reads: names[1:]}, true
}
