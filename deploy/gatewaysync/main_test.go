package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommittedCopies: deploy/gateway-api holds exactly the standard
// channel of the module version go.mod requires, byte for byte.
func TestCommittedCopies(t *testing.T) {
	dir, err := moduleDir()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := diff(filepath.Join(dir, standardDir), "../gateway-api")
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("deploy/gateway-api is not %s's %s; run go generate ./deploy:\n  %s", filepath.Base(dir), standardDir, strings.Join(problems, "\n  "))
	}
}

// TestDiff: a changed, a missing and an extra file are each found, a
// file of the module that holds more than CRDs is not copied, and sync
// makes them equal.
func TestDiff(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	write := func(dir, name, s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	crd := "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec:\n  names:\n    kind: A\n"
	write(src, "a.yaml", crd)
	write(src, "b.yaml", crd+"---\n"+crd)
	write(src, "policy.yaml", crd+"---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n")
	write(src, "kustomization.txt", "not yaml\n")
	write(dst, "a.yaml", crd+"# changed\n")
	write(dst, "old.yaml", crd)
	write(dst, "policy.yaml", crd)
	got, err := diff(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	want := "old.yaml: not a CRD file of the module,policy.yaml: not a CRD file of the module,a.yaml: differs,b.yaml: missing"
	if strings.Join(got, ",") != want {
		t.Errorf("diff = %q, want %q", got, want)
	}
	if err := sync(src, dst); err != nil {
		t.Fatal(err)
	}
	if got, err := diff(src, dst); err != nil || len(got) > 0 {
		t.Errorf("after sync: diff = %q, %v", got, err)
	}
}
