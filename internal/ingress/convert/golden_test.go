package convert

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// update makes the golden tests rewrite their files (go test -update).
var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// TestGolden converts each testdata/NAME.yaml (Ingresses, and Services
// for their named ports) and compares the printed stream with
// NAME.golden; every object printed must also be one the API server
// would accept (the CRDs' schemas and CEL rules, validateObjects).
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no testdata/*.yaml (%v)", err)
	}
	crds := loadCRDs(t)
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".yaml")
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(in)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var m Manifest
			if err := m.Decode(f, in, "default"); err != nil {
				t.Fatal(err)
			}
			o := Options{Services: m.Lookup}
			// A file may ask for a Gateway namespace: # gateway-namespace: NS
			if b, _ := os.ReadFile(in); bytes.HasPrefix(b, []byte("# gateway-namespace: ")) {
				line, _, _ := strings.Cut(string(b), "\n")
				o.GatewayNamespace = strings.TrimPrefix(line, "# gateway-namespace: ")
			}
			res, err := Convert(m.Ingresses, o)
			if err != nil {
				t.Fatal(err)
			}
			checkCarried(t, m.Ingresses, res)
			var out bytes.Buffer
			if err := Write(&out, res); err != nil {
				t.Fatal(err)
			}
			validateStream(t, crds, out.Bytes())
			compareGolden(t, filepath.Join("testdata", name+".golden"), out.Bytes())
		})
	}
}

// compareGolden compares got with the file at path, or rewrites the file
// with -update.
func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from the output (go test -update rewrites it):\n%s", path, lineDiff(string(want), string(got)))
	}
}

// lineDiff lists the lines only in want (-) or only in got (+), in
// their order.
func lineDiff(want, got string) string {
	count := map[string]int{}
	for _, l := range strings.Split(got, "\n") {
		count[l]++
	}
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if count[l] > 0 {
			count[l]--
			continue
		}
		b.WriteString("- " + l + "\n")
	}
	for _, l := range strings.Split(got, "\n") {
		if count[l] > 0 {
			count[l]--
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}
