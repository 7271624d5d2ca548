package osimage_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	imagesv1alpha1 "github.com/anvil-dev/anvil/api/images/v1alpha1"
)

// Editing a context file's ConfigMap or Secret, and nothing else, makes a new build: the
// controller watches ConfigMaps and looks at Secrets again (SecretRecheck; it may not
// watch Secrets) rather than waiting for the OSImage to change.
func TestContextEditsRebuild(t *testing.T) {
	both, _ := setup(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ctx-files", Namespace: "default"}, Data: map[string]string{"motd": "one"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ctx-secret", Namespace: "default"}, Data: map[string][]byte{"token": []byte("a")}}
	for _, o := range []client.Object{cm, secret} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	o := recipe("context", both, "amd64")
	o.Spec.Containerfiles = []imagesv1alpha1.Containerfile{{Content: "COPY motd /etc/motd\nCOPY token /etc/token\n"}}
	o.Spec.Context = []imagesv1alpha1.ContextFile{
		{Path: "motd", ConfigMapKeyRef: &imagesv1alpha1.KeyReference{Name: "ctx-files", Key: "motd"}},
		{Path: "token", SecretKeyRef: &imagesv1alpha1.KeyReference{Name: "ctx-secret", Key: "token"}},
	}
	if err := env.Client.Create(ctx, o); err != nil {
		t.Fatal(err)
	}
	build := latestBuildOtherThan(t, o, "")
	cm.Data["motd"] = "two"
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	afterConfigMap := latestBuildOtherThan(t, o, build)
	secret.Data["token"] = []byte("b")
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	latestBuildOtherThan(t, o, afterConfigMap)
}

// latestBuildOtherThan waits for the OSImage's latest build to be set and not to be name.
func latestBuildOtherThan(t *testing.T, o *imagesv1alpha1.OSImage, name string) string {
	t.Helper()
	var latest string
	eventually(t, fmt.Sprintf("OSImage %s: a latest build other than %q", o.Name, name), func() (bool, string) {
		got := &imagesv1alpha1.OSImage{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(o), got); err != nil {
			t.Fatal(err)
		}
		latest = got.Status.LatestBuild
		return latest != "" && latest != name, fmt.Sprintf("status %+v", got.Status)
	})
	return latest
}
