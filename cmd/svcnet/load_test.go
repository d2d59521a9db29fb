package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/svcnet/svcnet/internal/cluster"
	"github.com/svcnet/svcnet/internal/imagestore"
	"github.com/svcnet/svcnet/internal/imagestore/imagetest"
)

// savedImage is `docker save` of an image of two layers of imagetest's
// (the top one holding app/<file>) under tags.
func savedImage(t *testing.T, file string, tags ...string) (v1.Image, []byte) {
	t.Helper()
	bin := imagetest.Layer(t, imagetest.Entry{Name: "bin/", Type: tar.TypeDir, Mode: 0o755}, imagetest.File("bin/tool", "#!/bin/sh\n", 0o755))
	app := imagetest.Layer(t, imagetest.Entry{Name: "app/", Type: tar.TypeDir, Mode: 0o755}, imagetest.File("app/"+file, file+"\n", 0o644))
	img := imagetest.Image(t, v1.Config{Cmd: []string{"/app/" + file}}, nil, imagetest.LayerOf(t, bin), imagetest.LayerOf(t, app))
	tagged := map[string]v1.Image{}
	for _, tag := range tags {
		tagged[tag] = img
	}
	return img, imagetest.DockerSave(t, tagged)
}

// fakeDocker serves the two calls of Docker's Engine API that svcnet load
// makes, on a unix socket, with images; saves of an image named in broken
// end halfway. It returns the DOCKER_HOST of it.
func fakeDocker(t *testing.T, images map[string]v1.Image, broken ...string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /images/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/images/get" {
			tagged := map[string]v1.Image{}
			half := false
			for _, n := range r.URL.Query()["names"] {
				tagged[n] = images[n]
				half = half || slices.Contains(broken, n)
			}
			tarball := imagetest.DockerSave(t, tagged)
			if half {
				tarball = tarball[:len(tarball)/2]
			}
			_, _ = w.Write(tarball)
			return
		}
		n := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/images/"), "/json")
		if _, ok := images[n]; !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"message":"No such image: %s"}`, n)
			return
		}
		fmt.Fprint(w, `{}`)
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return "unix://" + sock
}

// runLoad runs `svcnet load args…` against SVCNET_HOME, stdin given.
func runLoad(t *testing.T, stdin []byte, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetIn(bytes.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append([]string{"load"}, args...))
	err = cmd.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

// TestLoadCommand runs `svcnet load` against a temporary SVCNET_HOME and
// checks the machine's image store afterwards, as a node agent reads it.
func TestLoadCommand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("svcnet load needs root; CI runs as root")
	}
	t.Setenv("SVCNET_HOME", t.TempDir())
	dir := t.TempDir()
	web, webTar := savedImage(t, "web", "web:1", "web:latest")
	api, apiTar := savedImage(t, "api", "example.test/team/api:2")
	webPath := filepath.Join(dir, "web.tar")
	if err := os.WriteFile(webPath, webTar, 0o644); err != nil {
		t.Fatal(err)
	}
	storeGet := func(ref string) (*imagestore.Image, error) {
		s, err := imagestore.Open(cluster.ImageStoreDir())
		if err != nil {
			t.Fatal(err)
		}
		return s.Get(ref)
	}
	tmpEmpty := func() {
		t.Helper()
		if left, _ := os.ReadDir(filepath.Join(cluster.ImageStoreDir(), "tmp")); len(left) != 0 {
			t.Errorf("the store's tmp/ holds %v", left)
		}
	}

	t.Run("a file and stdin", func(t *testing.T) {
		out, errOut, err := runLoad(t, apiTar, webPath, "-")
		if err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		t.Logf("stdout:\n%sstderr:\n%s", out, errOut)
		webCfg, _ := web.ConfigName()
		apiCfg, _ := api.ConfigName()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "web:1,web:latest "+webCfg.String()+" ") ||
			!strings.HasPrefix(lines[1], "example.test/team/api:2 "+apiCfg.String()+" ") {
			t.Errorf("output %q: want a line per image, its tags, config digest and size", out)
		}
		if !strings.Contains(errOut, "pods of web:latest default to imagePullPolicy Always") {
			t.Errorf("stderr %q does not warn of web:latest's pull policy", errOut)
		}
		for ref, cfg := range map[string]v1.Hash{"web:1": webCfg, "docker.io/library/web:latest": webCfg, "example.test/team/api:2": apiCfg} {
			img, err := storeGet(ref)
			if err != nil {
				t.Errorf("the store lacks %s: %v", ref, err)
				continue
			}
			if img.ConfigDigest != cfg.String() || !strings.HasSuffix(img.ID, "@"+cfg.String()) || len(img.Layers) != 2 {
				t.Errorf("%s: %+v", ref, img)
			}
		}
		tmpEmpty()
	})

	t.Run("the Docker daemon's images", func(t *testing.T) {
		built, _ := savedImage(t, "built", "built:1")
		t.Setenv("DOCKER_HOST", fakeDocker(t, map[string]v1.Image{"built:1": built}))
		out, errOut, err := runLoad(t, nil, "built:1")
		if err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		cfg, _ := built.ConfigName()
		if !strings.HasPrefix(out, "built:1 "+cfg.String()+" ") || !strings.Contains(errOut, "the Docker daemon's built:1: 1 image(s)") {
			t.Errorf("stdout %q, stderr %q: want the daemon's image loaded", out, errOut)
		}
		if img, err := storeGet("built:1"); err != nil || img.ConfigDigest != cfg.String() {
			t.Errorf("the store's built:1: %+v %v", img, err)
		}
		tmpEmpty()
	})

	t.Run("refused", func(t *testing.T) {
		// The config, same length: the tar stays whole.
		tampered := bytes.Replace(apiTar, []byte(`"/app/api"`), []byte(`"/app/API"`), 1)
		if bytes.Equal(tampered, apiTar) {
			t.Fatal("the archive has no config to tamper with")
		}
		_, otherTar := savedImage(t, "other", "other:1")
		lacking := fakeDocker(t, map[string]v1.Image{"other:1": web, "broken:1": web}, "broken:1")
		noDaemon := "unix://" + filepath.Join(t.TempDir(), "docker.sock")
		for _, tc := range []struct {
			name   string
			docker string // DOCKER_HOST
			stdin  []byte
			args   []string
			says   string
		}{
			{"an image, no daemon", noDaemon, nil, []string{"web:2"}, "docker save -o image.tar web:2"},
			{"an image the daemon lacks", lacking, nil, []string{"web:2"}, "nor an image of the Docker daemon"},
			{"a daemon that fails halfway", lacking, nil, []string{"broken:1"}, "truncated"},
			{"a daemon that wants TLS", "tcp://127.0.0.1:2376", nil, []string{"web:2"}, "DOCKER_TLS_VERIFY"},
			{"neither a file nor a name", noDaemon, nil, []string{"Web Site"}, "nor an image name"},
			{"not a tar", noDaemon, []byte("hello\n"), []string{"-"}, "not a tar archive"},
			{"truncated", noDaemon, otherTar[:len(otherTar)/2], []string{"-"}, "truncated"},
			{"tampered", noDaemon, tampered, []string{"-"}, "digest mismatch"},
			{"--tag for two archives", noDaemon, nil, []string{"--tag", "x:1", webPath, webPath}, "one archive"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Setenv("DOCKER_HOST", tc.docker)
				if strings.HasPrefix(tc.docker, "tcp:") {
					t.Setenv("DOCKER_TLS_VERIFY", "1")
				}
				_, _, err := runLoad(t, tc.stdin, tc.args...)
				if err == nil || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("got %v, want an error saying %q", err, tc.says)
				}
				t.Log(err)
				tmpEmpty()
			})
		}
		if _, err := storeGet("other:1"); !errors.Is(err, imagestore.ErrNotPresent) {
			t.Errorf("the truncated archive's image: %v", err)
		}
	})
}
