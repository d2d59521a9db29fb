package node

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/imagestore"
	"github.com/svcnet/svcnet/internal/imagestore/registrytest"
)

// testImageStore is a fresh store; unpacking layers needs root.
func testImageStore(t *testing.T) *imagestore.Store {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("unpacking image layers (whiteouts, owners) needs root; CI runs as root")
	}
	store, err := imagestore.Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// TestWorkerPullsAndRuns: a pod of an image that is only in a registry
// (on 127.0.0.1, as the agent's store reaches any) is pulled by its
// worker, with kubelet's events, and its container runs from the pulled
// image and reports its imageID.
func TestWorkerPullsAndRuns(t *testing.T) {
	store := testImageStore(t)
	reg := registrytest.Start(t)
	pushBusybox(t, reg, "team/app:v1", "/bin/echo", "hello from the registry")
	a, rec := testAgent(t, store)
	image := reg.Host() + "/team/app:v1"
	pod := testPod(1, image)
	runPod(t, a, pod)

	st := awaitStatus(t, a, pod, "success", func(st *corev1.PodStatus) bool { return st.Phase == corev1.PodSucceeded })
	cs := st.ContainerStatuses[0]
	if cs.Image != image || !strings.HasPrefix(cs.ImageID, reg.Host()+"/team/app@sha256:") {
		t.Errorf("image %q, imageID %q; want %q and the registry's digest", cs.Image, cs.ImageID, image)
	}
	if stored, err := store.Get(image); err != nil || stored.ID != cs.ImageID {
		t.Errorf("store has %+v (%v), status says %q", stored, err, cs.ImageID)
	}
	log, _ := os.ReadFile(filepath.Join(a.cfg.StateDir, "pods", string(pod.UID), "c.log"))
	if !strings.Contains(string(log), "hello from the registry") {
		t.Errorf("container log %q", log)
	}
	hasEvents(t, drainEvents(rec),
		`Normal Pulling Pulling image "`+image+`"`,
		`Normal Pulled Successfully pulled image "`+image+`" in `,
		"Normal Started Started container c")
}

// TestWorkerPullFailures: kubelet's sequence for a pull that fails —
// ErrImagePull, then ImagePullBackOff — for an unknown repository and
// for a private registry without the pod's pull secret; the same
// private image pulls with the secret, of the pod or of its
// ServiceAccount.
func TestWorkerPullFailures(t *testing.T) {
	testImageStore(t) // skips without root
	public := registrytest.Start(t)
	private := registrytest.Start(t, registrytest.BasicAuth("puller", "s3cret"))
	pushBusybox(t, private, "team/app:v1", "/bin/echo", "private")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "regcred"},
		Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig(private.Host(), "puller:s3cret")}}
	builder := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "builder"},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}}}
	privateImage := private.Host() + "/team/app:v1"

	for i, tc := range []struct {
		name    string
		image   string
		edit    func(*corev1.Pod)
		message string // in the failed pull's message; "" : it succeeds
	}{
		{"an unknown repository", public.Host() + "/nobody/absent:v1", nil, "image not found"},
		{"401 without the secret", privateImage, nil, "unauthorized"},
		{"the pod's secret", privateImage, func(p *corev1.Pod) {
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
		}, ""},
		{"the ServiceAccount's secret", privateImage, func(p *corev1.Pod) { p.Spec.ServiceAccountName = "builder" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A store of its own: the image pulled by one case is not
			// present for the next.
			a, rec := testAgent(t, testImageStore(t), secret, builder)
			var edits []func(*corev1.Pod)
			if tc.edit != nil {
				edits = append(edits, tc.edit)
			}
			pod := testPod(10+i, tc.image, append(edits, func(p *corev1.Pod) {
				p.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
			})...)
			runPod(t, a, pod)
			if tc.message == "" {
				awaitStatus(t, a, pod, "success", func(st *corev1.PodStatus) bool { return st.Phase == corev1.PodSucceeded })
				hasEvents(t, drainEvents(rec), "Normal Pulling", "Normal Pulled Successfully", "Normal Started")
				return
			}
			st := awaitStatus(t, a, pod, "ErrImagePull", func(st *corev1.PodStatus) bool { return waitingReason(st) == "ErrImagePull" })
			if msg := st.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, tc.message) {
				t.Errorf("ErrImagePull message %q lacks %q", msg, tc.message)
			}
			st = awaitStatus(t, a, pod, "ImagePullBackOff", func(st *corev1.PodStatus) bool { return waitingReason(st) == "ImagePullBackOff" })
			if msg := st.ContainerStatuses[0].State.Waiting.Message; !strings.HasPrefix(msg, `Back-off pulling image "`+tc.image+`": ErrImagePull: `) {
				t.Errorf("ImagePullBackOff message %q", msg)
			}
			if st.Phase != corev1.PodPending {
				t.Errorf("phase %s, want Pending: a failed pull that reached the registry does not fail the pod", st.Phase)
			}
			hasEvents(t, drainEvents(rec), "Normal Pulling",
				`Warning Failed Failed to pull image "`+tc.image+`": `, "Warning Failed Error: ErrImagePull",
				`Normal BackOff Back-off pulling image "`+tc.image+`"`, "Warning Failed Error: ImagePullBackOff")
		})
	}
}

