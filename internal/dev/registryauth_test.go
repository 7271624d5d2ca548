package dev

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// anvil dev's registry credentials are made once and kept (what was given out stays
// valid); a file from before scoped and read credentials keeps its push credential and
// gets a key and a read credential.
// A builder's credential names its repository and is not the push credential.
func TestRegistryAuthIsKeptAndGetsAScopeKey(t *testing.T) {
	dir := t.TempDir()
	a, err := registryAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Push.Password == "" || len(a.ScopeKey) != 32 || a.Read == nil || a.Read.Password == "" || a.Read.Password == a.Push.Password {
		t.Fatalf("made %+v, want a push credential, a 32-byte scope key and another read credential", a)
	}
	again, err := registryAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again.Push != a.Push || !bytes.Equal(again.ScopeKey, a.ScopeKey) || *again.Read != *a.Read {
		t.Fatal("the credentials changed on the second start")
	}
	path := filepath.Join(dir, registryAuthFile)
	if err := os.WriteFile(path, []byte(`{"Push":{"Username":"anvil-push","Password":"old"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	old, err := registryAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	if old.Push.Password != "old" || len(old.ScopeKey) != 32 || old.Read == nil {
		t.Fatalf("an old file became %+v, want its push credential kept and a key and read credential added", old)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v, want 0600", path, fi.Mode(), err)
	}
	c := builderPush(old)("team-a/os", nil, time.Now().Add(time.Hour))
	if c.Password == old.Push.Password || !strings.HasSuffix(c.Username, "/team-a/os") {
		t.Fatalf("a builder's credential %q, want one scoped to team-a/os", c.Username)
	}
}
