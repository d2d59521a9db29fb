package framework

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// KubectlVersions are the kubectl releases the end-to-end tests drive:
// the oldest and the newest that the machines carry.
var KubectlVersions = []string{"1.27", "1.33"}

// KubectlPath finds kubectl.<version> next to the installed kubectl (the
// google-cloud-cli package keeps several releases there).
func KubectlPath(t testing.TB, version string) string {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is not installed; `make test` checks for it: %v", err)
	}
	real, err := filepath.EvalSymlinks(kubectl)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(filepath.Dir(real), "kubectl."+version)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("kubectl %s not found at %s (google-cloud-cli's kubectl package ships it)", version, p)
	}
	return p
}

// Kubectl runs one kubectl version against a kubeconfig.
type Kubectl struct {
	t          testing.TB
	Path       string
	Kubeconfig string
	Env        []string
}

// NewKubectl returns kubectl <version> for kubeconfig.
func NewKubectl(t testing.TB, version, kubeconfig string) *Kubectl {
	return &Kubectl{t: t, Path: KubectlPath(t, version), Kubeconfig: kubeconfig}
}

// For returns a copy that fails t, for use inside a subtest: a failure
// must stop the goroutine of the test it belongs to.
func (k *Kubectl) For(t testing.TB) *Kubectl {
	c := *k
	c.t = t
	return &c
}

func (k *Kubectl) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, k.Path, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+k.Kubeconfig, "HOME="+k.t.TempDir())
	cmd.Env = append(cmd.Env, k.Env...)
	return cmd
}

// Run runs kubectl with stdin and returns stdout, stderr and the error.
func (k *Kubectl) Run(stdin string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := k.command(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// MustRun runs kubectl and fails the test when it fails.
func (k *Kubectl) MustRun(stdin string, args ...string) string {
	k.t.Helper()
	out, errOut, err := k.Run(stdin, args...)
	if err != nil {
		k.t.Fatalf("kubectl %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// MustFail runs kubectl, expects it to fail, and returns its stderr.
func (k *Kubectl) MustFail(stdin string, args ...string) string {
	k.t.Helper()
	out, errOut, err := k.Run(stdin, args...)
	if err == nil {
		k.t.Fatalf("kubectl %s succeeded, want failure\nstdout: %s", strings.Join(args, " "), out)
	}
	return errOut
}

// Watch starts `kubectl get <args> -w --output-watch-events` and gives
// the watch a second to be established. stop gives it a second more to
// print the last events, ends it and returns what it printed.
func (k *Kubectl) Watch(args ...string) (stop func() string) {
	k.t.Helper()
	cmd := k.command(context.Background(), append(append([]string{"get"}, args...), "-w", "--output-watch-events")...)
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	time.Sleep(time.Second)
	return func() string {
		time.Sleep(time.Second)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return out.String()
	}
}
