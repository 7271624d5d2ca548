package mri

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mriv1alpha1 "github.com/anvil-dev/anvil/api/mri/v1alpha1"
)

// idRuntime answers a create with an id made of the request's uid label, and refuses
// the uid "bad".
type idRuntime struct {
	mriv1alpha1.UnimplementedMachineRuntimeServer
}

func (idRuntime) CreateMachine(_ context.Context, req *mriv1alpha1.CreateMachineRequest) (*mriv1alpha1.CreateMachineResponse, error) {
	labels := req.GetMachine().GetMetadata().GetLabels()
	if labels[LabelMachineUID] == "bad" {
		return nil, status.Error(codes.InvalidArgument, "bad")
	}
	m := &mriv1alpha1.Machine{Metadata: &mriv1alpha1.ObjectMetadata{Id: "rt-" + labels[LabelMachineUID], Labels: labels}}
	return &mriv1alpha1.CreateMachineResponse{Machine: m}, nil
}

func TestCreateJournalRecordsEveryAnsweredCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "creates.jsonl")
	endpoint := serve(t, idRuntime{}, CreateJournal(path))
	c, conn, err := Dial(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	create := func(uid string) error {
		_, err := c.CreateMachine(context.Background(), &mriv1alpha1.CreateMachineRequest{Machine: &mriv1alpha1.Machine{
			Metadata: &mriv1alpha1.ObjectMetadata{Labels: map[string]string{LabelMachineUID: uid}}}})
		return err
	}
	for _, uid := range []string{"u1", "u1", "u2"} {
		if err := create(uid); err != nil {
			t.Fatal(err)
		}
	}
	if err := create("bad"); err == nil {
		t.Fatal("the refused create was answered")
	}
	got, err := ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []JournalEntry{{UID: "u1", ID: "rt-u1"}, {UID: "u1", ID: "rt-u1"}, {UID: "u2", ID: "rt-u2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("journal %+v, want %+v (a refused create is not recorded)", got, want)
	}
}

func TestReadJournalLeavesOutALastLineCutShort(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, text string
		want       []JournalEntry
		wantErr    bool
	}{
		{"whole", `{"uid":"u1","id":"a"}` + "\n", []JournalEntry{{UID: "u1", ID: "a"}}, false},
		{"cut", `{"uid":"u1","id":"a"}` + "\n" + `{"uid":"u2","i`, []JournalEntry{{UID: "u1", ID: "a"}}, false},
		{"bad in the middle", `{"uid":"u1","id":"a"}` + "\n" + `garbage` + "\n" + `{"uid":"u2","id":"b"}` + "\n", nil, true},
	} {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, []byte(c.text), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadJournal(path)
		if (err != nil) != c.wantErr || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: ReadJournal = %+v, %v; want %+v, error %v", c.name, got, err, c.want, c.wantErr)
		}
	}
	if got, err := ReadJournal(filepath.Join(dir, "missing")); err != nil || got != nil {
		t.Errorf("missing journal: %+v, %v; want nothing, no error", got, err)
	}
}
