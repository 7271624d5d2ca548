package hostplan

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	metalv1alpha1 "github.com/anvil-dev/anvil/api/metal/v1alpha1"
	"github.com/anvil-dev/anvil/internal/provisioner"
)

func rebootAsked(token string) hostOpt {
	return func(h *metalv1alpha1.Host) {
		if h.Annotations == nil {
			h.Annotations = map[string]string{}
		}
		h.Annotations[metalv1alpha1.AnnotationReboot] = token
	}
}

func unreadableRecord(h *metalv1alpha1.Host) {
	recorded(&Record{})(h)
	h.Annotations[metalv1alpha1.AnnotationDeployment] = "{not json"
}

// What the Host's deployment record decides when the provisioner lost its records (the
// node is Manageable again) and the Host's status is gone too (a restore from a backup):
// a deployment started for the Host's consumer is adopted with the record's image;
// anything else — never deployed, released, another consumer's, unreadable — is provided
// like a new server, and wiped at Available before anyone's image is written.
func TestDecideFromRecord(t *testing.T) {
	u, v := "uid-u", "uid-v"
	manageable := node(provisioner.StateManageable)
	available := node(provisioner.StateAvailable)
	activeA := node(provisioner.StateActive, powered, running(imgA))
	erasing := func(n *provisioner.Node) { n.Image = *eraser }
	eraserOff := node(provisioner.StateActive, erasing)
	eraserOn := node(provisioner.StateActive, powered, erasing)
	type want struct {
		action Action
		state  metalv1alpha1.ProvisioningState
		record *Record // the record written with the action; nil: none
		clear  bool
		adopt  *metalv1alpha1.HostImage
	}
	for _, tc := range []struct {
		name   string
		host   *metalv1alpha1.Host
		node   *provisioner.Node
		eraser bool
		hwKnow bool
		want   want
	}{
		{"the consumer's deployment is adopted", host(consumedBy(u), wants(imgA), recorded(&Record{Consumer: u, Image: imgA})), manageable, false, true,
			want{action: ActionAdopt, state: metalv1alpha1.StateProvisioned, adopt: imgA}},
		{"adopted before inspection: hardware unknown does not matter", host(consumedBy(u), wants(imgA), recorded(&Record{Consumer: u, Image: imgA})), manageable, true, false,
			want{action: ActionAdopt, state: metalv1alpha1.StateProvisioned, adopt: imgA}},
		{"adopted with the image the record says, not the one asked since", host(consumedBy(u), wants(imgB), recorded(&Record{Consumer: u, Image: imgA})), manageable, false, true,
			want{action: ActionAdopt, state: metalv1alpha1.StateProvisioned, adopt: imgA}},
		{"a deployment started for another consumer is not adopted for this one", host(consumedBy(v), wants(imgA), recorded(&Record{Consumer: u, Image: imgA})), manageable, true, true,
			want{action: ActionProvide, state: metalv1alpha1.StateDeprovisioning}},
		{"a released deployment is not adopted", host(consumedBy(u), wants(imgA), recorded(&Record{Consumer: u, Image: imgA, Released: true})), manageable, true, true,
			want{action: ActionProvide, state: metalv1alpha1.StateDeprovisioning}},
		{"a deployment whose consumer wants no server any more is not adopted", host(consumedBy(u), recorded(&Record{Consumer: u, Image: imgA})), manageable, true, true,
			want{action: ActionProvide, state: metalv1alpha1.StateDeprovisioning}},
		{"an unreadable record is never adopted", host(consumedBy(u), wants(imgA), unreadableRecord), manageable, true, true,
			want{action: ActionProvide, state: metalv1alpha1.StateDeprovisioning}},
		{"no record: never deployed, provided", host(consumedBy(u), wants(imgA)), manageable, false, true,
			want{action: ActionProvide, state: metalv1alpha1.StateInspecting}},
		{"status.image without a record adopts nothing: status does not decide", host(consumedBy(u), wants(imgA), ran(imgA), unrecorded), manageable, false, true,
			want{action: ActionProvide, state: metalv1alpha1.StateInspecting}},

		{"never deployed: provisioned once, the record written as it starts", host(consumedBy(u), wants(imgA), rebuildAsked(u, 1)), available, true, true,
			want{action: ActionProvision, state: metalv1alpha1.StateProvisioning, record: &Record{Consumer: u, Image: imgA, Rebuild: metalv1alpha1.RebuildToken(u, 1)}}},
		{"a deployment queued before the loss (the record ours, nothing on the node) is provisioned", host(consumedBy(u), wants(imgA), recorded(&Record{Consumer: u, Image: imgA})), available, true, true,
			want{action: ActionProvision, state: metalv1alpha1.StateProvisioning, record: &Record{Consumer: u, Image: imgA}}},
		{"another consumer's record: wiped before this consumer's image", host(consumedBy(v), wants(imgB), recorded(&Record{Consumer: u, Image: imgA})), available, true, true,
			want{action: ActionWipe, state: metalv1alpha1.StateDeprovisioning}},
		{"a released record: wiped before anything, with no status to say so", host(recorded(&Record{Consumer: u, Image: imgA, Released: true})), available, true, true,
			want{action: ActionWipe, state: metalv1alpha1.StateDeprovisioning}},
		{"where the site does not wipe, another consumer's record is replaced as its deployment starts", host(consumedBy(v), wants(imgB), recorded(&Record{Consumer: u, Image: imgA})), available, false, true,
			want{action: ActionProvision, state: metalv1alpha1.StateProvisioning, record: &Record{Consumer: v, Image: imgB}}},
		{"where the site does not wipe, a deprovisioned server's record goes", host(recorded(&Record{Consumer: u, Image: imgA, Released: true})), available, false, true,
			want{action: ActionWait, state: metalv1alpha1.StateAvailable, clear: true}},

		{"the consumer's deployment runs: nothing to write", host(consumedBy(u), wants(imgA), online, recorded(&Record{Consumer: u, Image: imgA})), activeA, true, true,
			want{action: ActionWait, state: metalv1alpha1.StateProvisioned}},
		{"a deployment without a record (an older anvil) gets one", host(consumedBy(u), wants(imgA), online), activeA, true, true,
			want{action: ActionWait, state: metalv1alpha1.StateProvisioned, record: &Record{Consumer: u, Image: imgA}}},
		{"a record of an image asked and asked back is corrected", host(consumedBy(u), wants(imgA), online, recorded(&Record{Consumer: u, Image: imgB, Rebuild: "x/1"})), activeA, true, true,
			want{action: ActionWait, state: metalv1alpha1.StateProvisioned, record: &Record{Consumer: u, Image: imgA, Rebuild: "x/1"}}},
		{"a deployment of another consumer's is torn down, released first", host(consumedBy(v), wants(imgA), online, recorded(&Record{Consumer: u, Image: imgA})), activeA, true, true,
			want{action: ActionDeprovision, state: metalv1alpha1.StateDeprovisioning, record: &Record{Consumer: u, Image: imgA, Released: true}}},
		{"a released deployment is torn down, marked released first", host(consumedBy(u), recorded(&Record{Consumer: u, Image: imgA})), activeA, true, true,
			want{action: ActionDeprovision, state: metalv1alpha1.StateDeprovisioning, record: &Record{Consumer: u, Image: imgA, Released: true}}},
		{"a torn-down deployment whose tear-down call was lost is torn down again", host(consumedBy(u), wants(imgA), recorded(&Record{Consumer: u, Image: imgA, Released: true})), activeA, true, true,
			want{action: ActionDeprovision, state: metalv1alpha1.StateDeprovisioning}},

		{"the eraser running with no status left is waited for", host(recorded(&Record{Consumer: u, Image: imgA, Released: true})), eraserOn, true, true,
			want{action: ActionWait, state: metalv1alpha1.StateDeprovisioning}},
		{"the eraser done: the record goes before the status says wiped", host(recorded(&Record{Consumer: u, Image: imgA, Released: true})), eraserOff, true, true,
			want{action: ActionDeprovision, state: metalv1alpha1.StateDeprovisioning, clear: true}},
		{"cleaning a server with a record is deprovisioning", host(recorded(&Record{Consumer: u, Image: imgA, Released: true})), node(provisioner.StateCleaning), false, true,
			want{action: ActionWait, state: metalv1alpha1.StateDeprovisioning}},
		{"a failed deployment is released before it is torn down: never adopted", host(consumedBy(u), wants(imgA), recorded(&Record{Consumer: u, Image: imgA})),
			node(provisioner.StateFailed, running(imgA), failedFrom(provisioner.OpProvision)), true, true,
			want{action: ActionDeprovision, state: metalv1alpha1.StateProvisioning, record: &Record{Consumer: u, Image: imgA, Released: true}}},
		{"a lost provisioned Host enrols as Provisioned", host(consumedBy(u), wants(imgA), recorded(&Record{Consumer: u, Image: imgA})), nil, true, true,
			want{action: ActionRegister, state: metalv1alpha1.StateProvisioned}},

		{"a reboot carried out before the status was lost is not repeated", host(consumedBy(u), wants(imgA), online, rebootAsked("r1"), recorded(&Record{Consumer: u, Image: imgA, Reboot: "r1"})), activeA, true, true,
			want{action: ActionWait, state: metalv1alpha1.StateProvisioned}},
		{"a new reboot is recorded once carried out", host(consumedBy(u), wants(imgA), online, rebootAsked("r2"), recorded(&Record{Consumer: u, Image: imgA, Reboot: "r1"})), activeA, true, true,
			want{action: ActionReboot, state: metalv1alpha1.StateProvisioned, record: &Record{Consumer: u, Image: imgA, Reboot: "r2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Host: tc.host, Node: tc.node, HardwareKnown: tc.hwKnow, RebootRequested: RebootRequested(tc.host)}
			if tc.eraser {
				in.Eraser = eraser
			}
			p := Decide(in)
			if p.Action != tc.want.action || p.State != tc.want.state || p.Reason == "" {
				t.Fatalf("Decide = %s %s (reason %q), want %s %s", p.Action, p.State, p.Reason, tc.want.action, tc.want.state)
			}
			if got, want := encoded(p.Record), encoded(tc.want.record); got != want || p.ClearRecord != tc.want.clear {
				t.Fatalf("record written %s (clear %v), want %s (clear %v)", got, p.ClearRecord, want, tc.want.clear)
			}
			if !tc.want.adopt.Same(p.Adopt) && (tc.want.adopt != nil || p.Adopt != nil) {
				t.Fatalf("adopts %+v, want %+v", p.Adopt, tc.want.adopt)
			}
			// Where the site wipes, what the record says the disks hold shows as not wiped.
			if tc.eraser && leftBehind(Input{Host: tc.host, record: recordOf(tc.host)}) && p.WipeReason == "" {
				t.Fatalf("the record says the disks hold a deployment, the Wiped condition is not set")
			}
		})
	}
}

func encoded(r *Record) string {
	if r == nil {
		return "none"
	}
	return r.Encode()
}

// Safety, over any record, consumer, wanted image, status and node: the Host is adopted
// only for the consumer the record names, with the record's image, while it still wants
// a server; where the site wipes, nothing is deployed over what the record says another
// consumer (or a released deployment) left; and a deployment's record is written with
// it, for the Host's consumer.
func TestRecordSafety(t *testing.T) {
	images := []*metalv1alpha1.HostImage{nil, imgA, imgB}
	uids := []string{"", "uid-u", "uid-v"}
	states := []provisioner.State{provisioner.StateManageable, provisioner.StateAvailable, provisioner.StateActive,
		provisioner.StateCleaning, provisioner.StateDeploying, provisioner.StateFailed, provisioner.StateAdopting}
	ops := []provisioner.Operation{provisioner.OpProvision, provisioner.OpAdopt, provisioner.OpClean, provisioner.OpInspect}
	rapid.Check(t, func(t *rapid.T) {
		h := &metalv1alpha1.Host{}
		if c := rapid.SampledFrom(uids).Draw(t, "consumer"); c != "" {
			consumedBy(c)(h)
		}
		h.Spec.Image = rapid.SampledFrom(images).Draw(t, "wants")
		h.Spec.Online = rapid.Bool().Draw(t, "online")
		if rapid.Bool().Draw(t, "has record") {
			recorded(&Record{Consumer: rapid.SampledFrom(uids).Draw(t, "record consumer"),
				Image: rapid.SampledFrom(images[1:]).Draw(t, "record image"), Released: rapid.Bool().Draw(t, "released")})(h)
		}
		if rapid.Bool().Draw(t, "status intact") {
			h.Status.Image = rapid.SampledFrom(images).Draw(t, "ran")
			h.Status.ProvisioningState = metalv1alpha1.StateProvisioned
			if rapid.Bool().Draw(t, "wiped") {
				wiped(metav1.ConditionTrue, metalv1alpha1.ReasonWiped)(h)
			}
		}
		n := node(rapid.SampledFrom(states).Draw(t, "node"), running(rapid.SampledFrom(images[1:]).Draw(t, "node image")),
			failedFrom(rapid.SampledFrom(ops).Draw(t, "failed from")))
		in := Input{Host: h, Node: n, HardwareKnown: rapid.Bool().Draw(t, "hardware known")}
		if rapid.Bool().Draw(t, "wipes") {
			in.Eraser = eraser
		}
		rec, _ := RecordOf(h)
		p := Decide(in)
		if p.Action == ActionAdopt {
			if rec == nil || rec.Released || rec.Consumer != consumerUID(h) || h.Spec.Image == nil || !rec.Image.Same(p.Adopt) {
				t.Fatalf("adopted %+v for consumer %q (wants %v) with record %+v", p.Adopt, consumerUID(h), h.Spec.Image, rec)
			}
		}
		if in.Eraser != nil && (p.Action == ActionProvision || p.Action == ActionRebuild) && rec != nil &&
			(rec.Released || rec.Consumer != consumerUID(h)) {
			t.Fatalf("%s over a record of %+v for consumer %q on a site that wipes", p.Action, rec, consumerUID(h))
		}
		if p.Action == ActionProvision || p.Action == ActionRebuild {
			if p.Record == nil || p.Record.Consumer != consumerUID(h) || !p.Record.Image.Same(h.Spec.Image) || p.Record.Released {
				t.Fatalf("%s writes the record %+v, want one of %v for %q", p.Action, p.Record, h.Spec.Image, consumerUID(h))
			}
		}
	})
}
