// Package iptablestest is the in-memory iptables that tests use in place
// of the kernel, for every package that writes rules.
package iptablestest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/svcnet/svcnet/internal/iptables"
)

// Fake is an in-memory iptables for tests: it applies restore input with
// --noflush semantics, checks what the kernel would check (chains exist,
// jump targets exist, deleted chains are unreferenced), and prints
// iptables-save output that the tracer reads. Restores are atomic.
type Fake struct {
	mu     sync.Mutex
	tables map[string]*fakeTable

	// Restores holds every restore input applied or attempted.
	Restores [][]byte
	// FailRestore, if set, is consulted before each restore; an error
	// fails it without changing anything.
	FailRestore func(data []byte) error
}

type fakeTable struct {
	chains map[string]*fakeChain
}

type fakeChain struct {
	builtin bool
	policy  string
	rules   [][]string // tokens after "-A CHAIN"
}

var builtinChains = map[string][]string{
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"mangle": {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
}

var builtinTargets = map[string]bool{
	"ACCEPT": true, "DROP": true, "REJECT": true, "RETURN": true, "DNAT": true, "SNAT": true,
	"MASQUERADE": true, "MARK": true, "LOG": true, "REDIRECT": true, "CONNMARK": true,
}

// RestoreCount is the number of restores applied or attempted so far.
func (f *Fake) RestoreCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.Restores)
}

// NewFake returns a Fake with empty built-in chains.
func NewFake() *Fake {
	f := &Fake{tables: map[string]*fakeTable{}}
	for t, chains := range builtinChains {
		ft := &fakeTable{chains: map[string]*fakeChain{}}
		for _, c := range chains {
			ft.chains[c] = &fakeChain{builtin: true, policy: "ACCEPT"}
		}
		f.tables[t] = ft
	}
	return f
}

func (t *fakeTable) clone() *fakeTable {
	c := &fakeTable{chains: make(map[string]*fakeChain, len(t.chains))}
	for n, ch := range t.chains {
		cc := *ch
		cc.rules = slices.Clone(ch.rules)
		c.chains[n] = &cc
	}
	return c
}

// Restore implements iptables.Executor.
func (f *Fake) Restore(_ context.Context, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Restores = append(f.Restores, slices.Clone(data))
	if f.FailRestore != nil {
		if err := f.FailRestore(data); err != nil {
			return err
		}
	}
	staged := map[string]*fakeTable{}
	var cur *fakeTable
	var curName string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	n := 0
	fail := func(format string, args ...any) error {
		return fmt.Errorf("iptables-restore: line %d failed: %s", n, fmt.Sprintf(format, args...))
	}
	for sc.Scan() {
		n++
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
			continue
		case strings.HasPrefix(l, "*"):
			curName = l[1:]
			t, ok := f.tables[curName]
			if !ok {
				return fail("unknown table %q", curName)
			}
			cur = t.clone()
			continue
		case cur == nil:
			return fail("no table")
		case l == "COMMIT":
			if err := cur.checkTargets(); err != nil {
				return fail("%v", err)
			}
			staged[curName] = cur
			cur = nil
			continue
		case strings.HasPrefix(l, ":"):
			fields := strings.Fields(l[1:])
			name := fields[0]
			if c, ok := cur.chains[name]; ok {
				if c.builtin {
					if len(fields) > 1 {
						c.policy = fields[1]
					}
				} else {
					c.rules = nil // --noflush flushes declared user chains
				}
			} else {
				cur.chains[name] = &fakeChain{}
			}
			continue
		}
		words, err := iptables.Tokenize(l)
		if err != nil {
			return fail("%v", err)
		}
		if err := cur.apply(words); err != nil {
			return fail("%v", err)
		}
	}
	if cur != nil {
		return fmt.Errorf("iptables-restore: table %s without COMMIT", curName)
	}
	for name, t := range staged {
		f.tables[name] = t
	}
	return nil
}

// apply runs one command line of restore input, or an iptables command.
func (t *fakeTable) apply(words []string) error {
	if len(words) < 2 {
		return fmt.Errorf("bad command %q", strings.Join(words, " "))
	}
	op, name, args := words[0], words[1], words[2:]
	c, exists := t.chains[name]
	if !exists && op != "-N" {
		return fmt.Errorf("chain %s does not exist", name)
	}
	switch op {
	case "-A":
		c.rules = append(c.rules, args)
	case "-I":
		pos := 0
		if len(args) > 0 {
			if i, err := strconv.Atoi(args[0]); err == nil {
				pos, args = i-1, args[1:]
			}
		}
		if pos < 0 || pos > len(c.rules) {
			return fmt.Errorf("index of insertion too big")
		}
		c.rules = slices.Insert(c.rules, pos, args)
	case "-D":
		i := slices.IndexFunc(c.rules, func(r []string) bool { return slices.Equal(r, args) })
		if i < 0 {
			return fmt.Errorf("bad rule (does a matching rule exist in that chain?)")
		}
		c.rules = slices.Delete(c.rules, i, i+1)
	case "-F":
		c.rules = nil
	case "-N":
		if exists {
			return fmt.Errorf("chain %s already exists", name)
		}
		t.chains[name] = &fakeChain{}
	case "-X":
		if c.builtin {
			return fmt.Errorf("cannot delete built-in chain %s", name)
		}
		if len(c.rules) > 0 {
			return fmt.Errorf("chain %s is not empty", name)
		}
		for other, oc := range t.chains {
			for _, r := range oc.rules {
				if target(r) == name {
					return fmt.Errorf("chain %s is referenced by %s", name, other)
				}
			}
		}
		delete(t.chains, name)
	default:
		return fmt.Errorf("unsupported command %s", op)
	}
	return nil
}

