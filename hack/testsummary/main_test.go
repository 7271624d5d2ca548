package main

import (
	"strings"
	"testing"
)

// A package with a passing test, a failing subtest and a test cut off by the timeout:
// only the failing and cut-off tests' output is printed, every finished test is timed.
func TestSummaryPrintsFailuresAndTimes(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"start","Package":"github.com/anvil-dev/anvil/p"}`,
		`{"Action":"run","Package":"github.com/anvil-dev/anvil/p","Test":"TestOK"}`,
		`{"Action":"output","Package":"github.com/anvil-dev/anvil/p","Test":"TestOK","Output":"    quiet\n"}`,
		`{"Action":"pass","Package":"github.com/anvil-dev/anvil/p","Test":"TestOK","Elapsed":1.25}`,
		`{"Action":"run","Package":"github.com/anvil-dev/anvil/p","Test":"TestBad"}`,
		`{"Action":"run","Package":"github.com/anvil-dev/anvil/p","Test":"TestBad/sub"}`,
		`{"Action":"output","Package":"github.com/anvil-dev/anvil/p","Test":"TestBad/sub","Output":"    sub broke\n"}`,
		`{"Action":"fail","Package":"github.com/anvil-dev/anvil/p","Test":"TestBad/sub","Elapsed":0}`,
		`{"Action":"output","Package":"github.com/anvil-dev/anvil/p","Test":"TestBad","Output":"    loud\n"}`,
		`{"Action":"fail","Package":"github.com/anvil-dev/anvil/p","Test":"TestBad","Elapsed":2}`,
		`{"Action":"run","Package":"github.com/anvil-dev/anvil/p","Test":"TestHang"}`,
		`{"Action":"output","Package":"github.com/anvil-dev/anvil/p","Test":"TestHang","Output":"panic: test timed out\n"}`,
		`{"Action":"output","Package":"github.com/anvil-dev/anvil/p","Output":"FAIL\tgithub.com/anvil-dev/anvil/p\t3.0s\n"}`,
		`{"Action":"fail","Package":"github.com/anvil-dev/anvil/p","Elapsed":3}`,
		`not json: go test's own complaint`,
	}, "\n")
	var out, times strings.Builder
	s := &summary{out: &out, times: &times, running: map[string]map[string]*strings.Builder{}}
	if err := s.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if !s.failed {
		t.Error("a failed package did not make the summary fail")
	}
	for _, want := range []string{"sub broke", "loud", "TestHang was still running", "panic: test timed out", "FAIL\tgithub.com/anvil-dev/anvil/p\t3.0s", "go test's own complaint"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output has no %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "quiet") {
		t.Errorf("a passing test's output was printed:\n%s", out.String())
	}
	want := "test\t1.2\tp.TestOK\ntest\t2.0\tp.TestBad\npackage\t3.0\tgithub.com/anvil-dev/anvil/p\n"
	if times.String() != want {
		t.Errorf("times:\n%s\nwant:\n%s", times.String(), want)
	}
}
