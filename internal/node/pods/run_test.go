package pods

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/imagestore"
	"github.com/svcnet/svcnet/internal/imagestore/imagetest"
	"github.com/svcnet/svcnet/internal/node/hostports"
	"github.com/svcnet/svcnet/internal/node/podstate"
	"github.com/svcnet/svcnet/internal/node/runtime"
	"github.com/svcnet/svcnet/internal/node/users"
)

// testNode is the agent as a pod sees it: no Services, no hostPorts,
// events kept.
type testNode struct {
	objects
	events chan string
}

func (testNode) ServiceEnv(*corev1.Pod) []corev1.EnvVar            { return nil }
func (testNode) SetHostPorts(types.UID, []hostports.Mapping) error { return nil }
func (n testNode) Event(_ *corev1.Pod, _, reason, f string, a ...any) {
	n.events <- reason + ": " + fmt.Sprintf(f, a...)
}

// ownNetwork gives each pod the test's own network namespace: the test
// needs no network, and makes no namespaces.
type ownNetwork struct{}

func (ownNetwork) Setup(string) (netip.Addr, string, error) {
	return netip.MustParseAddr("10.244.0.7"), fmt.Sprintf("/proc/%d/ns/net", os.Getpid()), nil
}
func (ownNetwork) Teardown(string) {}

