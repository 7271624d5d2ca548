package nodeagent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMetadata(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		want      Metadata
		err       string
	}{
		{name: "nocloud as the qemu runtime writes it", raw: "instance-id: \"m-1\"\nlocal-hostname: \"node-a\"\nprovider-id: \"anvil://ns/m\"\n",
			want: Metadata{Hostname: "node-a", ProviderID: "anvil://ns/m"}},
		{name: "nocloud unquoted, providerid", raw: "local-hostname: node-b\nproviderid: anvil://ns/b\n",
			want: Metadata{Hostname: "node-b", ProviderID: "anvil://ns/b"}},
		{name: "config drive json", raw: `{"uuid":"u","name":"m","hostname":"h","local-hostname":"node-c","provider-id":"anvil://ns/c"}`,
			want: Metadata{Hostname: "node-c", ProviderID: "anvil://ns/c"}},
		// As the metal runtime writes a server's config drive: the Machine's metadata under meta.
		{name: "config drive json, provider-id in meta", raw: `{"uuid":"u","name":"m","hostname":"node-d","local-hostname":"node-d","meta":{"anvil-index":"0","provider-id":"anvil://ns/d"}}`,
			want: Metadata{Hostname: "node-d", ProviderID: "anvil://ns/d"}},
		{name: "a number provider-id in meta", raw: `{"meta":{"provider-id":7}}`, err: "meta: provider-id is 7, not a string"},
		{name: "hostname only", raw: `{"hostname":"h"}`, want: Metadata{Hostname: "h"}},
		{name: "provider-id wins over providerid", raw: "provider-id: a://1\nproviderid: a://2\n", want: Metadata{ProviderID: "a://1"}},
		{name: "nothing of interest", raw: "instance-id: x\n", want: Metadata{}},
		{name: "empty", raw: "", want: Metadata{}},
		{name: "a number hostname", raw: "local-hostname: 1234\n", err: "local-hostname is 1234, not a string"},
		{name: "a list", raw: "- a\n- b\n", err: "not a YAML or JSON map"},
		{name: "broken json", raw: `{"local-hostname":`, err: "not a YAML or JSON map"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMetadata([]byte(tc.raw))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseMetadata = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// The first file that exists is read; none is no error.
func TestReadMetadata(t *testing.T) {
	dir := t.TempDir()
	seed, drive := filepath.Join(dir, "meta-data"), filepath.Join(dir, "meta_data.json")
	if err := os.WriteFile(drive, []byte(`{"local-hostname":"from-drive"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	md, path, err := ReadMetadata([]string{seed, drive})
	if err != nil || path != drive || md.Hostname != "from-drive" {
		t.Fatalf("ReadMetadata = %+v, %q, %v; want the drive's", md, path, err)
	}
	md, path, err = ReadMetadata([]string{seed})
	if err != nil || path != "" || md != (Metadata{}) {
		t.Fatalf("ReadMetadata of nothing = %+v, %q, %v; want nothing and no error", md, path, err)
	}
	if err := os.WriteFile(seed, []byte("local-hostname: [x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadMetadata([]string{seed, drive}); err == nil || !strings.Contains(err.Error(), seed) {
		t.Fatalf("a broken seed: err = %v, want one naming %s", err, seed)
	}
}