func (t *fakeTable) checkTargets() error {
	for name, c := range t.chains {
		for _, r := range c.rules {
			if tg := target(r); tg != "" && !builtinTargets[tg] {
				if _, ok := t.chains[tg]; !ok {
					return fmt.Errorf("chain %s: jump to missing chain %s", name, tg)
				}
			}
		}
	}
	return nil
}

// target returns the -j or -g argument of a rule.
func target(rule []string) string {
	for i := 0; i+1 < len(rule); i++ {
		if rule[i] == "-j" || rule[i] == "-g" || rule[i] == "--jump" || rule[i] == "--goto" {
			return rule[i+1]
		}
	}
	return ""
}

// Save implements iptables.Executor, printing chains as iptables-save does:
// built-in chains first, then ours by name.
func (f *Fake) Save(_ context.Context, table string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tables[table]
	if !ok {
		return nil, fmt.Errorf("iptables-save: unknown table %q", table)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%s\n", table)
	names := t.chainNames(table)
	for _, n := range names {
		c := t.chains[n]
		if c.builtin {
			fmt.Fprintf(&b, ":%s %s [0:0]\n", n, c.policy)
		} else {
			fmt.Fprintf(&b, ":%s - [0:0]\n", n)
		}
	}
	for _, n := range names {
		for _, r := range t.chains[n].rules {
			fmt.Fprintf(&b, "-A %s %s\n", n, iptables.Join(r))
		}
	}
	b.WriteString("COMMIT\n")
	return b.Bytes(), nil
}

func (t *fakeTable) chainNames(table string) []string {
	names := slices.Clone(builtinChains[table])
	var user []string
	for n, c := range t.chains {
		if !c.builtin {
			user = append(user, n)
		}
	}
	slices.Sort(user)
	return append(names, user...)
}

// table is the table called name; the caller holds f.mu.
func (f *Fake) table(name string) (*fakeTable, error) {
	t, ok := f.tables[name]
	if !ok {
		return nil, fmt.Errorf("unknown table %q", name)
	}
	return t, nil
}

// EnsureChain implements iptables.Executor.
func (f *Fake) EnsureChain(_ context.Context, table, chain string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.table(table)
	if err != nil {
		return err
	}
	if _, ok := t.chains[chain]; !ok {
		t.chains[chain] = &fakeChain{}
	}
	return nil
}

// EnsureRule implements iptables.Executor.
func (f *Fake) EnsureRule(_ context.Context, table, chain string, args ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.table(table)
	if err != nil {
		return err
	}
	c, ok := t.chains[chain]
	if !ok {
		return fmt.Errorf("chain %s does not exist", chain)
	}
	if slices.ContainsFunc(c.rules, func(r []string) bool { return slices.Equal(r, args) }) {
		return nil
	}
	if tg := target(args); tg != "" && !builtinTargets[tg] {
		if _, ok := t.chains[tg]; !ok {
			return fmt.Errorf("jump to missing chain %s", tg)
		}
	}
	c.rules = slices.Insert(c.rules, 0, slices.Clone(args))
	return nil
}

// DeleteRule implements iptables.Executor.
func (f *Fake) DeleteRule(_ context.Context, table, chain string, args ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.table(table)
	if err != nil {
		return err
	}
	if c := t.chains[chain]; c != nil {
		c.rules = slices.DeleteFunc(c.rules, func(r []string) bool { return slices.Equal(r, args) })
	}
	return nil
}

// ChainExists implements iptables.Executor.
func (f *Fake) ChainExists(_ context.Context, table, chain string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.table(table)
	if err != nil {
		return false, err
	}
	_, ok := t.chains[chain]
	return ok, nil
}

// FlushAll removes every rule and user chain of a table, as a firewall
// reload does.
func (f *Fake) FlushAll(table string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for n, c := range f.tables[table].chains {
		if c.builtin {
			c.rules = nil
		} else {
			delete(f.tables[table].chains, n)
		}
	}
}

// Flush empties a chain behind the proxy's back, as an administrator or
// another program might.
func (f *Fake) Flush(table, chain string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.tables[table].chains[chain]; c != nil {
		c.rules = nil
	}
}

// Chains returns the names of a table's chains, sorted.
func (f *Fake) Chains(table string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.tables[table].chains {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
