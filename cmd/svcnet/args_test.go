package main

import (
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/svcnet/svcnet/internal/apiserver"
	"github.com/svcnet/svcnet/internal/cliflags"
	"github.com/svcnet/svcnet/internal/controllermanager"
	dnscluster "github.com/svcnet/svcnet/internal/dns/cluster"
	"github.com/svcnet/svcnet/internal/dns/nodecache"
	"github.com/svcnet/svcnet/internal/etcd"
	ingresscontroller "github.com/svcnet/svcnet/internal/ingress/controller"
	"github.com/svcnet/svcnet/internal/ingress/convertcmd"
	"github.com/svcnet/svcnet/internal/node"
	proxyapp "github.com/svcnet/svcnet/internal/proxy/app"
)

// component is one command and its options' own flags and command line.
type component struct {
	name      string
	command   func() *cobra.Command
	flags     func() *pflag.FlagSet // the options' AddFlags on their defaults
	roundTrip func() error          // cliflags.RoundTrip of the options
	defaults  func() []string       // Args of the defaults
}

func of[T any](name string, command func() *cobra.Command, defaults func() T, bind func(*T, *pflag.FlagSet), args func(T) []string) component {
	return component{
		name:    name,
		command: command,
		flags: func() *pflag.FlagSet {
			fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
			o := defaults()
			bind(&o, fs)
			return fs
		},
		roundTrip: func() error { return cliflags.RoundTrip(defaults, bind) },
		defaults:  func() []string { return args(defaults()) },
	}
}

var components = []component{
	of("apiserver", newAPIServerCommand, apiserver.Defaults, (*apiserver.Options).AddFlags, apiserver.Options.Args),
	of("controller-manager", newControllerManagerCommand, controllermanager.Defaults, (*controllermanager.Options).AddFlags, controllermanager.Options.Args),
	of("etcd", newEtcdCommand, etcd.Defaults, (*etcd.Options).AddFlags, etcd.Options.Args),
	of("node", newNodeCommand, node.Defaults, (*node.Options).AddFlags, node.Options.Args),
	of("proxy", newProxyCommand, proxyapp.Defaults, (*proxyapp.Options).AddFlags, proxyapp.Options.Args),
	of("dns", newDNSCommand, dnscluster.Defaults, (*dnscluster.Options).AddFlags, dnscluster.Options.Args),
	of("node-cache", newNodeCacheCommand, nodecache.Defaults, (*nodecache.Options).AddFlags, nodecache.Options.Args),
	of("ingress", newIngressCommand, ingresscontroller.Defaults, (*ingresscontroller.Options).AddFlags, ingresscontroller.Options.Args),
	of("ingress convert", newIngressConvertCommand, convertcmd.Defaults, (*convertcmd.Options).AddFlags, convertcmd.Options.Args),
}

// TestComponentArgs: each component's Options.Args gives back every flag
// set to another value (cliflags.RoundTrip), nothing for the defaults,
// and the command is exactly those flags: what Args writes, the command
// parses, with the same types and defaults.
func TestComponentArgs(t *testing.T) {
	for _, c := range components {
		t.Run(c.name, func(t *testing.T) {
			if err := c.roundTrip(); err != nil {
				t.Error(err)
			}
			if args := c.defaults(); len(args) != 0 {
				t.Errorf("the defaults' command line is %q, want none", args)
			}
			cmd := c.command().Flags()
			own := c.flags()
			own.VisitAll(func(f *pflag.Flag) {
				g := cmd.Lookup(f.Name)
				switch {
				case g == nil:
					t.Errorf("--%s is not a flag of svcnet %s", f.Name, c.name)
				case g.Value.Type() != f.Value.Type() || g.DefValue != f.DefValue:
					t.Errorf("--%s: the command's is a %s defaulting to %q, the options' a %s defaulting to %q",
						f.Name, g.Value.Type(), g.DefValue, f.Value.Type(), f.DefValue)
				}
			})
			cmd.VisitAll(func(f *pflag.Flag) {
				if own.Lookup(f.Name) == nil {
					t.Errorf("svcnet %s --%s is not in its options' flags: Args cannot give it", c.name, f.Name)
				}
			})
		})
	}
}
