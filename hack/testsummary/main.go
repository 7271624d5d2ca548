// Command testsummary reads `go test -json` on stdin and prints what a plain `go test` would:
// each package's result line, build errors, and the whole output of a test that failed (or
// was running when its package died: a timeout's panic, a crash). It appends every package's
// and every test's elapsed seconds to the file -times names, one "kind<TAB>seconds<TAB>name"
// line each (kind package or test), from which hack/test.sh prints where the minutes went.
// Its exit status is go test's: non-zero when a package failed.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	Elapsed    float64
	ImportPath string
}

// summary holds the output of the tests still running, by package then test.
type summary struct {
	out     io.Writer
	times   io.Writer
	running map[string]map[string]*strings.Builder
	failed  bool
}

func main() {
	timesPath := flag.String("times", "", "append package and test durations to this file")
	flag.Parse()
	times := io.Discard
	if *timesPath != "" {
		f, err := os.OpenFile(*timesPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		defer f.Close()
		times = f
	}
	s := &summary{out: os.Stdout, times: times, running: map[string]map[string]*strings.Builder{}}
	if err := s.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if s.failed {
		os.Exit(1)
	}
}

func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not an event (go test's own errors, say, before any package ran): as it came.
			fmt.Fprintf(s.out, "%s\n", line)
			continue
		}
		s.handle(e)
	}
	return sc.Err()
}

func (s *summary) handle(e event) {
	switch {
	case e.Action == "build-output":
		fmt.Fprint(s.out, e.Output)
	case e.Action == "build-fail":
		s.failed = true
	case e.Test == "":
		s.packageEvent(e)
	default:
		s.testEvent(e)
	}
}

func (s *summary) packageEvent(e event) {
	switch e.Action {
	case "output":
		// The lone PASS line of a passing package is -v's, not plain go test's.
		if e.Output != "PASS\n" {
			fmt.Fprint(s.out, e.Output)
		}
	case "pass", "fail":
		fmt.Fprintf(s.times, "package\t%.1f\t%s\n", e.Elapsed, e.Package)
		if e.Action == "fail" {
			s.failed = true
			// A test still running when its package ended was cut off: its output is the
			// only account of where.
			for name, b := range s.running[e.Package] {
				fmt.Fprintf(s.out, "=== %s was still running when %s ended:\n%s", name, e.Package, b.String())
			}
		}
		delete(s.running, e.Package)
	}
}

func (s *summary) testEvent(e event) {
	tests := s.running[e.Package]
	if tests == nil {
		tests = map[string]*strings.Builder{}
		s.running[e.Package] = tests
	}
	switch e.Action {
	case "run":
		tests[e.Test] = &strings.Builder{}
	case "output":
		b := tests[e.Test]
		if b == nil {
			b = &strings.Builder{}
			tests[e.Test] = b
		}
		b.WriteString(e.Output)
	case "pass", "fail", "skip":
		if e.Action == "fail" {
			if b := tests[e.Test]; b != nil {
				fmt.Fprint(s.out, b.String())
			}
		}
		if !strings.Contains(e.Test, "/") {
			fmt.Fprintf(s.times, "test\t%.1f\t%s.%s\n", e.Elapsed, shortPackage(e.Package), e.Test)
		}
		delete(tests, e.Test)
	}
}

// shortPackage drops the module's path, which every package shares.
func shortPackage(p string) string {
	if i := strings.Index(p, "/anvil/"); i >= 0 {
		return p[i+len("/anvil/"):]
	}
	return p
}
