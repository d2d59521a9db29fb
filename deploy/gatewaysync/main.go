// Command gatewaysync copies the standard channel of the Gateway API
// CRDs from the sigs.k8s.io/gateway-api module that go.mod requires into
// deploy/gateway-api, byte for byte: go:embed cannot reach into another
// module, and the CRDs must be the module's own, never retyped. Only the
// files that hold CRDs alone are copied: the channel's safe-upgrades
// ValidatingAdmissionPolicy is left out, as svcnet's API server serves
// no admissionregistration.k8s.io and `svcnet manifests` must apply to
// it. Run it after changing the module's version:
//
//	go generate ./deploy   (or: go run ./deploy/gatewaysync)
//
// Its test fails when the committed copies differ from the module's.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Module is the module the CRDs come from; its version is go.mod's.
const Module = "sigs.k8s.io/gateway-api"

// standardDir is where the module keeps the standard channel.
const standardDir = "config/crd/standard"

func main() {
	dst := "gateway-api"
	if len(os.Args) > 1 {
		dst = os.Args[1]
	} else if _, err := os.Stat("deploy.go"); err != nil {
		// Run from the repository's root rather than by go generate.
		dst = filepath.Join("deploy", dst)
	}
	src, err := moduleDir()
	if err == nil {
		err = sync(filepath.Join(src, standardDir), dst)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatewaysync:", err)
		os.Exit(1)
	}
}

// moduleDir is the module's directory in the module cache. GOPROXY=off:
// the module is there whenever this module builds, and checking it must
// work offline.
func moduleDir() (string, error) {
	cmd := exec.Command("go", "list", "-m", "-json", Module)
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %v: %s", Module, err, strings.TrimSpace(stderr.String()))
	}
	var m struct{ Version, Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("go list -m %s: %w", Module, err)
	}
	if m.Dir == "" {
		return "", fmt.Errorf("%s %s is not in the module cache (go mod download %s)", Module, m.Version, Module)
	}
	return m.Dir, nil
}

// yamlFiles lists dir's .yaml files, sorted.
func yamlFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".yaml") {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// crdFiles lists the .yaml files of dir that hold CRDs and nothing else.
func crdFiles(dir string) ([]string, error) {
	names, err := yamlFiles(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if onlyCRDs(b) {
			out = append(out, name)
		}
	}
	return out, nil
}

// onlyCRDs reports whether every top-level kind in the YAML stream is
// CustomResourceDefinition (and there is one).
func onlyCRDs(b []byte) bool {
	n := 0
	for line := range strings.Lines(string(b)) {
		if kind, ok := strings.CutPrefix(strings.TrimRight(line, " \r\n"), "kind:"); ok {
			if strings.TrimSpace(kind) != "CustomResourceDefinition" {
				return false
			}
			n++
		}
	}
	return n > 0
}

// sync makes dst's .yaml files src's CRD files: copies each and removes
// any other.
func sync(src, dst string) error {
	want, err := crdFiles(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	have, err := yamlFiles(dst)
	if err != nil {
		return err
	}
	for _, name := range have {
		if !slices.Contains(want, name) {
			if err := os.Remove(filepath.Join(dst, name)); err != nil {
				return err
			}
		}
	}
	for _, name := range want {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// diff names what differs between src's CRD files and dst's .yaml files.
func diff(src, dst string) ([]string, error) {
	want, err := crdFiles(src)
	if err != nil {
		return nil, err
	}
	have, err := yamlFiles(dst)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range have {
		if !slices.Contains(want, name) {
			out = append(out, name+": not a CRD file of the module")
		}
	}
	for _, name := range want {
		a, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(filepath.Join(dst, name))
		switch {
		case os.IsNotExist(err):
			out = append(out, name+": missing")
		case err != nil:
			return nil, err
		case !bytes.Equal(a, b):
			out = append(out, name+": differs")
		}
	}
	return out, nil
}
