package images

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLookup(t *testing.T) {
	for _, tc := range []struct{ ref, want string }{
		{"svcnet/echo", "svcnet/echo"},
		{"docker.io/svcnet/echo:1.0", "svcnet/echo"},
		{"registry.k8s.io/pause:3.10.2", "pause"},
		{"registry.k8s.io/pause@sha256:abc", "pause"},
		{"busybox", "busybox"},
		{"docker.io/library/busybox:1.36", "busybox"},
		{"registry.k8s.io/e2e-test-images/busybox:1.37.0-1", "busybox"},
		{"host", "host"},
		{"nginx", "nginx"},
		{"registry.k8s.io/e2e-test-images/agnhost:2.66.1", "agnhost"},
		{"registry.k8s.io/e2e-test-images/jessie-dnsutils:1.7", "dnsutils"},
		{"registry.k8s.io/e2e-test-images/nginx:1.27.0-2", "nginx"},
		{"nginx:1.27", "nginx"},
		{"registry.k8s.io/gateway-api/echo-basic:v1.5.1", "echo-basic"},
		{"registry.k8s.io/gateway-api/echo-basic:v1.6.0-dev.3", "echo-basic"},
		{"registry.k8s.io/gateway-api/echo-advanced:v1.5.1", ""},
		{"registry.k8s.io/coredns/coredns:v1.12.2", "coredns"},
		{"coredns/coredns:1.11.1", "coredns"},
		{"docker.io/coredns/coredns@sha256:abc", "coredns"},
		{"registry.k8s.io/coredns:1.6.7", ""},
		{"httpd", ""},
	} {
		img, ok := Lookup(tc.ref)
		if got := map[bool]string{true: img.Name, false: ""}[ok]; got != tc.want {
			t.Errorf("Lookup(%q) = %q, want %q", tc.ref, got, tc.want)
		}
	}
}

func TestBusyboxArgv(t *testing.T) {
	for _, tc := range []struct {
		command, args []string
		want          string
	}{
		{nil, nil, "sh"},
		{[]string{"/bin/sh", "-c", "echo hi"}, nil, "sh -c echo hi"},
		{nil, []string{"sleep", "10"}, "sleep 10"},
		{[]string{"wget"}, []string{"-q", "-O-", "x"}, "wget -q -O- x"},
	} {
		argv, err := busyboxArgv(tc.command, tc.args)
		if err != nil {
			t.Fatalf("no busybox on this machine (make test installs busybox-static): %v", err)
		}
		if !strings.HasSuffix(argv[0], "busybox") || strings.Join(argv[1:], " ") != tc.want {
			t.Errorf("busyboxArgv(%q, %q) = %q", tc.command, tc.args, argv)
		}
	}
}

func TestByProgram(t *testing.T) {
	if img, ok := ByProgram("agnhost"); !ok || img.Name != "agnhost" || img.Run == nil {
		t.Errorf("ByProgram(agnhost) = %q, %v", img.Name, ok)
	}
	for _, name := range []string{"svcnet", "busybox", "sh", ""} {
		if img, ok := ByProgram(name); ok {
			t.Errorf("ByProgram(%q) = %q: svcnet started as %s must stay svcnet", name, img.Name, name)
		}
	}
}

// TestNginx: the nginx stand-in answers / with nginx's welcome page and
// other paths with 404.
func TestNginx(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	done := make(chan error, 1)
	go func() { done <- runNginx(ctx, []string{"-g", "daemon off;", "--port", strconv.Itoa(port)}) }()
	get := func(path string) (int, string) {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
			if err == nil {
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(body)
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
		}
	}
	if code, body := get("/"); code != 200 || !strings.Contains(body, "Welcome to nginx!") {
		t.Errorf("GET / = %d %q", code, body)
	}
	if code, _ := get("/nope"); code != 404 {
		t.Errorf("GET /nope = %d, want 404", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("stop: %v", err)
	}
}
