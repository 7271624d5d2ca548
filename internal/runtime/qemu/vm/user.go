package vm

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// DefaultUser is the unprivileged user QEMU drops to when its starter (a runtime, the
// emulated servers) runs as root; hack/install-deps.sh creates it.
const DefaultUser = "anvil-qemu"

// User is who QEMU runs as once it has opened its files (Spec.RunAs).
type User struct {
	Name     string
	UID, GID uint32
	Groups   []uint32
}

// RunAs is QEMU's -runas value; empty for nil (QEMU runs as its starter).
func (u *User) RunAs() string {
	if u == nil {
		return ""
	}
	return fmt.Sprintf("%d:%d", u.UID, u.GID)
}

// UIDs is the user's id, none for nil (QEMU runs as its starter): the users whose
// processes may send frames to a switch (netswitch.New).
func (u *User) UIDs() []uint32 {
	if u == nil {
		return nil
	}
	return []uint32{u.UID}
}

// UserForRoot is the user QEMU drops to when its starter runs as root: name, or
// DefaultUser when empty; nil when the starter is not root (QEMU cannot change user then).
// A starter running as root never starts QEMU as root: a missing user is an error that
// says how to create it.
func UserForRoot(name string) (*User, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if name == "" {
		name = DefaultUser
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("running as root, QEMU drops to the unprivileged user %q, which does not exist (%v): create it with `useradd --system --no-create-home --shell /usr/sbin/nologin %s` (hack/install-deps.sh does) or name another with --qemu-user", name, err, name)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("QEMU user %q has a non-numeric uid %q or gid %q", name, u.Uid, u.Gid)
	}
	if uid == 0 || gid == 0 {
		return nil, fmt.Errorf("QEMU user %q is root (uid %d, gid %d): name an unprivileged user with --qemu-user", name, uid, gid)
	}
	qu := &User{Name: name, UID: uint32(uid), GID: uint32(gid)}
	ids, _ := u.GroupIds()
	for _, g := range ids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			qu.Groups = append(qu.Groups, uint32(n))
		}
	}
	return qu, nil
}

// CannotRun says why u cannot run the program at path, empty when it can: QEMU runs a
// guest forward's command after it has dropped to u, so the program and every folder
// above it must be open to u.
func (u *User) CannotRun(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err.Error()
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if why := u.lacks(dir, 0o1); why != "" {
			return why
		}
		if dir == "/" {
			break
		}
	}
	return u.lacks(abs, 0o5)
}

// lacks says what u lacks of the permission bits want (as "other" bits: 1 search or run,
// 4 read) on path, or "" when u has them.
func (u *User) lacks(path string, want os.FileMode) string {
	fi, err := os.Stat(path)
	if err != nil {
		return err.Error()
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	if !permits(fi.Mode().Perm(), st.Uid, st.Gid, u.UID, u.GID, u.Groups, want) {
		return fmt.Sprintf("%s (mode %v, owner %d:%d) is closed to user %s", path, fi.Mode().Perm(), st.Uid, st.Gid, u.Name)
	}
	return ""
}

// permits applies Unix permission bits: the owner's class if uid owns the file, else the
// group's if one of its groups does, else the others'.
func permits(mode os.FileMode, fileUID, fileGID, uid, gid uint32, groups []uint32, want os.FileMode) bool {
	switch {
	case fileUID == uid:
		return (mode>>6)&want == want
	case fileGID == gid || contains(groups, fileGID):
		return (mode>>3)&want == want
	}
	return mode&want == want
}

func contains(list []uint32, v uint32) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