// TestWorkerPullUnreachable: a bare pod whose registry cannot be reached
// fails at once (imagepull.FailsBarePod); a controller's pod backs off.
func TestWorkerPullUnreachable(t *testing.T) {
	// A port of loopback that nothing listens on any more.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	image := l.Addr().String() + "/team/app:v1"
	l.Close()
	owned := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u", Controller: ptr.To(true)}}
	}
	a, _ := testAgent(t, testImageStore(t))
	bare := testPod(20, image)
	runPod(t, a, bare)
	st := awaitStatus(t, a, bare, "failure", func(st *corev1.PodStatus) bool { return st.Phase == corev1.PodFailed })
	if st.Reason != "ErrImagePull" || !strings.Contains(st.Message, "network error") || !strings.Contains(st.Message, "not built into svcnet") {
		t.Errorf("reason %q, message %q: want ErrImagePull, the network error and the built-in images", st.Reason, st.Message)
	}
	if w := st.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "ErrImagePull" || !strings.Contains(w.Message, "not built into svcnet") {
		t.Errorf("container state %+v", st.ContainerStatuses[0].State)
	}
	owner := testPod(21, image, owned)
	runPod(t, a, owner)
	st = awaitStatus(t, a, owner, "ImagePullBackOff", func(st *corev1.PodStatus) bool { return waitingReason(st) == "ImagePullBackOff" })
	if st.Phase != corev1.PodPending {
		t.Errorf("a controller's pod: phase %s", st.Phase)
	}
}

// TestWorkerDeletedMidPull: a pod deleted while its image is pulled ends
// at once; the pull goes on for no one.
func TestWorkerDeletedMidPull(t *testing.T) {
	reg := registrytest.Start(t)
	pushBusybox(t, reg, "team/slow:v1", "/bin/echo")
	t.Cleanup(reg.HoldBlobs())
	a, rec := testAgent(t, testImageStore(t))
	pod := testPod(30, reg.Host()+"/team/slow:v1")
	w, done := runPod(t, a, pod)
	deadline := time.After(30 * time.Second)
	for pulling := false; !pulling; {
		select {
		case e := <-rec.Events:
			pulling = strings.HasPrefix(e, "Normal Pulling")
		case <-deadline:
			t.Fatal("no Pulling event")
		}
	}
	w.deleted()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the worker of a deleted pod waits for its pull")
	}
}

// TestWorkersSharePull: pods of one image pulled at once fetch it once,
// and both run it.
func TestWorkersSharePull(t *testing.T) {
	reg := registrytest.Start(t)
	pushBusybox(t, reg, "team/shared:v1", "/bin/echo", "shared")
	release := reg.HoldBlobs()
	t.Cleanup(release)
	a, rec := testAgent(t, testImageStore(t))
	image := reg.Host() + "/team/shared:v1"
	before := reg.AllBlobGets()
	var ps []*corev1.Pod
	for i := range 2 {
		ps = append(ps, testPod(40+i, image))
		runPod(t, a, ps[i])
	}
	deadline := time.After(30 * time.Second)
	for pulling := 0; pulling < 2; {
		select {
		case e := <-rec.Events:
			if strings.HasPrefix(e, "Normal Pulling") {
				pulling++
			}
		case <-deadline:
			t.Fatal("the pods did not both start pulling")
		}
	}
	release()
	for _, p := range ps {
		awaitStatus(t, a, p, "success", func(st *corev1.PodStatus) bool { return st.Phase == corev1.PodSucceeded })
	}
	// The config blob and the one layer, once each.
	if got := reg.AllBlobGets() - before; got != 2 {
		t.Errorf("%d blob fetches for two pods, want 2 (config and layer, once)", got)
	}
}
