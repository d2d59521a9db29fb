package cliflags

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

type options struct {
	Name    string
	On      bool
	N       int
	Wait    time.Duration
	List    []string
	Array   []string
	Aliased time.Duration
	Lossy   lossy
}

func defaults() options {
	return options{Name: "a", N: 2, List: []string{"x"}, Aliased: time.Second}
}

func bind(o *options, f *pflag.FlagSet) {
	f.StringVar(&o.Name, "name", o.Name, "")
	f.BoolVar(&o.On, "on", o.On, "")
	f.IntVar(&o.N, "n", o.N, "")
	f.DurationVar(&o.Wait, "wait", o.Wait, "")
	f.StringSliceVar(&o.List, "list", o.List, "")
	f.StringArrayVar(&o.Array, "forward", o.Array, "")
	f.DurationVar(&o.Aliased, "sync-period", o.Aliased, "")
	f.DurationVar(&o.Aliased, "iptables-sync-period", o.Aliased, "same as --sync-period")
}

// lossy is a flag value whose String does not parse back.
type lossy struct{ v string }

func (l *lossy) String() string     { return strings.ToUpper(l.v) }
func (l *lossy) Set(v string) error { l.v = v; return nil }
func (l *lossy) Type() string       { return "lossy" }

func TestArgs(t *testing.T) {
	o := defaults()
	o.Name, o.On, o.List, o.Aliased = "b c", true, []string{"x", "y"}, time.Minute
	o.Array = []string{"z=1,2", "y=3"}
	got := Args(o, defaults, bind)
	want := []string{"--name=b c", "--on=true", "--list=x,y", "--forward=z=1,2", "--forward=y=3", "--sync-period=1m0s"}
	if !slices.Equal(got, want) {
		t.Errorf("Args = %q, want %q", got, want)
	}
	if got := Args(defaults(), defaults, bind); len(got) != 0 {
		t.Errorf("the defaults' Args = %q, want none", got)
	}
}

func TestRoundTrip(t *testing.T) {
	if err := RoundTrip(defaults, bind); err != nil {
		t.Error(err)
	}
	withLossy := func(o *options, f *pflag.FlagSet) {
		bind(o, f)
		f.Var(&o.Lossy, "lossy", "")
	}
	if err := RoundTrip(defaults, withLossy); err == nil || !strings.Contains(err.Error(), "lossy") {
		t.Errorf("a flag that does not parse back: %v, want an error naming it", err)
	}
}
