package proxy_test

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"testing"
)

// TestMain checks that the tests left the host's own netfilter as they
// found it: everything they program must be inside their namespaces.
// It only reads the host's state.
func TestMain(m *testing.M) {
	before := hostNetfilter()
	code := m.Run()
	if after := hostNetfilter(); after != before {
		fmt.Fprintf(os.Stderr, "FAIL: the host namespace's netfilter changed during the tests\nbefore:\n%s\nafter:\n%s\n", before, after)
		code = 1
	}
	os.Exit(code)
}

var counters = regexp.MustCompile(`\[\d+:\d+\]|counter packets \d+ bytes \d+|(?m)^#.*$`)

func hostNetfilter() string {
	if os.Geteuid() != 0 {
		return ""
	}
	var out []byte
	for _, cmd := range [][]string{{"iptables-save"}, {"ip6tables-save"}, {"nft", "list", "ruleset"}} {
		b, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
		if err != nil {
			b = append(b, []byte(err.Error())...)
		}
		out = append(out, b...)
	}
	// Legacy tables show up here once anything instantiates them.
	names, _ := os.ReadFile("/proc/net/ip_tables_names")
	out = append(out, names...)
	return counters.ReplaceAllString(string(out), "")
}
