package nocloud

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/kdomanski/iso9660"
)

// FuzzWriteISO writes seeds of any user data and meta data. Each is an ISO9660 image
// labelled cidata whose files read back equal to what was written, through the primary
// names (kdomanski/iso9660, an independent reader) and through the Joliet names cloud-init
// looks for, and the same data gives the same bytes.
func FuzzWriteISO(f *testing.F) {
	f.Add(userData, metaData)
	f.Add([]byte{}, []byte{})
	f.Add(bytes.Repeat([]byte("0123456789abcdef"), 1000), []byte(nil))
	f.Add(bytes.Repeat([]byte{0}, 2048), bytes.Repeat([]byte{0xff}, 2049))
	f.Add([]byte("#cloud-config\nruncmd: [echo anvil-marker=ü]\n"), []byte("instance-id: \"qemu-0123456789ab\"\nlocal-hostname: \"vm\"\n"))
	f.Fuzz(func(t *testing.T, user, meta []byte) {
		path := filepath.Join(t.TempDir(), "seed.iso")
		if err := WriteISO(path, Seed{UserData: user, MetaData: meta}); err != nil {
			t.Fatalf("WriteISO of %d and %d bytes: %v", len(user), len(meta), err)
		}
		image, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(image)%sectorSize != 0 {
			t.Fatalf("image of %d bytes is not whole sectors", len(image))
		}
		img, err := iso9660.OpenImage(bytes.NewReader(image))
		if err != nil {
			t.Fatalf("reading the image back: %v", err)
		}
		label, primary := primaryFiles(t, img)
		if label != VolumeID || len(primary) != 2 || !bytes.Equal(primary["USER_DATA"], user) || !bytes.Equal(primary["META_DATA"], meta) {
			t.Fatalf("primary volume %q holds %v; want %s with USER_DATA and META_DATA as written", label, keys(primary), VolumeID)
		}
		label, joliet := jolietFiles(t, image)
		if label != VolumeID || len(joliet) != 2 || !bytes.Equal(joliet["user-data"], user) || !bytes.Equal(joliet["meta-data"], meta) {
			t.Fatalf("Joliet volume %q holds %v; want %s with user-data and meta-data as written", label, keys(joliet), VolumeID)
		}
		again, err := buildISO(VolumeID, []isoFile{{name: "user-data", data: user}, {name: "meta-data", data: meta}})
		if err != nil || !bytes.Equal(again, image) {
			t.Fatalf("the same data gave another image (err %v)", err)
		}
	})
}
