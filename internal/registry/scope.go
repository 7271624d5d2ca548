package registry

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// scopedPrefix starts the user name of a scoped push credential:
// "scoped-push/<expiry, Unix seconds>/<repository>". A repository name holds no colon, so
// the user name fits HTTP basic auth.
const scopedPrefix = "scoped-push/"

// ScopedPush mints a credential that writes only to repository (as the registry names it:
// "team-a/my-os", no host) until expires. Its password is an HMAC of its user name under
// key, so the registry checks it without storing anything, and nobody without the key can
// widen its scope or extend it.
func ScopedPush(key []byte, repository string, expires time.Time) Credential {
	user := scopedPrefix + strconv.FormatInt(expires.Unix(), 10) + "/" + repository
	return Credential{Username: user, Password: scopedPassword(key, user)}
}

func scopedPassword(key []byte, user string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(user))
	return hex.EncodeToString(m.Sum(nil))
}

// scopedRepository is the repository a scoped credential may write to, or ok false when
// user and pass are not a scoped credential made with key that is still valid at now.
func scopedRepository(key []byte, user, pass string, now time.Time) (repository string, ok bool) {
	rest, found := strings.CutPrefix(user, scopedPrefix)
	if !found || len(key) == 0 {
		return "", false
	}
	// The password first, in constant time: nothing else about the user name is believed
	// before it is known to be the registry's own.
	if !hmac.Equal([]byte(pass), []byte(scopedPassword(key, user))) {
		return "", false
	}
	expiry, repository, found := strings.Cut(rest, "/")
	if !found || repository == "" {
		return "", false
	}
	unix, err := strconv.ParseInt(expiry, 10, 64)
	if err != nil || !now.Before(time.Unix(unix, 0)) {
		return "", false
	}
	return repository, true
}
