package ironic

import (
	"errors"
	"reflect"
	"testing"

	"github.com/anvil-dev/anvil/internal/provisioner"
)

func TestInstanceInfo(t *testing.T) {
	for _, tc := range []struct {
		img  provisioner.Image
		want map[string]any
	}{
		{provisioner.Image{URL: "http://i/a.raw", Checksum: "sha256:abc", Format: "raw"}, map[string]any{
			"image_source": "http://i/a.raw", "image_os_hash_algo": "sha256", "image_os_hash_value": "abc", "image_disk_format": "raw"}},
		{provisioner.Image{URL: "http://i/a.qcow2", Checksum: "md5:def", Format: "qcow2"}, map[string]any{
			"image_source": "http://i/a.qcow2", "image_checksum": "def", "image_disk_format": "qcow2"}},
		{provisioner.Image{URL: "http://i/a"}, map[string]any{"image_source": "http://i/a"}},
	} {
		got, err := instanceInfo(tc.img)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("instanceInfo(%+v) = %v, %v; want %v", tc.img, got, err, tc.want)
		}
		if back := imageOf(got); back != tc.img {
			t.Errorf("imageOf(instanceInfo(%+v)) = %+v", tc.img, back)
		}
	}
	for _, bad := range []provisioner.Image{{}, {URL: "u", Checksum: "abc"}, {URL: "u", Checksum: "crc:1"}, {URL: "u", Format: "vmdk"}} {
		if _, err := instanceInfo(bad); !errors.Is(err, provisioner.ErrInvalid) {
			t.Errorf("instanceInfo(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestConfigDrive(t *testing.T) {
	cd, err := configDrive(&provisioner.ConfigDrive{UserData: []byte("#cloud-config\n"), MetaData: map[string]any{"uuid": "u"}})
	if err != nil || cd["user_data"] != "#cloud-config\n" || cd["meta_data"] == nil || cd["network_data"] != nil {
		t.Errorf("configDrive = %v, %v", cd, err)
	}
	if cd, err := configDrive(nil); cd != nil || err != nil {
		t.Errorf("configDrive(nil) = %v, %v", cd, err)
	}
	if _, err := configDrive(&provisioner.ConfigDrive{UserData: []byte{0xff, 0xfe}}); !errors.Is(err, provisioner.ErrInvalid) {
		t.Errorf("binary user data: %v, want ErrInvalid", err)
	}
}
