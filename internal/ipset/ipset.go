// Package ipset is svcnet's one library for the kernel's IP sets, through
// the ipset tool (Debian package ipset) and its restore format: the ipvs
// mode's sets (KUBE-CLUSTER-IP, KUBE-NODE-PORT-TCP …) are written with it,
// each replaced atomically (filled under a temporary name, then swapped).
package ipset

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// Set is one IP set and the entries it should hold.
type Set struct {
	Name string
	// Type is ipset's: "hash:ip,port", "hash:ip,port,ip", "hash:ip,port,net",
	// "bitmap:port" …
	Type string
	// Family is "inet" or "inet6"; empty for bitmap:port, which has none.
	Family  string
	Comment string
	Entries []string
}

// Runner runs the ipset tool, in a named network namespace or the
// caller's.
type Runner struct {
	// Binary is "ipset" unless set.
	Binary string
	// Netns, if set, runs ipset in that namespace (ip netns exec).
	Netns string
}

func (r *Runner) command(ctx context.Context, args ...string) *exec.Cmd {
	bin := r.Binary
	if bin == "" {
		bin = "ipset"
	}
	if r.Netns != "" {
		return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", r.Netns, bin}, args...)...)
	}
	return exec.CommandContext(ctx, bin, args...)
}

// Restore writes the sets in one ipset restore: each set is created if
// missing and its content replaced at once (a swap), so a packet never
// meets a half-written set. On an error, the sets before the failing one
// have their new contents and the others their old.
func (r *Runner) Restore(ctx context.Context, sets []Set) error {
	if len(sets) == 0 {
		return nil
	}
	var b bytes.Buffer
	for _, s := range sets {
		create := func(name string) {
			fmt.Fprintf(&b, "create %s %s", name, s.Type)
			if s.Family != "" {
				fmt.Fprintf(&b, " family %s", s.Family)
			}
			if s.Type == "bitmap:port" {
				b.WriteString(" range 0-65535")
			}
			b.WriteString(" comment -exist\n")
		}
		tmp := tempName(s.Name)
		create(s.Name)
		create(tmp)
		fmt.Fprintf(&b, "flush %s\n", tmp)
		for _, e := range s.Entries {
			writeAdd(&b, tmp, e, s.Comment)
		}
		fmt.Fprintf(&b, "swap %s %s\ndestroy %s\n", tmp, s.Name, tmp)
	}
	if err := r.restore(ctx, &b, "restore"); err != nil {
		// ipset applies a restore line by line: the sets before the bad
		// line were swapped in (whole), the failing one was not, and its
		// temporary set is left over.
		var tmps []string
		for _, s := range sets {
			tmps = append(tmps, tempName(s.Name))
		}
		_ = r.Destroy(ctx, tmps...)
		return err
	}
	return nil
}

// Delta is what changes in one existing set.
type Delta struct {
	Name    string
	Comment string
	Add     []string
	Del     []string
}

// Update adds and deletes entries of existing sets in one ipset restore,
// leaving the rest of each set alone: a change of one Service costs the
// same in a set of ten entries as in one of ten thousand. A missing set
// is an error (Restore creates sets).
func (r *Runner) Update(ctx context.Context, ds []Delta) error {
	var b bytes.Buffer
	for _, d := range ds {
		for _, e := range d.Del {
			fmt.Fprintf(&b, "del %s %s -exist\n", d.Name, e)
		}
		for _, e := range d.Add {
			writeAdd(&b, d.Name, e, d.Comment)
		}
	}
	return r.restore(ctx, &b, "restore")
}

// writeAdd writes the restore line that adds entry to set, with comment
// unless it is empty.
func writeAdd(b *bytes.Buffer, set, entry, comment string) {
	fmt.Fprintf(b, "add %s %s", set, entry)
	if comment != "" {
		fmt.Fprintf(b, " comment %q", comment)
	}
	b.WriteString(" -exist\n")
}

// tempName is the name a set is filled under before the swap (at most
// 31 characters, ipset's limit).
func tempName(name string) string {
	t := name + "-TMP"
	if len(t) > 31 {
		t = name[:27] + "-TMP"
	}
	return t
}

// List returns the names of the sets that exist.
func (r *Runner) List(ctx context.Context) ([]string, error) {
	out, err := r.command(ctx, "list", "-n").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ipset list: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return strings.Fields(string(out)), nil
}

// Entries returns a set's members, sorted.
func (r *Runner) Entries(ctx context.Context, name string) ([]string, error) {
	out, err := r.command(ctx, "save", name).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ipset save %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	var entries []string
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == "add" && f[1] == name {
			entries = append(entries, f[2])
		}
	}
	slices.Sort(entries)
	return entries, nil
}

// Destroy removes the named sets that exist; a set still referenced by an
// iptables rule cannot go, and that is an error.
func (r *Runner) Destroy(ctx context.Context, names ...string) error {
	have, err := r.List(ctx)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	for _, n := range names {
		if slices.Contains(have, n) {
			fmt.Fprintf(&b, "destroy %s\n", n)
		}
	}
	return r.restore(ctx, &b, "destroy")
}

// restore feeds script, if any, to `ipset restore`; what names the step
// in the error.
func (r *Runner) restore(ctx context.Context, script *bytes.Buffer, what string) error {
	if script.Len() == 0 {
		return nil
	}
	cmd := r.command(ctx, "restore")
	cmd.Stdin = script
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ipset %s: %v: %s", what, err, strings.TrimSpace(string(out)))
	}
	return nil
}
