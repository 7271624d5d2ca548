package containerfile

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseRefusesWhatIsNotSupportedWithItsLine(t *testing.T) {
	for _, tc := range []struct {
		name, file, text, want string
	}{
		{"FROM", "", "RUN true\nFROM debian\n", "containerfile, line 2: FROM is implicit"},
		{"CMD", "arm64", "ENV A=1\n\nCMD [\"x\"]\n", "containerfile for arm64, line 3: CMD is not supported"},
		{"ADD", "", "ADD http://x /y\n", "line 1: ADD is not supported"},
		{"flags", "", "COPY --chown=1:1 a /a\n", "line 1: COPY --chown=1:1: flags are not supported"},
		{"RUN --mount", "", "RUN --mount=type=cache,target=/x true\n", "line 1: RUN --mount=type=cache,target=/x: flags are not supported"},
		{"heredoc", "", "RUN <<EOT\necho hi\nEOT\n", "line 1: RUN: heredocs are not supported"},
		{"COPY one word", "", "COPY a\n", "line 1: COPY needs at least one source and a destination"},
		{"continued line", "", "RUN true\nRUN echo \\\n  a\nUSER root\n", "line 4: USER is not supported"},
		{"NUL", "", "RUN true\nENV A=a\x00b\n", "line 2: a NUL byte"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.file, tc.text)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse() error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// interpretRecipe uses every instruction, variables and COPY of files and folders.
const interpretRecipe = `ARG TARGETARCH
ARG VERSION=1.${TARGETARCH}
ENV GREETING="hello world" ARCH=$TARGETARCH
LABEL org.example.version=$VERSION "team"="os team"
WORKDIR /opt/app
RUN echo "$GREETING" > greeting
RUN ["/bin/echo", "$ARCH"]
COPY motd /etc/
COPY motd banner
COPY etc /etc/anvil/
WORKDIR sub
COPY motd other ./
`

func TestInterpret(t *testing.T) {
	context := []string{"motd", "etc/a.conf", "etc/sub/b.conf", "other"}
	text := interpretRecipe
	steps, err := Parse("", text)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Interpret("arm64", steps, context)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"ARCH=arm64", "GREETING=hello world", "TARGETARCH=arm64", "VERSION=1.arm64"}
	want := []Op{
		{Kind: OpWorkdir, Dir: "/opt/app"},
		{Kind: OpRun, Dir: "/opt/app", Env: env, Argv: []string{"/bin/sh", "-c", `echo "$GREETING" > greeting`}},
		{Kind: OpRun, Dir: "/opt/app", Env: env, Argv: []string{"/bin/echo", "$ARCH"}},
		{Kind: OpCopy, Copies: []Copy{{"motd", "/etc/motd"}}},
		{Kind: OpCopy, Copies: []Copy{{"motd", "/opt/app/banner"}}},
		{Kind: OpCopy, Copies: []Copy{{"etc/a.conf", "/etc/anvil/a.conf"}, {"etc/sub/b.conf", "/etc/anvil/sub/b.conf"}}},
		{Kind: OpWorkdir, Dir: "/opt/app/sub"},
		{Kind: OpCopy, Copies: []Copy{{"motd", "/opt/app/sub/motd"}, {"other", "/opt/app/sub/other"}}},
	}
	if len(p.Ops) != len(want) {
		t.Fatalf("got %d ops, want %d: %+v", len(p.Ops), len(want), p.Ops)
	}
	for i := range want {
		got := p.Ops[i]
		got.Step = Step{}
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("op %d (line %d) = %+v, want %+v", i, p.Ops[i].Step.Line, got, want[i])
		}
	}
	if wantLabels := map[string]string{"org.example.version": "1.arm64", "team": "os team"}; !reflect.DeepEqual(p.Labels, wantLabels) {
		t.Errorf("labels = %v, want %v", p.Labels, wantLabels)
	}
	if want := []string{"etc/a.conf", "etc/sub/b.conf", "motd", "other"}; !reflect.DeepEqual(p.ContextFiles, want) {
		t.Errorf("context files = %v, want %v", p.ContextFiles, want)
	}
}

func TestInterpretPlatformArgsNeedDeclaring(t *testing.T) {
	steps, err := Parse("", "ENV BEFORE=${TARGETARCH:-unset}\nARG TARGETARCH=ignored TARGETPLATFORM\nENV AFTER=$TARGETARCH P=$TARGETPLATFORM\nRUN true\n")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Interpret("amd64", steps, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Join(p.Ops[0].Env, " ")
	if want := "AFTER=amd64 BEFORE=unset P=linux/amd64 TARGETARCH=amd64 TARGETPLATFORM=linux/amd64"; env != want {
		t.Errorf("env = %q, want %q", env, want)
	}
}

func TestInterpretRefusesCopiesOutsideTheContext(t *testing.T) {
	for _, tc := range []struct{ copy, want string }{
		{"COPY missing /x", "line 2: COPY missing: no such file in spec.context"},
		{"COPY ../etc/shadow /x", "COPY ../etc/shadow: sources are paths in spec.context"},
		{"COPY /etc/shadow /x", "COPY /etc/shadow: sources are paths in spec.context"},
		{"COPY *.conf /x/", "wildcards are not supported"},
		{"ARG S=../../x\nCOPY $S /x", "line 3: COPY ../../x: sources are paths in spec.context"},
	} {
		steps, err := Parse("arm64", "RUN true\n"+tc.copy+"\n")
		if err != nil {
			t.Fatal(err)
		}
		_, err = Interpret("arm64", steps, []string{"a", "dir/b"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error = %v, want one containing %q", tc.copy, err, tc.want)
		}
	}
}

func TestInterpretReadsOnlyTheFilesCopied(t *testing.T) {
	steps, err := Parse("", "COPY dir /d/\nRUN true\n")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Interpret("amd64", steps, []string{"dir/x", "dirx", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"dir/x"}; !reflect.DeepEqual(p.ContextFiles, want) {
		t.Errorf("context files = %v, want %v (a prefix of a name is not a directory)", p.ContextFiles, want)
	}
}

// A destination of ".", "" or ending in "/." is the working directory, as buildkit reads it,
// and one that cleans to the root is the root folder: a file is copied into them, never over.
func TestInterpretCopyIntoDirectoryDestinations(t *testing.T) {
	for _, tc := range []struct{ copy, want string }{
		{"COPY motd .", "/opt/app/motd"},
		{`COPY motd ""`, "/opt/app/motd"},
		{"COPY motd ./", "/opt/app/motd"},
		{"COPY motd /etc/.", "/etc/motd"},
		{"COPY motd sub/.", "/opt/app/sub/motd"},
		{"COPY motd /etc/..", "/motd"},
		{"COPY motd ../../..", "/motd"},
		{"COPY motd banner", "/opt/app/banner"},
		{"COPY motd /etc/motd.d/..x", "/etc/motd.d/..x"},
	} {
		steps, err := Parse("", "WORKDIR /opt/app\n"+tc.copy+"\n")
		if err != nil {
			t.Fatal(err)
		}
		p, err := Interpret("amd64", steps, []string{"motd"})
		if err != nil {
			t.Fatalf("%s: %v", tc.copy, err)
		}
		if got := p.Ops[1].Copies; len(got) != 1 || got[0].To != tc.want {
			t.Errorf("%s: copies %+v, want motd to %s", tc.copy, got, tc.want)
		}
	}
}
