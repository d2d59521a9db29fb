package iptables

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns/netnstest"
)

func TestTokenizeJoin(t *testing.T) {
	for _, l := range []string{
		`-A X -m comment --comment "a b" -j Y`,
		`-A X -m comment --comment "say \"hi\"" -j Y`,
		`-A X -m comment --comment "" -j Y`,
		"-A X\t-j Y",
	} {
		w, err := Tokenize(l)
		if err != nil {
			t.Fatal(err)
		}
		if got := Join(w); got != strings.ReplaceAll(l, "\t", " ") {
			t.Errorf("round trip %q -> %q", l, got)
		}
	}
	if _, err := Tokenize(`-A X "open`); err == nil {
		t.Error("unterminated quote accepted")
	}
}

// TestExec drives the real iptables in a network namespace of its own:
// chains and rules ensured once however often asked, rules deleted
// however often present, restores atomic with the failing line shown,
// the backend named, and save listing what was made.
func TestExec(t *testing.T) {
	ns := netnstest.New(t, "ipt")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := &Exec{Binary: "iptables", Netns: ns}

	if b, err := e.Backend(ctx); err != nil || (b != BackendNFT && b != BackendLegacy) {
		t.Fatalf("backend %q, %v", b, err)
	}
	for range 2 {
		if err := e.EnsureChain(ctx, "nat", "SVCNET-TEST"); err != nil {
			t.Fatal(err)
		}
		if err := e.EnsureRule(ctx, "nat", "OUTPUT", "-m", "comment", "--comment", "svcnet test", "-j", "SVCNET-TEST"); err != nil {
			t.Fatal(err)
		}
	}
	save, err := e.Save(ctx, "nat")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(save), "-j SVCNET-TEST"); n != 1 || !slices.Contains(ChainsIn(save), "SVCNET-TEST") {
		t.Fatalf("want one jump and the chain, got %d in:\n%s", n, save)
	}
	if ok, err := e.ChainExists(ctx, "nat", "SVCNET-TEST"); !ok || err != nil {
		t.Errorf("ChainExists = %v, %v", ok, err)
	}
	if ok, err := e.ChainExists(ctx, "nat", "SVCNET-NONE"); ok || err != nil {
		t.Errorf("ChainExists(missing) = %v, %v", ok, err)
	}

	// A restore with a bad line changes nothing and says which line.
	bad := "*nat\n:SVCNET-TEST - [0:0]\n-A SVCNET-TEST -j RETURN\n-A SVCNET-TEST -j NO-SUCH-CHAIN\nCOMMIT\n"
	err = e.Restore(ctx, []byte(bad))
	var ee *ExecError
	if !errors.As(err, &ee) || !strings.Contains(ee.Context, "4: -A SVCNET-TEST -j NO-SUCH-CHAIN") || !strings.Contains(ee.Context, "> ") {
		t.Errorf("bad restore: %v", err)
	}
	if save, _ := e.Save(ctx, "nat"); strings.Contains(string(save), "-A SVCNET-TEST -j RETURN") {
		t.Error("a failed restore applied part of its input")
	}

	// Rules go however often present, and a missing rule is no error.
	if err := e.Restore(ctx, []byte("*nat\n:SVCNET-TEST - [0:0]\nCOMMIT\n*nat\n-I OUTPUT -j SVCNET-TEST\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := e.DeleteRule(ctx, "nat", "OUTPUT", "-m", "comment", "--comment", "svcnet test", "-j", "SVCNET-TEST"); err != nil {
			t.Fatal(err)
		}
		if err := e.DeleteRule(ctx, "nat", "OUTPUT", "-j", "SVCNET-TEST"); err != nil {
			t.Fatal(err)
		}
	}
	if err := DeleteChains(ctx, e, "nat", func(c string) bool { return strings.HasPrefix(c, "SVCNET-") }); err != nil {
		t.Fatal(err)
	}
	if save, _ := e.Save(ctx, "nat"); strings.Contains(string(save), "SVCNET-TEST") {
		t.Errorf("left after delete:\n%s", save)
	}
}
