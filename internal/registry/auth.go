package registry

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"time"

	v2 "github.com/distribution/distribution/v3/registry/api/v2"
	"github.com/gorilla/mux"
)

// Credential is a user name and password for HTTP basic auth.
type Credential struct {
	Username, Password string
}

// Auth makes the registry take writes only from the holder of Push, or, for one
// repository, from the holder of a credential ScopedPush made with ScopeKey (what
// builders get). Reads stay open to anyone (anonymous, or with Read: a read-only identity
// for pools that want one).
type Auth struct {
	Push Credential
	Read *Credential
	// ScopeKey signs scoped push credentials; without it none is accepted. It never
	// leaves the registry's and the credential minter's process.
	ScopeKey []byte `json:",omitempty"`
}

type identity int

const (
	anonymous identity = iota
	reader
	pusher
	scoped   // writes to one repository: the one identify returns
	stranger // presented credentials that are none of these (or expired)
)

func (a *Auth) identify(r *http.Request, now time.Time) (identity, string) {
	user, pass, ok := r.BasicAuth()
	switch {
	case !ok:
		if r.Header.Get("Authorization") != "" {
			return stranger, ""
		}
		return anonymous, ""
	case a.Push.matches(user, pass):
		return pusher, ""
	case a.Read != nil && a.Read.matches(user, pass):
		return reader, ""
	}
	if repository, ok := scopedRepository(a.ScopeKey, user, pass, now); ok {
		return scoped, repository
	}
	return stranger, ""
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
		who, scope := a.identify(r, time.Now())
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		switch {
		case who == pusher:
			next.ServeHTTP(w, r)
		case who == scoped && !read:
			if why := outsideScope(r, scope); why != "" {
				refuse(w, http.StatusForbidden, "DENIED", why)
				return
			}
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

// scopedRoutes are the routes a scoped credential may write through, in its repository.
var scopedRoutes = map[string]bool{
	v2.RouteNameManifest: true, v2.RouteNameBlob: true, v2.RouteNameBlobUpload: true, v2.RouteNameBlobUploadChunk: true,
}

// outsideScope says why the write r is not one to repository only, or "" when it is. The
// request is matched with distribution's own router, so the repository checked is the one
// distribution will write to; a path it does not route is refused.
func outsideScope(r *http.Request, repository string) string {
	var m mux.RouteMatch
	if !v2.Router().Match(r, &m) || m.Route == nil || !scopedRoutes[m.Route.GetName()] {
		return "this credential may write only to repository " + repository
	}
	if m.Vars["name"] != repository {
		return "this credential may write only to repository " + repository + ", not " + m.Vars["name"]
	}
	// A cross-repository mount reads a blob of another repository into this one: only
	// from the scope's own repository.
	if q := r.URL.Query(); q.Has("mount") && q.Get("from") != repository {
		return "this credential may mount blobs only from repository " + repository
	}
	return ""
}

func refuse(w http.ResponseWriter, status int, code, message string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="anvil registry"`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": message}}})
}
