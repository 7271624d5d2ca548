package dev

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Debian 12 (make debian, docs/debian.md): with --debian, anvil dev publishes its two forms
// and keeps a key pair that the Debian samples' user data lets in.
const (
	// DebianRepository is the disk form, for QEMU pools.
	DebianRepository = "anvil/debian:12"
	// DebianRAMRepository is the RAM form, for bare-metal pools (Ironic's ramdisk deploy).
	DebianRAMRepository = "anvil/debian-ram:12"
	// DebianUserDataSecret, in the default namespace, is the samples' cloud-config: a user
	// anvil (sudo) who logs in with the key in the state folder's ssh/id_ed25519.
	DebianUserDataSecret = "debian-user-data"
)

// debianKeyFile is the private key of the Debian samples' user, under the state folder.
func debianKeyFile(stateDir string) string { return filepath.Join(stateDir, "ssh", "id_ed25519") }

// publishDebian pushes dir's disk and ram forms (make debian: dir/disk/ARCH, dir/ram/ARCH)
// and writes, when missing, the login key and the samples' user-data Secret. It returns
// the banner's lines.
func publishDebian(ctx context.Context, c client.Client, dir, registryHost, stateDir string) (string, error) {
	disk, err := pushOSImage(ctx, filepath.Join(dir, "disk"), registryHost+"/"+DebianRepository, "the Debian image (disk form)", "make debian", nil)
	if err != nil {
		return "", err
	}
	ram, err := pushOSImage(ctx, filepath.Join(dir, "ram"), registryHost+"/"+DebianRAMRepository, "the Debian image (RAM form)", "make debian", nil)
	if err != nil {
		return "", err
	}
	public, err := debianLoginKey(debianKeyFile(stateDir))
	if err != nil {
		return "", err
	}
	userData := "#cloud-config\n" +
		"users:\n" +
		"  - name: anvil\n" +
		"    shell: /bin/bash\n" +
		"    sudo: ALL=(ALL) NOPASSWD:ALL\n" +
		"    ssh_authorized_keys: [" + fmt.Sprintf("%q", public) + "]\n"
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: DebianUserDataSecret},
		StringData: map[string]string{"userData": userData}}
	if err := client.IgnoreAlreadyExists(c.Create(ctx, s)); err != nil {
		return "", fmt.Errorf("creating Secret default/%s: %w", DebianUserDataSecret, err)
	}
	return fmt.Sprintf(`%s (VMs), %s (servers)
                  log in to a Debian Machine M (the samples: make demo DEBIAN=1) through its SSH address:
                  ssh -i %s -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null anvil@127.0.0.1 \
                    -p "$(kubectl get machine M -o jsonpath='{.status.addresses[?(@.type=="SSH")].address}' | cut -d: -f2)"`,
		disk, ram, debianKeyFile(stateDir)), nil
}

// debianLoginKey reads the ed25519 key pair at path (path.pub beside it), making one when
// there is none, and returns its public key in authorized_keys form.
func debianLoginKey(path string) (string, error) {
	if pub, err := os.ReadFile(path + ".pub"); err == nil {
		if _, err := os.Stat(path); err == nil {
			return string(bytes.TrimRight(pub, "\r\n")), nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	public, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	block, err := ssh.MarshalPrivateKey(private, "anvil dev")
	if err != nil {
		return "", err
	}
	sshPublic, err := ssh.NewPublicKey(public)
	if err != nil {
		return "", err
	}
	authorized := bytes.TrimRight(ssh.MarshalAuthorizedKey(sshPublic), "\n")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(path+".pub", append(authorized, '\n'), 0o644); err != nil {
		return "", err
	}
	return string(authorized), nil
}
