package iptables

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// JumpRule links a built-in chain to one of ours. These rules live in
// chains we do not own, so they cannot be part of a --noflush restore
// (declaring PREROUTING would not flush it, and appending would duplicate
// the rule on every sync); they are ensured one by one, on full syncs.
type JumpRule struct {
	Table   string
	Chain   string // built-in chain, e.g. PREROUTING
	Target  string // our chain
	Extra   []string
	Comment string
}

// Args returns the rule's arguments as one passes them to iptables -C/-I.
func (j JumpRule) Args() []string {
	args := append([]string{}, j.Extra...)
	if j.Comment != "" {
		args = append(args, "-m", "comment", "--comment", j.Comment)
	}
	return append(args, "-j", j.Target)
}

// Owned is what one writer keeps in a namespace's iptables: jump rules in
// built-in chains, and chains of its own, by table.
type Owned struct {
	Jumps []JumpRule
	// Chains says, by table, which chains are the writer's.
	Chains map[string]func(chain string) bool
}

func (o *Owned) hasJump(j JumpRule) bool {
	return o != nil && slices.ContainsFunc(o.Jumps, func(k JumpRule) bool {
		return k.Table == j.Table && k.Chain == j.Chain && slices.Equal(k.Args(), j.Args())
	})
}

func (o *Owned) hasChain(table, chain string) bool {
	if o == nil || o.Chains[table] == nil {
		return false
	}
	return o.Chains[table](chain)
}

// Remove deletes what o owns, its jumps first, except what keep owns too.
// kube-proxy's iptables and ipvs modes share chain names and some jumps
// (KUBE-SERVICES, KUBE-POSTROUTING, KUBE-FORWARD …): the mode that runs
// removes the other's leftovers with its own as keep, once its rules have
// replaced the shared chains' contents, so that traffic never meets a
// missing jump or an emptied chain.
func Remove(ctx context.Context, ex Executor, o, keep *Owned) error {
	var failed []error
	for _, j := range o.Jumps {
		if keep.hasJump(j) {
			continue
		}
		if err := ex.DeleteRule(ctx, j.Table, j.Chain, j.Args()...); err != nil {
			failed = append(failed, err)
		}
	}
	tables := slices.Sorted(maps.Keys(o.Chains))
	for _, table := range tables {
		owned := func(c string) bool { return o.Chains[table](c) && !keep.hasChain(table, c) }
		if err := DeleteChains(ctx, ex, table, owned); err != nil {
			failed = append(failed, err)
		}
	}
	return errors.Join(failed...)
}

// DeleteChains flushes and deletes, in one restore, the chains of table
// that owned says are ours. Rules elsewhere that jump to them must be gone
// already.
func DeleteChains(ctx context.Context, ex Executor, table string, owned func(string) bool) error {
	data, err := ex.Save(ctx, table)
	if err != nil {
		return fmt.Errorf("list %s chains: %w", table, err)
	}
	var chains []string
	for _, c := range ChainsIn(data) {
		if owned(c) {
			chains = append(chains, c)
		}
	}
	if len(chains) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("*" + table + "\n")
	for _, c := range chains {
		b.WriteString(":" + c + " - [0:0]\n")
	}
	for _, c := range chains {
		b.WriteString("-X " + c + "\n")
	}
	b.WriteString("COMMIT\n")
	if err := ex.Restore(ctx, []byte(b.String())); err != nil {
		return fmt.Errorf("delete %d %s chains: %w", len(chains), table, err)
	}
	return nil
}

// chainsIn lists the chains declared in iptables-save output.
func ChainsIn(save []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(save))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l := sc.Bytes(); len(l) > 1 && l[0] == ':' {
			name, _, _ := strings.Cut(string(l[1:]), " ")
			out = append(out, name)
		}
	}
	return out
}
