package controller

import (
	"testing"

	"github.com/svcnet/svcnet/internal/cliflags"
)

func TestArgs(t *testing.T) {
	if err := cliflags.RoundTrip(Defaults, (*Options).AddFlags); err != nil {
		t.Error(err)
	}
	if args := Defaults().Args(); len(args) != 0 {
		t.Errorf("the defaults' command line is %q, want none", args)
	}
}