// TestRunImage starts containers of an image from the store through the
// agent's own path (Pod.Start): the command line by Kubernetes' rules for
// each combination of command and args, the image's user from its
// passwd, the image's environment under the container's, its working
// directory, the pod's resolv.conf and hosts over the image's files — and
// the kubelet's waiting reasons for what cannot start.
func TestRunImage(t *testing.T) {
	store := testStore(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base := func() []imagetest.Entry {
		return []imagetest.Entry{
			imagetest.File("etc/passwd", "root:x:0:0:root:/root:/bin/sh\napp:x:1234:2345:app:/home/app:/bin/sh\n", 0o644),
			imagetest.File("etc/group", "root:x:0:\napp:x:2345:\n", 0o644),
			imagetest.File("etc/resolv.conf", "nameserver 192.0.2.1\n", 0o644),
			imagetest.File("etc/hosts", "127.0.0.1 image\n", 0o644),
		}
	}
	cfg := imagestore.Config{Entrypoint: []string{"/bin/echo", "entry"}, Cmd: []string{"cmd-default"},
		Env: []string{"PATH=/bin", "IMG=image", "FOO=from-image"}, WorkingDir: "/srv/app", User: "app"}
	importImage(t, store, "svcnet.test/app:v1", cfg, imagetest.Busybox(t, base()...))
	importImage(t, store, "svcnet.test/empty:v1", imagestore.Config{User: "app"}, imagetest.Busybox(t, base()...))
	importImage(t, store, "svcnet.test/stranger:v1", imagestore.Config{Cmd: []string{"/bin/echo"}, User: "stranger"}, imagetest.Busybox(t, base()...))

	check := `id -u; id -g; pwd; echo "HOME=$HOME IMG=$IMG FOO=$FOO PATH=$PATH"
cat /etc/resolv.conf /etc/hosts; test -e /etc/debian_version && echo machine-root; true`
	cases := []struct {
		name          string
		image         string
		command, args []string
		sc            *corev1.SecurityContext
		workingDir    string
		want          []string // lines of output, in order
		reason        string   // a waiting reason: it does not start
	}{
		{name: "neither: entrypoint and cmd", image: "svcnet.test/app:v1", want: []string{"entry cmd-default"}},
		{name: "args: entrypoint and args, expanded", image: "svcnet.test/app:v1", args: []string{"a1", "$(FOO)"},
			want: []string{"entry a1 bar"}},
		{name: "command: cmd ignored", image: "svcnet.test/app:v1", command: []string{"/bin/echo", "c1"}, want: []string{"c1"}},
		{name: "command and args", image: "svcnet.test/app:v1", command: []string{"echo", "c1"}, args: []string{"a1"},
			want: []string{"c1 a1"}},
		{name: "the image's user, environment, directory; the pod's files", image: "svcnet.test/app:v1",
			command: []string{"/bin/sh", "-c", check},
			want: []string{"1234", "2345", "/srv/app", "HOME=/home/app IMG=image FOO=bar PATH=/bin",
				"search default.svc.cluster.local", "10.244.0.7\t"}},
		{name: "runAsUser and workingDir win", image: "svcnet.test/app:v1", command: []string{"/bin/sh", "-c", check},
			sc: &corev1.SecurityContext{RunAsUser: ptr.To[int64](4321)}, workingDir: "/tmp",
			want: []string{"4321", "4321", "/tmp", "HOME=/ IMG=image"}},
		{name: "nothing to run", image: "svcnet.test/empty:v1", reason: "CreateContainerConfigError"},
		{name: "a user the image lacks", image: "svcnet.test/stranger:v1", reason: "CreateContainerConfigError"},
		{name: "runAsNonRoot and a named user", image: "svcnet.test/app:v1", sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			reason: "CreateContainerConfigError"},
		{name: "neither built in nor in the store", image: "svcnet.test/absent:v1", reason: "ErrImagePull"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := testNode{events: make(chan string, 16)}
			rt := &Runtime{Self: self, NodeIP: netip.MustParseAddr("10.0.0.1"), ClusterDNS: "10.96.0.10",
				ClusterDomain: "cluster.local", Net: ownNetwork{}, Node: node, Images: store, Users: testUsers(t)}
			spec := corev1.Container{Name: "c", Image: tc.image, Command: tc.command, Args: tc.args,
				SecurityContext: tc.sc, WorkingDir: tc.workingDir, Env: []corev1.EnvVar{{Name: "FOO", Value: "bar"}}}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprint("p", i),
				UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))}, Spec: corev1.PodSpec{Containers: []corev1.Container{spec}}}
			p := New(rt, pod, filepath.Join(t.TempDir(), "pod"), []*podstate.Container{podstate.NewContainer(spec, false)}, func(*ExecInfo) {})
			t.Cleanup(p.Remove) // after the container's end: cleanups run last first
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			if !p.EnsureSandbox(ctx) {
				t.Fatal("sandbox:", p.SandboxErr())
			}
			c := p.Container("c")
			t.Cleanup(func() { runtime.Kill(p.runDir(c)) })
			p.Start(ctx, "c")
			if tc.reason != "" {
				if c.State.Waiting == nil || c.State.Waiting.Reason != tc.reason {
					t.Fatalf("state %+v, want waiting with %s", c.State, tc.reason)
				}
				t.Logf("%s: %s", tc.reason, c.State.Waiting.Message)
				return
			}
			if c.proc == nil {
				t.Fatalf("not started: %+v", c.State.Waiting)
			}
			if id := c.Status(tc.image).ImageID; !strings.HasPrefix(id, "svcnet.test/app@sha256:") {
				t.Errorf("imageID %q, want the store's", id)
			}
			var exit Exit
			select {
			case exit = <-p.Exits():
			case <-time.After(30 * time.Second):
				t.Fatal("the container did not end")
			}
			log, _ := os.ReadFile(p.logPath(c))
			var lines []string
			for line := range strings.SplitSeq(string(log), "\n") {
				if f := strings.SplitN(line, " ", 4); len(f) == 4 {
					lines = append(lines, f[3])
				}
			}
			out := strings.Join(lines, "\n")
			if exit.code != 0 {
				run, _ := os.ReadFile(filepath.Join(p.runDir(c), "shim.log"))
				t.Fatalf("exit code %d, output:\n%s\n%s", exit.code, out, run)
			}
			at := 0
			for _, w := range tc.want {
				i := strings.Index(out[at:], w)
				if i < 0 {
					t.Fatalf("output lacks %q after offset %d:\n%s", w, at, out)
				}
				at += i + len(w)
			}
			for _, bad := range []string{"machine-root", "nameserver 192.0.2.1", "127.0.0.1 image"} {
				if strings.Contains(out, bad) {
					t.Errorf("output has %q:\n%s", bad, out)
				}
			}
		})
	}
}

// testUsers is a test's own claims on pod users.
func testUsers(t *testing.T) *users.Allocator {
	t.Helper()
	a, err := users.Open(filepath.Join(t.TempDir(), "users"))
	if err != nil {
		t.Fatal(err)
	}
	return a
}
