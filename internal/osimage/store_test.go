package osimage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func hashOf(b []byte) v1.Hash {
	s := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(s[:])}
}

func TestStoreRefusesWrongBytes(t *testing.T) {
	dir := t.TempDir()
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	good := []byte("the kernel")
	h := hashOf(good)
	for _, tc := range []struct {
		name  string
		body  []byte
		size  int64
		wantE string
	}{
		{"other bytes", []byte("the kerneL"), int64(len(good)), "hashes to"},
		{"too short", good[:5], int64(len(good)), "got 5 bytes"},
		{"too long", append(append([]byte{}, good...), 'x'), int64(len(good)), "got 11 bytes"},
	} {
		err := s.write(h, tc.size, bytes.NewReader(tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.wantE) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.wantE)
		}
		if ok, _ := s.has(h); ok {
			t.Fatalf("%s: the blob is in the store", tc.name)
		}
	}
	assertNoTempFiles(t, dir)
	if err := s.write(h, int64(len(good)), bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	p, _ := s.path(h)
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, good) {
		t.Fatalf("stored %q, %v", got, err)
	}
}

func TestLeftoverTempFilesAreNotBlobs(t *testing.T) {
	dir := t.TempDir()
	if _, err := openStore(dir); err != nil {
		t.Fatal(err)
	}
	// A crash mid-write leaves a temp file holding part of a blob.
	h := hashOf([]byte("whole blob"))
	leftover := filepath.Join(dir, "blobs", "sha256", tempPrefix+h.Hex[:12]+"-123")
	if err := os.WriteFile(leftover, []byte("whole"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.has(h); err != nil || ok {
		t.Fatalf("has(%s) = %v, %v after a crash", h, ok, err)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatalf("leftover temp file still there: %v", err)
	}
	if _, err := s.path(v1.Hash{Algorithm: "sha256", Hex: "../../etc/passwd"}); err == nil {
		t.Fatal("a digest that is not 64 hex digits named a path")
	}
}
