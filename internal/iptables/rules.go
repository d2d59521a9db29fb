package iptables

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
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
