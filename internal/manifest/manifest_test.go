package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDocumentsSkipsEmptyAndCommentOnly(t *testing.T) {
	raw := []byte("# heading only\n---\na: 1\n---\n\n---\n# note\nb: 2\n")
	docs, err := Documents(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("got %d documents %q, want 2", len(docs), docs)
	}
	if !strings.Contains(string(docs[0]), "a: 1") || !strings.Contains(string(docs[1]), "b: 2") {
		t.Fatalf("documents out of order or wrong: %q", docs)
	}
}

func TestReadDirReadsYAMLFilesInNameOrder(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("b.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: second\n")
	write("a.yml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: first\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: also-first\n  namespace: first\n")
	write("notes.txt", "not a manifest")
	objs, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.GetName())
	}
	if got := strings.Join(names, ","); got != "first,also-first,second" {
		t.Fatalf("objects %s, want first,also-first,second", got)
	}
}

func TestReadDirRejectsObjectWithoutKind(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("metadata:\n  name: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReadDir(dir)
	if err == nil || !strings.Contains(err.Error(), "bad.yaml: document 1: apiVersion and kind are required") {
		t.Fatalf("err = %v, want one naming the file, the document and what is missing", err)
	}
}
