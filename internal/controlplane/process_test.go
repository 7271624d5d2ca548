package controlplane

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A command made by the caller keeps its environment; its output goes to the log, which a
// second start under the same name appends to; Kill ends it as a crash would (SIGKILL),
// and Exited then says so.
func TestStartCommandKeepsEnvironmentAndKillEndsIt(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "sleeper.log")
	readLog := func() string {
		raw, _ := os.ReadFile(logPath)
		return string(raw)
	}
	for run := 1; run <= 2; run++ {
		cmd := exec.Command("sh", "-c", `echo "run $RUN"; exec sleep 60`)
		cmd.Env = append(os.Environ(), "RUN="+strconv.Itoa(run))
		p, err := StartCommand("sleeper", cmd, dir, "")
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(readLog(), "run "+strconv.Itoa(run)); {
			if time.Now().After(deadline) {
				t.Fatalf("start %d: the log says %q", run, readLog())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := p.Exited(); err != nil {
			t.Fatalf("start %d: exited before Kill: %v", run, err)
		}
		p.Kill()
		if err := p.Exited(); err == nil || !strings.Contains(err.Error(), "signal: killed") {
			t.Errorf("start %d: Exited after Kill = %v, want killed by SIGKILL", run, err)
		}
		p.Kill() // ended already: nothing
	}
	if !strings.Contains(readLog(), "run 1\nrun 2\n") {
		t.Errorf("the log of two starts is %q, want both runs' output", readLog())
	}
}
