package nocloud

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/kdomanski/iso9660"
)

var (
	userData = []byte("#cloud-config\nhostname: vm-one\nruncmd: [echo anvil-marker=abc-1]\n")
	metaData = []byte("instance-id: i-0001\nlocal-hostname: vm-one\n")
)

func writeSeed(t *testing.T, user, meta []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "seed.iso")
	if err := WriteISO(path, Seed{UserData: user, MetaData: meta}); err != nil {
		t.Fatalf("WriteISO: %v", err)
	}
	return path
}

// openSeed writes a seed and opens it with an independent ISO9660 reader.
func openSeed(t *testing.T, userData, metaData []byte) *iso9660.Image {
	t.Helper()
	f, err := os.Open(writeSeed(t, userData, metaData))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	img, err := iso9660.OpenImage(f)
	if err != nil {
		t.Fatalf("reading the image back: %v", err)
	}
	return img
}

// An independent ISO9660 reader sees the label and both files through the primary names.
func TestWriteISOPrimaryVolume(t *testing.T) {
	label, got := primaryFiles(t, openSeed(t, userData, metaData))
	if label != "cidata" {
		t.Errorf("label = %q; want cidata", label)
	}
	want := map[string][]byte{"META_DATA": metaData, "USER_DATA": userData}
	if len(got) != len(want) {
		t.Fatalf("files = %v, want META_DATA and USER_DATA", keys(got))
	}
	for name, data := range want {
		if !bytes.Equal(got[name], data) {
			t.Errorf("%s = %q, want %q", name, got[name], data)
		}
	}
}

// The Joliet tree names the files user-data and meta-data, as cloud-init expects.
func TestWriteISOJolietNames(t *testing.T) {
	image, err := os.ReadFile(writeSeed(t, userData, metaData))
	if err != nil {
		t.Fatal(err)
	}
	label, got := jolietFiles(t, image)
	if label != "cidata" {
		t.Errorf("Joliet label = %q, want cidata", label)
	}
	if !bytes.Equal(got["user-data"], userData) || !bytes.Equal(got["meta-data"], metaData) || len(got) != 2 {
		t.Errorf("Joliet files = %v, want user-data and meta-data with their contents", keys(got))
	}
}

// primaryFiles reads the label and the root folder's files of img through its primary
// volume, as kdomanski/iso9660 names them.
func primaryFiles(t testing.TB, img *iso9660.Image) (string, map[string][]byte) {
	t.Helper()
	label, err := img.Label()
	if err != nil {
		t.Fatalf("label: %v", err)
	}
	root, err := img.RootDir()
	if err != nil {
		t.Fatal(err)
	}
	children, err := root.GetChildren()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for _, c := range children {
		data, err := io.ReadAll(c.Reader())
		if err != nil {
			t.Fatal(err)
		}
		got[c.Name()] = data
	}
	return label, got
}

// jolietFiles reads the label and the root folder's files of image through its Joliet
// descriptor (sector 17), checking every offset it follows against the image's size.
func jolietFiles(t testing.TB, image []byte) (string, map[string][]byte) {
	t.Helper()
	if len(image) < 18*2048 {
		t.Fatalf("image of %d bytes has no sector 17", len(image))
	}
	svd := image[17*2048 : 18*2048]
	if svd[0] != 2 || string(svd[1:6]) != "CD001" || string(svd[88:91]) != "%/E" {
		t.Fatalf("sector 17 is not a Joliet descriptor: % x", svd[:8])
	}
	label := strings.TrimRight(ucs2(svd[40:72]), " ")
	slice := func(what string, start, length uint64) []byte {
		if start+length > uint64(len(image)) {
			t.Fatalf("%s at %d, %d bytes, is past the image's end (%d bytes)", what, start, length, len(image))
		}
		return image[start : start+length]
	}
	rootRecord := svd[156:190]
	folder := slice("the root folder", uint64(binary.LittleEndian.Uint32(rootRecord[2:]))*2048, uint64(binary.LittleEndian.Uint32(rootRecord[10:])))
	got := map[string][]byte{}
	for off := 0; off < len(folder) && folder[off] != 0; off += int(folder[off]) {
		rec := folder[off:]
		if len(rec) < 33 || int(rec[0]) > len(rec) || 33+int(rec[32]) > int(rec[0]) {
			t.Fatalf("folder record at %d is malformed: % x", off, rec[:min(len(rec), 34)])
		}
		if rec[25]&2 != 0 {
			continue // . and ..
		}
		name := ucs2(rec[33 : 33+int(rec[32])])
		if _, dup := got[name]; dup {
			t.Fatalf("file %q appears twice", name)
		}
		got[name] = slice(name, uint64(binary.BigEndian.Uint32(rec[6:]))*2048, uint64(binary.BigEndian.Uint32(rec[14:])))
	}
	return label, got
}

// blkid, which mount and findfs rely on, sees an ISO9660 filesystem labelled cidata.
func TestWriteISOBlkid(t *testing.T) {
	blkid, err := exec.LookPath("blkid")
	if err != nil {
		t.Fatal("blkid (util-linux) is missing: run make deps")
	}
	out, err := exec.Command(blkid, "-p", "-o", "export", writeSeed(t, userData, metaData)).CombinedOutput()
	if err != nil {
		t.Fatalf("blkid: %v: %s", err, out)
	}
	for _, want := range []string{"TYPE=iso9660", "LABEL=cidata"} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("blkid says %q, want %s", out, want)
		}
	}
}

func TestWriteISOIsReproducible(t *testing.T) {
	a, err := os.ReadFile(writeSeed(t, userData, metaData))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(writeSeed(t, userData, metaData))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("the same data gave different images")
	}
}

// Empty and multi-sector files keep their own extents.
func TestWriteISOSizes(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1000) // 16000 bytes: 8 sectors
	img := openSeed(t, big, nil)
	root, err := img.RootDir()
	if err != nil {
		t.Fatal(err)
	}
	children, err := root.GetChildren()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range children {
		data, err := io.ReadAll(c.Reader())
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]byte{"USER_DATA": big, "META_DATA": {}}[c.Name()]
		if !bytes.Equal(data, want) {
			t.Errorf("%s has %d bytes, want %d", c.Name(), len(data), len(want))
		}
	}
}

// A seed that cannot be put in place leaves no temporary file behind.
func TestWriteISOLeavesNothingOnError(t *testing.T) {
	dir := t.TempDir()
	taken := filepath.Join(dir, "seed.iso")
	if err := os.Mkdir(taken, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(taken, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteISO(taken, Seed{UserData: userData, MetaData: metaData}); err == nil {
		t.Fatal("WriteISO over a non-empty folder succeeded")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("folder holds %v, want only seed.iso", names)
	}
}

func ucs2(b []byte) string {
	units := make([]uint16, len(b)/2)
	for i := range units {
		units[i] = binary.BigEndian.Uint16(b[2*i:])
	}
	return string(utf16.Decode(units))
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
