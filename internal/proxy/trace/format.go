package trace

import (
	"fmt"
	"io"
	"strings"
)

// Write prints the result for people: each path with the chains and rules
// it goes through (a path repeats no more of the previous one than needed
// to see where it forks), then the outcomes with their probabilities.
func (r *Result) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "packet %s\n", r.Packet)
	for i, p := range r.Paths {
		fmt.Fprintf(&b, "\npath %d of %d, probability %s", i+1, len(r.Paths), percent(p.Probability))
		from := 0
		if i > 0 {
			from = commonPrefix(r.Paths[i-1].Steps, p.Steps)
			if from > 0 {
				fmt.Fprintf(&b, ", as path %d for %d steps, then", i, from)
			}
		}
		b.WriteString(":\n")
		lastTable, lastChain := "", ""
		for _, s := range p.Steps[from:] {
			if s.Table != lastTable || s.Chain != lastChain {
				fmt.Fprintf(&b, "  %s %s\n", s.Table, s.Chain)
				lastTable, lastChain = s.Table, s.Chain
			}
			switch {
			case s.Rule == nil:
				fmt.Fprintf(&b, "    %s\n", s.Note)
			case s.Note != "":
				fmt.Fprintf(&b, "    #%d %s   [%s]\n", s.Rule.Num, s.Rule.Text, s.Note)
			default:
				fmt.Fprintf(&b, "    #%d %s\n", s.Rule.Num, s.Rule.Text)
			}
		}
		fmt.Fprintf(&b, "  => %s\n", describe(p.Verdict, p.Dst, p.DNAT, p.Masquerade))
		if len(p.RecentSet) > 0 {
			fmt.Fprintf(&b, "     source recorded in recent list %s (session affinity)\n", strings.Join(p.RecentSet, ", "))
		}
	}
	b.WriteString("\noutcomes:\n")
	for _, o := range r.Outcomes() {
		fmt.Fprintf(&b, "  %7s  %s\n", percent(o.Probability), describe(o.Verdict, o.Dst, o.DNAT, o.Masquerade))
	}
	for _, warning := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", warning)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func describe(verdict string, dst fmt.Stringer, dnat, masq bool) string {
	if verdict != "ACCEPT" {
		return verdict
	}
	s := "delivered to " + dst.String()
	if dnat {
		s += " (DNAT)"
	} else {
		s += " (not translated)"
	}
	if masq {
		s += ", masqueraded"
	} else {
		s += ", source kept"
	}
	return s
}

func percent(p float64) string { return fmt.Sprintf("%.2f%%", p*100) }

func commonPrefix(a, b []Step) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	// Restart at the fork's chain header, so the reader sees where it is.
	for n > 0 && n < len(b) && b[n-1].Chain == b[n].Chain && b[n-1].Table == b[n].Table {
		n--
	}
	return n
}
