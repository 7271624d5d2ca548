package imagebuild

import (
	"path"
	"strings"

	"github.com/anvil-dev/anvil/internal/imagebuild/containerfile"
)

// packageManagers are the commands that fetch packages over HTTP: a RUN step naming one
// needs the builders' package proxy.
var packageManagers = map[string]bool{"apt": true, "apt-get": true}

// PackageManagerStep is the first RUN step of p that runs a package manager (apt or
// apt-get, as its program or a command word of its shell line), if any. It reads the words
// as written: a package manager started by a script the step runs is not seen.
func PackageManagerStep(p containerfile.Program) (containerfile.Step, bool) {
	for _, op := range p.Ops {
		if op.Kind != containerfile.OpRun {
			continue
		}
		// The program itself, and a shell's -c line (the shell form is /bin/sh -c LINE).
		if len(op.Argv) > 0 && packageManagers[path.Base(op.Argv[0])] {
			return op.Step, true
		}
		for i := 1; i+1 < len(op.Argv); i++ {
			if op.Argv[i] == "-c" && runsPackageManager(op.Argv[i+1]) {
				return op.Step, true
			}
		}
	}
	return containerfile.Step{}, false
}

// runsPackageManager reads a shell line word by word: a word at a command's start (after
// an operator, sudo or env assignments) that is a package manager, by name or path.
func runsPackageManager(line string) bool {
	fields := strings.FieldsFunc(strings.ReplaceAll(line, "$(", "$ ("), func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == '(' || r == ')' || r == '`'
	})
	start := true
	for _, f := range fields {
		// An operator ends a command; glued to a word (a;b) it is split here.
		for _, part := range splitOperators(f) {
			switch {
			case part == "&&" || part == "||" || part == ";" || part == "|" || part == "&" || part == "$":
				// ("$" is what is left of "$(": the parenthesis splits words)
				start = true
			case start && (part == "sudo" || part == "env" || part == "exec" || part == "command" || strings.Contains(part, "=") && !strings.HasPrefix(part, "-")):
				// still at the command's start
			case start:
				if packageManagers[path.Base(strings.Trim(part, `"'`))] {
					return true
				}
				start = false
			}
		}
	}
	return false
}

// splitOperators cuts a word at ;, & and | (kept as words of their own).
func splitOperators(word string) []string {
	var out []string
	cur := ""
	for i := 0; i < len(word); i++ {
		c := word[i]
		if c == ';' || c == '&' || c == '|' {
			if cur != "" {
				out = append(out, cur)
				cur = ""
			}
			op := string(c)
			if i+1 < len(word) && word[i+1] == c && c != ';' {
				op += string(c)
				i++
			}
			out = append(out, op)
			continue
		}
		cur += string(c)
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}
