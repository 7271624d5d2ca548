package registry

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
)

// Credential is a user name and password for HTTP basic auth.
type Credential struct {
	Username, Password string
}

// Auth makes the registry take writes only from the holder of Push. Reads stay open to
// anyone (anonymous, or with Read: a read-only identity for pools that want one).
type Auth struct {
	Push Credential
	Read *Credential
}

type identity int

const (
	anonymous identity = iota
	reader
	pusher
	stranger // presented credentials that are neither
)

func (a *Auth) identify(r *http.Request) identity {
	user, pass, ok := r.BasicAuth()
	switch {
	case !ok:
		if r.Header.Get("Authorization") != "" {
			return stranger
		}
		return anonymous
	case a.Push.matches(user, pass):
		return pusher
	case a.Read != nil && a.Read.matches(user, pass):
		return reader
	}
	return stranger
}

func (c Credential) matches(user, pass string) bool {
	// Both compared, in constant time, so a timing does not tell which was wrong.
	u := subtle.ConstantTimeCompare([]byte(user), []byte(c.Username))
	p := subtle.ConstantTimeCompare([]byte(pass), []byte(c.Password))
	return c.Username != "" && u&p == 1
}

// wrap refuses, before distribution sees them, writes by anyone but the pusher.
func (a *Auth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := a.identify(r)
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		switch {
		case who == pusher:
			next.ServeHTTP(w, r)
		case who == stranger:
			refuse(w, http.StatusUnauthorized, "UNAUTHORIZED", "wrong user name or password")
		case read && r.URL.Path == "/v2/" && who == anonymous:
			// The version check is where clients learn that the registry takes basic auth;
			// a client without credentials goes on reading anonymously.
			refuse(w, http.StatusUnauthorized, "UNAUTHORIZED", "pushing needs the registry's push credential")
		case read:
			next.ServeHTTP(w, r)
		case who == reader:
			refuse(w, http.StatusForbidden, "DENIED", "this credential may only read")
		default:
			refuse(w, http.StatusUnauthorized, "UNAUTHORIZED", "pushing needs the registry's push credential")
		}
	})
}

func refuse(w http.ResponseWriter, status int, code, message string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="anvil registry"`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": message}}})
}
