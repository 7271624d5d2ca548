package containerfile

import (
	"fmt"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// Kind is a supported instruction.
type Kind string

const (
	KindArg     Kind = "ARG"
	KindEnv     Kind = "ENV"
	KindRun     Kind = "RUN"
	KindCopy    Kind = "COPY"
	KindWorkdir Kind = "WORKDIR"
	KindLabel   Kind = "LABEL"
)

var supported = map[string]Kind{
	"arg": KindArg, "env": KindEnv, "run": KindRun, "copy": KindCopy, "workdir": KindWorkdir, "label": KindLabel,
}

// Step is one instruction as written.
type Step struct {
	Kind Kind
	// File says which Containerfile the step is from: "" for the one of every
	// architecture, else its architecture.
	File string
	// Line is the step's first line in its file.
	Line int
	// Original is the instruction as written, continuation lines joined.
	Original string
	// Args are the parser's words: RUN's command (one word in shell form, the argv in JSON
	// form), COPY's sources then destination, WORKDIR's path, ARG's NAME[=default] each;
	// ENV and LABEL as key, value pairs, quotes still in place.
	Args []string
	// JSON is true for RUN's exec form.
	JSON bool
}

// Error is a recipe the build refuses, with where.
type Error struct {
	File string // "" for the file of every architecture
	Line int
	Msg  string
}

func (e *Error) Error() string {
	where := "containerfile"
	if e.File != "" {
		where = "containerfile for " + e.File
	}
	if e.Line > 0 {
		return fmt.Sprintf("%s, line %d: %s", where, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", where, e.Msg)
}

// Parse reads one Containerfile. file is "" for the one of every architecture, else its
// architecture; it is only used in errors. Anything but the supported instructions, their
// flags and heredocs is refused with its line.
func Parse(file, text string) ([]Step, error) {
	if !hasInstructions(text) { // buildkit refuses an empty file; here it is no steps
		return nil, nil
	}
	if i := strings.IndexByte(text, 0); i >= 0 {
		// No command line, environment or path can hold one: refused here, not by the
		// build agent after a builder Machine started.
		return nil, &Error{File: file, Line: 1 + strings.Count(text[:i], "\n"), Msg: "a NUL byte: a Containerfile is text"}
	}
	res, err := parser.Parse(strings.NewReader(text))
	if err != nil {
		return nil, &Error{File: file, Msg: err.Error()}
	}
	var steps []Step
	for _, n := range res.AST.Children {
		fail := func(format string, a ...any) error {
			return &Error{File: file, Line: n.StartLine, Msg: fmt.Sprintf(format, a...)}
		}
		name := strings.ToUpper(n.Value)
		kind, ok := supported[strings.ToLower(n.Value)]
		switch {
		case name == "FROM":
			return nil, fail("FROM is implicit: every build starts from spec.base; remove it")
		case !ok:
			return nil, fail("%s is not supported: use ARG, ENV, RUN, COPY, WORKDIR or LABEL", name)
		case len(n.Flags) > 0:
			return nil, fail("%s %s: flags are not supported", name, strings.Join(n.Flags, " "))
		case len(n.Heredocs) > 0:
			return nil, fail("%s: heredocs are not supported; write the command on the line (continue lines with \\)", name)
		}
		s := Step{Kind: kind, File: file, Line: n.StartLine, Original: n.Original, JSON: n.Attributes["json"]}
		for a := n.Next; a != nil; a = a.Next {
			s.Args = append(s.Args, a.Value)
		}
		if err := checkArgs(s); err != nil {
			return nil, fail("%s", err)
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// checkArgs refuses an instruction whose words cannot mean anything.
func checkArgs(s Step) error {
	switch s.Kind {
	case KindArg:
		if len(s.Args) == 0 {
			return fmt.Errorf("ARG needs a NAME or NAME=default")
		}
	case KindEnv, KindLabel:
		// The parser gives key, value, separator triples; an empty instruction has none.
		if len(s.Args) == 0 || len(s.Args)%3 != 0 {
			return fmt.Errorf("%s needs KEY=VALUE pairs", s.Kind)
		}
	case KindRun:
		if len(s.Args) == 0 || (len(s.Args) == 1 && strings.TrimSpace(s.Args[0]) == "") {
			return fmt.Errorf("RUN needs a command")
		}
	case KindCopy:
		if len(s.Args) < 2 {
			return fmt.Errorf("COPY needs at least one source and a destination")
		}
	case KindWorkdir:
		if len(s.Args) != 1 {
			return fmt.Errorf("WORKDIR needs one path")
		}
	}
	return nil
}

// hasInstructions reports whether text has a line that is neither blank nor a comment.
func hasInstructions(text string) bool {
	for _, line := range strings.Split(text, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return true
		}
	}
	return false
}
