package containerimage

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// A checkout's Source is its HEAD and the commit's time; SOURCE_DATE_EPOCH overrides the
// time and a given version the description.
func TestGitSource(t *testing.T) {
	// The machine's and the user's git settings (signed commits, another abbreviation)
	// stay out of the repository the test makes and of what GitSource reads from it.
	t.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q"},
		{"-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "--allow-empty", "-m", "one", "--date", "1700000000 +0000"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(cmd.Environ(), "GIT_COMMITTER_DATE=1700000000 +0000")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	ctx := context.Background()
	head, err := gitOutput(ctx, dir, "rev-parse", "HEAD")
	must(t, err)
	t.Setenv("SOURCE_DATE_EPOCH", "")
	s, err := GitSource(ctx, dir, "https://example.org/anvil", "")
	must(t, err)
	if s.Revision != head || s.Version != head[:7] || !s.Created.Equal(epoch) || s.URL != "https://example.org/anvil" {
		t.Errorf("source %+v, want revision %s, version %s, created %v", s, head, head[:7], epoch)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1600000000")
	s, err = GitSource(ctx, dir, "", "v9")
	must(t, err)
	if s.Version != "v9" || !s.Created.Equal(time.Unix(1600000000, 0)) {
		t.Errorf("source %+v, want version v9 created at SOURCE_DATE_EPOCH", s)
	}
}

func TestSizeLine(t *testing.T) {
	got := SizeLine("anvil", "arm64", Size{Compressed: 3 << 20, Uncompressed: 5<<20 + 1<<19})
	if want := "anvil arm64 3145728 5767168 3.0 5.5"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
