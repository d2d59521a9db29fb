// Command report writes docs/gateway-conformance.md from a run of the
// Gateway API's conformance suite: its ConformanceReport, each test's
// result from the run's log, and the reports other implementations
// published in the suite's module (conformance/reports), beside ours.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	reportPath := flag.String("report", "", "the run's ConformanceReport YAML")
	logPath := flag.String("log", "", "the run's go test -v output")
	command := flag.String("command", "", "how the run was made, for the page")
	others := flag.String("others", "v1.5", "the directory of conformance/reports whose reports go beside ours")
	flag.Parse()
	if err := run(os.Stdout, *reportPath, *logPath, *command, *others); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, reportPath, logPath, command, others string) error {
	ours, err := readReport(reportPath)
	if err != nil {
		return err
	}
	tests, err := readLog(logPath)
	if err != nil {
		return err
	}
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api/conformance").Output()
	if err != nil {
		return fmt.Errorf("finding the suite's module: %w", err)
	}
	theirs, err := readOthers(filepath.Join(strings.TrimSpace(string(dir)), "reports", others))
	if err != nil {
		return err
	}
	write(w, ours, tests, theirs, command, others)
	return nil
}

func readReport(path string) (*confv1.ConformanceReport, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r confv1.ConformanceReport
	if err := yaml.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// result is one test of the suite as the log tells it.
type result struct {
	name, outcome, took string
}

var testLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): TestConformance/([A-Za-z0-9]+) \(([0-9.]+s)\)`)

func readLog(path string) ([]result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []result
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := testLine.FindStringSubmatch(sc.Text()); m != nil {
			out = append(out, result{name: m[2], outcome: m[1], took: m[3]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, sc.Err()
}

// readOthers reads the newest report of each implementation under dir.
func readOthers(dir string) ([]*confv1.ConformanceReport, error) {
	impls, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []*confv1.ConformanceReport
	for _, impl := range impls {
		if !impl.IsDir() {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(dir, impl.Name(), "*.yaml"))
		var best *confv1.ConformanceReport
		for _, f := range files {
			r, err := readReport(f)
			if err != nil || httpProfile(r) == nil {
				continue
			}
			if best == nil || extendedPassed(r) > extendedPassed(best) {
				best = r
			}
		}
		if best != nil {
			out = append(out, best)
		}
	}
	slices.SortFunc(out, func(a, b *confv1.ConformanceReport) int { return extendedPassed(b) - extendedPassed(a) })
	return out, nil
}

func httpProfile(r *confv1.ConformanceReport) *confv1.ProfileReport {
	for i := range r.ProfileReports {
		if r.ProfileReports[i].Name == "GATEWAY-HTTP" {
			return &r.ProfileReports[i]
		}
	}
	return nil
}

func extendedPassed(r *confv1.ConformanceReport) int {
	p := httpProfile(r)
	if p == nil || p.Extended == nil {
		return 0
	}
	return int(p.Extended.Statistics.Passed)
}

func write(w io.Writer, ours *confv1.ConformanceReport, tests []result, theirs []*confv1.ConformanceReport, command, others string) {
	fmt.Fprintf(w, "# Gateway API conformance\n\n")
	fmt.Fprintf(w, "svcnet against the Gateway API's own conformance suite (`sigs.k8s.io/gateway-api/conformance` %s), written by `make gateway-conformance` on %s:\n\n    %s\n\n",
		ours.GatewayAPIVersion, ours.Date, command)
	fmt.Fprintf(w, "The suite ran in the cluster's outside client and tested the features the GatewayClass `svcnet` lists in `status.supportedFeatures`.\n\n")
	fmt.Fprintf(w, "## Profiles\n\n| profile | core | core passed / failed / skipped | extended | extended passed / failed / skipped | extended features |\n|---|---|---|---|---|---|\n")
	for _, p := range ours.ProfileReports {
		ext, extStats, feats := "—", "—", "—"
		if p.Extended != nil {
			ext = string(p.Extended.Result)
			extStats = stats(p.Extended.Statistics)
			feats = fmt.Sprint(len(p.Extended.SupportedFeatures))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", p.Name, p.Core.Result, stats(p.Core.Statistics), ext, extStats, feats)
	}
	for _, p := range ours.ProfileReports {
		if len(p.Core.FailedTests) > 0 {
			fmt.Fprintf(w, "\n%s core tests failed: %s\n", p.Name, strings.Join(p.Core.FailedTests, ", "))
		}
		if len(p.Core.SkippedTests) > 0 {
			fmt.Fprintf(w, "\n%s core tests skipped: %s\n", p.Name, strings.Join(p.Core.SkippedTests, ", "))
		}
	}
	fmt.Fprintf(w, "\n## Beside the published reports (%s)\n\nEach implementation's report of the suite's `conformance/reports/%s` with the most extended GATEWAY-HTTP tests passed, and ours:\n\n", others, others)
	fmt.Fprintf(w, "| implementation | version | GATEWAY-HTTP core passed | extended passed | extended skipped | extended features |\n|---|---|---|---|---|---|\n")
	row := func(r *confv1.ConformanceReport, bold bool) {
		p := httpProfile(r)
		if p == nil {
			return
		}
		name := r.Implementation.Organization + "/" + r.Implementation.Project
		if bold {
			name = "**" + name + "**"
		}
		extPassed, extSkipped, feats := 0, 0, 0
		if p.Extended != nil {
			extPassed, extSkipped, feats = int(p.Extended.Statistics.Passed), int(p.Extended.Statistics.Skipped), len(p.Extended.SupportedFeatures)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d |\n", name, r.Implementation.Version, p.Core.Statistics.Passed, extPassed, extSkipped, feats)
	}
	row(ours, true)
	for _, r := range theirs {
		row(r, false)
	}
	fmt.Fprintf(w, "\n## Every test of the run\n\n| test | result | time |\n|---|---|---|\n")
	for _, t := range tests {
		fmt.Fprintf(w, "| %s | %s | %s |\n", t.name, t.outcome, t.took)
	}
}

func stats(s confv1.Statistics) string {
	return fmt.Sprintf("%d / %d / %d", s.Passed, s.Failed, s.Skipped)
}
