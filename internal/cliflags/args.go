// Package cliflags turns a component's options back into its command
// line, so that whoever starts a component (svcnet up's supervisor, the
// manifests, the tests) builds it from the component's own Options and
// flag definitions rather than from string literals of flag names.
package cliflags

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Args returns the flags that make bind's options o what they are: bind
// adds a component's flags for the options it is given to a flag set.
// The flags whose values in o differ from those in defaults() are
// returned as --name=value, in the order bind defines them. Flags bound
// to the same variable (kube-proxy's per-mode spellings of one setting)
// are given once, by their first name. defaults is a function, so that
// options holding pointers (the API server's audit options) get their
// own each time.
func Args[T any](o T, defaults func() T, bind func(*T, *pflag.FlagSet)) []string {
	have, want := newSet(), newSet()
	d := defaults()
	bind(&d, have)
	bind(&o, want)
	seen := map[uintptr]bool{}
	var out []string
	want.VisitAll(func(f *pflag.Flag) {
		if p := valuePointer(f.Value); p != 0 {
			if seen[p] {
				return
			}
			seen[p] = true
		}
		if v := value(f.Value); v != value(have.Lookup(f.Name).Value) {
			if f.Value.Type() == "stringArray" {
				// Each element is a flag of its own, and may hold commas.
				for _, e := range f.Value.(pflag.SliceValue).GetSlice() {
					out = append(out, "--"+f.Name+"="+e)
				}
				return
			}
			out = append(out, "--"+f.Name+"="+v)
		}
	})
	return out
}

// Parse parses args into o with bind's flags: Args's inverse.
func Parse[T any](o *T, bind func(*T, *pflag.FlagSet), args []string) error {
	fs := newSet()
	bind(o, fs)
	return fs.Parse(args)
}

func newSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("args", pflag.ContinueOnError)
	fs.SortFlags = false // VisitAll in the order of definition
	return fs
}

// value is v as a flag argument: slices comma-separated, as they parse
// (a stringArray's elements are compared this way too, and given one
// flag each).
func value(v pflag.Value) string {
	if s, ok := v.(pflag.SliceValue); ok {
		return strings.Join(s.GetSlice(), ",")
	}
	return v.String()
}

// valuePointer is the variable a flag is bound to: pflag's values are
// pointers to the variable, converted.
func valuePointer(v pflag.Value) uintptr {
	r := reflect.ValueOf(v)
	if r.Kind() != reflect.Pointer {
		return 0
	}
	return r.Pointer()
}

// RoundTrip checks that Args and Parse are each other's inverse for every
// flag bind defines: each flag set alone to a value other than its
// default, then all of them at once, gives options that Args turns into a
// command line that Parse turns back into the same options. Components'
// tests call it, so that a flag added without its way back fails.
func RoundTrip[T any](defaults func() T, bind func(*T, *pflag.FlagSet)) error {
	names := []string{}
	probe := newSet()
	d := defaults()
	bind(&d, probe)
	probe.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	check := func(set []string) error {
		o := defaults()
		fs := newSet()
		bind(&o, fs)
		for _, n := range set {
			f := fs.Lookup(n)
			if f.Value.Type() == "stringArray" {
				// Elements that hold commas, as --forward's do.
				for _, e := range []string{"a=1,2", "b"} {
					if err := f.Value.Set(e); err != nil {
						return fmt.Errorf("--%s: set %q: %w", n, e, err)
					}
				}
				continue
			}
			if err := f.Value.Set(other(f.Value)); err != nil {
				return fmt.Errorf("--%s: set %q: %w", n, other(f.Value), err)
			}
		}
		args := Args(o, defaults, bind)
		if len(set) > 0 && len(args) == 0 {
			return fmt.Errorf("flags %v changed, Args gives nothing", set)
		}
		back := defaults()
		if err := Parse(&back, bind, args); err != nil {
			return fmt.Errorf("parse %q: %w", args, err)
		}
		if !reflect.DeepEqual(o, back) {
			return fmt.Errorf("flags %v: Args gave %q, which parses to %+v, want %+v", set, args, back, o)
		}
		return nil
	}
	for _, n := range names {
		if err := check([]string{n}); err != nil {
			return err
		}
	}
	return check(names)
}

// other is a value of v's type other than its current one.
func other(v pflag.Value) string {
	cur := v.String()
	switch v.Type() {
	case "bool":
		if cur == "true" {
			return "false"
		}
		return "true"
	case "int", "int32", "int64", "uint", "uint16", "uint32", "uint64":
		n, _ := strconv.ParseInt(cur, 10, 64)
		return strconv.FormatInt(n+3, 10)
	case "float32", "float64":
		f, _ := strconv.ParseFloat(cur, 64)
		return strconv.FormatFloat(f+1.5, 'g', -1, 64)
	case "duration":
		d, _ := time.ParseDuration(cur)
		return (d + 1500*time.Millisecond).String()
	case "stringSlice":
		s := v.(pflag.SliceValue).GetSlice()
		return strings.Join(append(slices.Clone(s), "a", "b"), ",")
	default:
		return cur + "x"
	}
}
