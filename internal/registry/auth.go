package registry

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"
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
// builders get). With Read set, reading needs a credential too: Read (the pools'
// read-only identity), Push, or a scoped credential for the repositories it names; without
// it anyone reads. Public folders are read by anyone either way.
type Auth struct {
	Push Credential
	Read *Credential
	// Public are folders ("anvil/kube") whose repositories anyone may read without a
	// credential: images built from public sources, which machines that hold no credential
	// pull (a kubeadm node's containerd). Only the push credential writes there, never a
	// scoped one. A setting of the running registry, never saved with the credentials.
	Public []string `json:"-"`
	// ScopeKey signs scoped push credentials; without it none is accepted. It never
	// leaves the registry's and the credential minter's process.
	ScopeKey []byte `json:",omitempty"`
}

type identity int

const (
	anonymous identity = iota
	reader
	pusher
	scoped   // writes to and reads the repositories of its Scope
	stranger // presented credentials that are none of these (or expired)
)

func (a *Auth) identify(r *http.Request, now time.Time) (identity, Scope) {
	user, pass, ok := r.BasicAuth()
	switch {
	case !ok:
		if r.Header.Get("Authorization") != "" {
			return stranger, Scope{}
		}
		return anonymous, Scope{}
	case a.Push.matches(user, pass):
		return pusher, Scope{}
	case a.Read != nil && a.Read.matches(user, pass):
		return reader, Scope{}
	}
	if scope, ok := scopeOf(a.ScopeKey, user, pass, now); ok {
		return scoped, scope
	}
	return stranger, Scope{}
}

func (c Credential) matches(user, pass string) bool {
	// Both compared, in constant time, so a timing does not tell which was wrong.
	u := subtle.ConstantTimeCompare([]byte(user), []byte(c.Username))
	p := subtle.ConstantTimeCompare([]byte(pass), []byte(c.Password))
	return c.Username != "" && u&p == 1
}

// wrap refuses, before distribution sees them, the requests an identity may not make.
func (a *Auth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, scope := a.identify(r, time.Now())
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		switch {
		case who == pusher, who == reader && read:
			next.ServeHTTP(w, r)
		case who == stranger:
			refuse(w, http.StatusUnauthorized, "UNAUTHORIZED", "wrong user name or password")
		case who == scoped && read:
			if why := outsideReadScope(r, scope); why != "" && !a.public(r) {
				refuse(w, http.StatusForbidden, "DENIED", why)
				return
			}
			next.ServeHTTP(w, r)
		case who == scoped:
			if a.inPublicFolder(scope.Push) {
				refuse(w, http.StatusForbidden, "DENIED", "repository "+scope.Push+" is in a public folder, which only the push credential writes")
				return
			}
			if why := outsideScope(r, scope); why != "" {
				refuse(w, http.StatusForbidden, "DENIED", why)
				return
			}
			next.ServeHTTP(w, r)
		case who == reader:
			refuse(w, http.StatusForbidden, "DENIED", "this credential may only read")
		case read && a.Read != nil && a.public(r):
			next.ServeHTTP(w, r)
		case read && a.Read != nil:
			refuse(w, http.StatusUnauthorized, "UNAUTHORIZED", "reading needs a credential: the pools' read credential, the push credential, or a build's")
		case read && r.URL.Path == "/v2/":
			// The version check is where clients learn that the registry takes basic auth;
			// a client without credentials goes on reading anonymously.
			refuse(w, http.StatusUnauthorized, "UNAUTHORIZED", "pushing needs the registry's push credential")
		case read:
			next.ServeHTTP(w, r)
		default:
			refuse(w, http.StatusUnauthorized, "UNAUTHORIZED", "pushing needs the registry's push credential")
		}
	})
}

// public says whether the read r is of a repository in a public folder. Routes of no
// repository (the catalog, which lists every tenant's repositories; the version check)
// are not.
func (a *Auth) public(r *http.Request) bool {
	_, repository, ok := route(r)
	if !ok {
		repository, ok = referrersRepository(r.URL.Path)
	}
	return ok && a.inPublicFolder(repository)
}

// inPublicFolder says whether repository lies in one of the public folders.
func (a *Auth) inPublicFolder(repository string) bool {
	for _, folder := range a.Public {
		if folder = strings.Trim(folder, "/"); folder != "" && strings.HasPrefix(repository, folder+"/") {
			return true
		}
	}
	return false
}

// route is the distribution route r takes and the repository it names ("" for routes of
// no repository), matched with distribution's own router so that the repository checked is
// the one distribution serves; ok is false for a path it does not route.
func route(r *http.Request) (name, repository string, ok bool) {
	var m mux.RouteMatch
	if !v2.Router().Match(r, &m) || m.Route == nil {
		return "", "", false
	}
	return m.Route.GetName(), m.Vars["name"], true
}

// outsideReadScope says why the read r is not one scope allows (its repositories, and
// the version check), or "" when it is. The catalog, which lists every tenant's
// repositories, is not for a scoped credential.
func outsideReadScope(r *http.Request, scope Scope) string {
	name, repository, ok := route(r)
	if !ok {
		// The OCI referrers API, which distribution does not route (it answers 404, and
		// clients fall back to the referrers tag): a read of its repository.
		repository, ok = referrersRepository(r.URL.Path)
	}
	switch {
	case ok && name == v2.RouteNameBase:
		return ""
	case !ok || repository == "":
		return "this credential may read only its build's repositories"
	case !scope.reads(repository):
		return "this credential may not read repository " + repository
	}
	return ""
}

// referrersRepository is the repository of an OCI referrers request
// (/v2/<name>/referrers/<digest>), or ok false for any other path, and for a name with an
// empty, "." or ".." segment: a path that climbs out of the repository it names is no
// request of that repository's.
func referrersRepository(path string) (string, bool) {
	rest, found := strings.CutPrefix(path, "/v2/")
	if !found {
		return "", false
	}
	i := strings.LastIndex(rest, "/referrers/")
	if i <= 0 || strings.Contains(rest[i+len("/referrers/"):], "/") {
		return "", false
	}
	for _, segment := range strings.Split(rest[:i], "/") {
		if segment == "" || segment == "." || segment == ".." {
			return "", false
		}
	}
	return rest[:i], true
}

// scopedRoutes are the routes a scoped credential may write through, in its repository.
var scopedRoutes = map[string]bool{
	v2.RouteNameManifest: true, v2.RouteNameBlob: true, v2.RouteNameBlobUpload: true, v2.RouteNameBlobUploadChunk: true,
}

// outsideScope says why the write r is not one to the scope's repository only, or "" when
// it is; a path distribution does not route is refused.
func outsideScope(r *http.Request, scope Scope) string {
	repository := scope.Push
	name, target, ok := route(r)
	if !ok || !scopedRoutes[name] {
		return "this credential may write only to repository " + repository
	}
	if target != repository {
		return "this credential may write only to repository " + repository + ", not " + target
	}
	// A cross-repository mount reads a blob of another repository into this one: only
	// from a repository the scope reads.
	if q := r.URL.Query(); q.Has("mount") && !scope.reads(q.Get("from")) {
		return "this credential may mount blobs only from the repositories it reads"
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
