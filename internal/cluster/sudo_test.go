package cluster

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestKubeconfigForInvoker: under sudo the user who ran svcnet up gets the
// admin kubeconfig in ~/.kube, theirs and theirs only.
func TestKubeconfigForInvoker(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (to give the file away); make test runs as root")
	}
	st := State{Dir: t.TempDir()}
	if err := os.WriteFile(st.Kubeconfig(), []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if err := os.Chown(home, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	inv := &invoker{home: home, uid: 65534, gid: 65534}
	path, err := copyKubeconfigForInvoker(st, "demo", inv)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(home, ".kube", "svcnet-demo.kubeconfig") || path != UserKubeconfigCopy(home, "demo") {
		t.Fatalf("copied to %s", path)
	}
	for _, p := range []string{path, filepath.Dir(path)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 65534 || st.Gid != 65534 || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: owner %d:%d mode %v, want the user's alone", p, st.Uid, st.Gid, fi.Mode())
		}
	}
	if none, err := copyKubeconfigForInvoker(st, "demo", nil); err != nil || none != "" {
		t.Errorf("without sudo: %q %v", none, err)
	}
}
