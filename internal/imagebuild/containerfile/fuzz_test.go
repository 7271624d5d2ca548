package containerfile

import (
	"errors"
	"path"
	"slices"
	"strings"
	"testing"
)

// fuzzContext is the context every fuzzed recipe copies from: a file at the top, files in
// folders, and a name that is a prefix of a folder's.
var fuzzContext = []string{"motd", "etc/a.conf", "etc/sub/b.conf", "etcx", "other"}

// FuzzContainerfile parses and interprets any text as a recipe. Parse and Interpret never
// panic; their refusals are *Error with the file; and what they accept is what the build
// agent can run safely: every path it writes or works in is absolute and clean (inside the
// root, never through ".."), every file it reads is in the context, and every RUN has a
// program. A file is never written over the root folder, and no word holds a NUL byte.
func FuzzContainerfile(f *testing.F) {
	for _, seed := range []string{
		"",
		"# only a comment\n\n",
		"RUN true\n",
		"RUN true\nFROM debian\n",
		"ENV A=1\n\nCMD [\"x\"]\n",
		"ADD http://x /y\n",
		"COPY --chown=1:1 a /a\n",
		"RUN --mount=type=cache,target=/x true\n",
		"RUN <<EOT\necho hi\nEOT\n",
		"COPY a\n",
		"RUN true\nRUN echo \\\n  a\nUSER root\n",
		interpretRecipe,
		"ENV BEFORE=${TARGETARCH:-unset}\nARG TARGETARCH=ignored TARGETPLATFORM\nENV AFTER=$TARGETARCH P=$TARGETPLATFORM\nRUN true\n",
		"RUN true\nCOPY ../etc/shadow /x\n",
		"RUN true\nCOPY /etc/shadow /x\n",
		"RUN true\nCOPY *.conf /x/\n",
		"RUN true\nARG S=../../x\nCOPY $S /x\n",
		"COPY etc /d/\nRUN true\n",
		"COPY . /\n",
		"WORKDIR ../../..\nCOPY motd ../../x\n",
		"# escape=`\nRUN echo `\n  a\n",
		"RUN []\n",
		"ENV\n",
		"LABEL a\n",
	} {
		f.Add(seed, "")
		f.Add(seed, "arm64")
	}
	f.Fuzz(func(t *testing.T, text, file string) {
		steps, err := Parse(file, text)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.File != file {
				t.Fatalf("Parse refused with %T %v, want an *Error for file %q", err, err, file)
			}
			return
		}
		for _, s := range steps {
			if s.File != file || s.Line < 1 {
				t.Fatalf("step %+v: file %q line %d, want file %q and a line", s, s.File, s.Line, file)
			}
		}
		p, err := Interpret("amd64", steps, fuzzContext)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.File != file {
				t.Fatalf("Interpret refused with %T %v, want an *Error for file %q", err, err, file)
			}
			return
		}
		inRoot := func(what, p string) {
			if !path.IsAbs(p) || path.Clean(p) != p {
				t.Fatalf("%s %q is not an absolute clean path: the build would leave the root", what, p)
			}
		}
		// The kernel takes no NUL in an argument, environment variable or path.
		noNUL := func(what string, words ...string) {
			for _, w := range words {
				if strings.IndexByte(w, 0) >= 0 {
					t.Fatalf("%s %q holds a NUL byte, which no build can run", what, w)
				}
			}
		}
		for k, v := range p.Labels {
			noNUL("label", k, v)
		}
		for _, op := range p.Ops {
			switch op.Kind {
			case OpRun:
				if len(op.Argv) == 0 || op.Argv[0] == "" {
					t.Fatalf("line %d: RUN without a program: %q", op.Step.Line, op.Argv)
				}
				inRoot("RUN's directory", op.Dir)
				noNUL("RUN's word", op.Argv...)
				noNUL("RUN's environment", op.Env...)
				noNUL("RUN's directory", op.Dir)
			case OpWorkdir:
				inRoot("WORKDIR", op.Dir)
				noNUL("WORKDIR", op.Dir)
			case OpCopy:
				if len(op.Copies) == 0 {
					t.Fatalf("line %d: COPY copies nothing", op.Step.Line)
				}
				for _, c := range op.Copies {
					if !slices.Contains(fuzzContext, c.From) {
						t.Fatalf("line %d: COPY reads %q, which is not in the context", op.Step.Line, c.From)
					}
					inRoot("COPY's destination", c.To)
					noNUL("COPY's destination", c.To)
					if c.To == "/" {
						t.Fatalf("line %d: COPY writes file %q over the root folder", op.Step.Line, c.From)
					}
				}
			default:
				t.Fatalf("line %d: operation of kind %d", op.Step.Line, op.Kind)
			}
		}
		for _, c := range p.ContextFiles {
			if !slices.Contains(fuzzContext, c) {
				t.Fatalf("context file %q is not in the context", c)
			}
		}
	})
}
