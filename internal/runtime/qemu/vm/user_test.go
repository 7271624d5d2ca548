package vm

import (
	"os"
	"testing"
)

func TestPermits(t *testing.T) {
	const user, group, other = 999, 995, 1234
	for _, tc := range []struct {
		name             string
		mode             os.FileMode
		fileUID, fileGID uint32
		groups           []uint32
		want             os.FileMode
		ok               bool
	}{
		{"root's private folder", 0o700, 0, 0, nil, 0o1, false},
		{"searchable by others", 0o711, 0, 0, nil, 0o1, true},
		{"a program others may run", 0o755, 0, 0, nil, 0o5, true},
		{"others may read but not run", 0o644, 0, 0, nil, 0o5, false},
		{"the user owns it", 0o700, user, other, nil, 0o5, true},
		{"the owner class wins over others", 0o007, user, other, nil, 0o1, false},
		{"its primary group", 0o750, 0, group, nil, 0o5, true},
		{"a supplementary group", 0o750, 0, other, []uint32{other}, 0o5, true},
		{"the group class wins over others", 0o705, 0, group, nil, 0o5, false},
	} {
		if got := permits(tc.mode, tc.fileUID, tc.fileGID, user, group, tc.groups, tc.want); got != tc.ok {
			t.Errorf("%s: permits = %v, want %v", tc.name, got, tc.ok)
		}
	}
}
