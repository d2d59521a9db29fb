package cluster_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/svcnet/svcnet/internal/imagestore/imagetest"
	"github.com/svcnet/svcnet/internal/imagestore/registrytest"
	"github.com/svcnet/svcnet/internal/netns"
)

// TestPulledImage: a Deployment of an image no node has is pulled by
// the node agents from a registry (plain HTTP, `--insecure-registry`)
// that runs in the cluster's outside client's namespace, runs from the
// image's own layers (busybox's httpd serving a file of the image, as
// the image's user) and answers through its Service; the pods' events
// and imageID tell what was pulled. A pod of a repository the registry
// does not have waits in ImagePullBackOff. The same image, never pushed,
// runs from `svcnet load` of its docker save archive. The reference
// scenario runs with its server built as an image of its own.
func TestPulledImage(t *testing.T) {
	t.Parallel()
	c := up(t, 2, "--insecure-registry=172.18.0.2:5000")
	client := "svcnet-" + c.name + "-client"
	ln, err := netns.Listen(client, "tcp", "172.18.0.2:5000")
	if err != nil {
		t.Fatal(err)
	}
	reg := registrytest.New(ln)
	t.Cleanup(func() { _ = reg.Close() })

	img := imagetest.Image(t, v1.Config{Entrypoint: []string{"/bin/busybox", "httpd", "-f", "-p", "8080", "-h", "/www"}, User: "web"}, nil,
		imagetest.LayerOf(t, imagetest.Busybox(t)),
		imagetest.LayerOf(t, imagetest.Layer(t, imagetest.Entry{Name: "www/", Type: '5', Mode: 0o755},
			imagetest.File("www/index.html", "served from a pulled image\n", 0o644),
			imagetest.File("etc/passwd", "root:x:0:0::/root:/bin/sh\nweb:x:1234:1234::/www:/bin/sh\n", 0o644),
			imagetest.File("etc/group", "root:x:0:\nweb:x:1234:\n", 0o644))))
	push := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return netns.DialContext(ctx, client, network, addr)
	}}
	ref := reg.Push(t, "e2e/web:1", img, remote.WithTransport(push))
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}

	k := c.kubectl
	k.MustRun("", "create", "deployment", "web", "--image="+ref, "--replicas=2", "--port=8080")
	k.MustRun("", "expose", "deployment", "web", "--port=80", "--target-port=8080")
	k.MustRun("", "rollout", "status", "deployment/web", "--timeout=2m")
	clusterIP := k.MustRun("", "get", "service", "web", "-o", "jsonpath={.spec.clusterIP}")
	for _, node := range []string{"node-1", "node-2"} {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: nsDialer("svcnet-" + c.name + "-" + node)}}
		var body string
		c.until("the image's page through the Service from "+node, 30*time.Second, func() bool {
			body, err = httpGet(hc, "http://"+clusterIP+"/index.html")
			return err == nil
		})
		if body != "served from a pulled image\n" {
			t.Errorf("from %s: %q, want the image's index.html", node, body)
		}
	}
	ids := k.MustRun("", "get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].status.containerStatuses[0].imageID}")
	for _, id := range strings.Fields(ids) {
		if id != "172.18.0.2:5000/e2e/web@"+digest.String() {
			t.Errorf("imageID %q, want the pushed image's digest %s", id, digest)
		}
	}
	events := k.MustRun("", "get", "events", "--field-selector", "reason=Pulled", "-o", "jsonpath={.items[*].message}")
	if !strings.Contains(events, `Successfully pulled image "`+ref+`"`) {
		t.Errorf("no Pulled event for %s: %q", ref, events)
	}
	// The image's user, from its own /etc/passwd.
	pod := strings.Fields(k.MustRun("", "get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].metadata.name}"))[0]
	if uid := strings.TrimSpace(k.MustRun("", "exec", pod, "--", "/bin/busybox", "id", "-u")); uid != "1234" {
		t.Errorf("the container runs as %s, want the image's user web (1234)", uid)
	}

	// The same image never pushed: `svcnet load` of its docker save
	// archive puts it on the nodes, and a pod that may not pull runs it.
	archive := filepath.Join(t.TempDir(), "web.tar")
	if err := os.WriteFile(archive, imagetest.DockerSave(t, map[string]v1.Image{"e2e.local/loaded:1": img}), 0o644); err != nil {
		t.Fatal(err)
	}
	load := exec.Command(c.bin, "load", archive)
	load.Env = append(os.Environ(), "SVCNET_HOME="+c.home)
	if out, err := load.CombinedOutput(); err != nil || !strings.Contains(string(out), "e2e.local/loaded:1") {
		t.Fatalf("svcnet load: %v: %s", err, out)
	}
	k.MustRun("", "run", "loaded", "--image=e2e.local/loaded:1", "--image-pull-policy=Never")
	c.untilRunning("the loaded image's pod", "loaded")
	if got := k.MustRun("", "exec", "loaded", "--", "/bin/busybox", "cat", "/www/index.html"); got != "served from a pulled image\n" {
		t.Errorf("the loaded image's file: %q", got)
	}
	cfg, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if id := k.MustRun("", "get", "pod", "loaded", "-o", "jsonpath={.status.containerStatuses[0].imageID}"); id != "e2e.local/loaded@"+cfg.String() {
		t.Errorf("the loaded image's imageID %q, want its config digest %s", id, cfg)
	}

	// The reference scenario with its server as a real image: a static Go
	// binary built here, alone in its image, pulled by both nodes and
	// reached by every path of the scenario (from a client pod with curl:
	// the image has nothing but the server).
	bin := filepath.Join(t.TempDir(), "hostnames")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/hostnames")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the hostnames server: %v: %s", err, out)
	}
	server, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	hostnames := imagetest.Image(t, v1.Config{Entrypoint: []string{"/hostnames"}, ExposedPorts: map[string]struct{}{"9376/tcp": {}}}, nil,
		imagetest.LayerOf(t, imagetest.Layer(t, imagetest.File("hostnames", string(server), 0o755))))
	hostnamesRef := reg.Push(t, "e2e/hostnames:1", hostnames, remote.WithTransport(push))
	k.MustRun(strings.Replace(examples(t), "image: svcnet/hostnames", "image: "+hostnamesRef, 1), "apply", "-f", "-")
	k.MustRun("", "run", "curl", "--image=agnhost")
	c.untilRunning("the client pod", "curl")
	pods, want := c.waitHostnames(2 * time.Minute)
	c.reachReference(pods, want, []string{"172.18.0.11", "172.18.0.12"}, 9, "2", 30*time.Second, "curl")
	hostnamesDigest, err := hostnames.Digest()
	if err != nil {
		t.Fatal(err)
	}
	ids = k.MustRun("", "get", "pods", "-l", "app=hostnames", "-o", "jsonpath={.items[*].status.containerStatuses[0].imageID}")
	if f := strings.Fields(ids); len(f) != 3 || f[0] != "172.18.0.2:5000/e2e/hostnames@"+hostnamesDigest.String() {
		t.Errorf("the hostnames pods' imageIDs %q, want the built image's digest %s", ids, hostnamesDigest)
	}

	// A repository the registry does not have: the pod backs off.
	k.MustRun("", "create", "deployment", "missing", "--image=172.18.0.2:5000/e2e/missing:1")
	c.until("the missing image's pod in ImagePullBackOff", time.Minute, func() bool {
		out, _, _ := k.Run("", "get", "pods", "-l", "app=missing", "-o", "jsonpath={.items[*].status.containerStatuses[0].state.waiting.reason}")
		return out == "ImagePullBackOff"
	})
}
