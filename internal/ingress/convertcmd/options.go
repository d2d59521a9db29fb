// Package convertcmd is `svcnet ingress convert`: it reads Ingresses
// from files or from the cluster, converts them (internal/ingress/convert)
// and prints the Gateway API objects on stdout and the Notes on stderr.
package convertcmd

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/svcnet/svcnet/internal/ingress/convert"
)

// Options are the command line of `svcnet ingress convert`.
type Options struct {
	// Files hold the Ingresses ("-" is stdin), and the Services that
	// resolve their named ports.
	Files []string
	// FromCluster reads the Ingresses and Services from the API server
	// of Kubeconfig (in-cluster credentials without one).
	FromCluster bool
	Kubeconfig  string
	// Namespace is the one read from the cluster (default: the
	// kubeconfig context's), or that of the objects of Files that name
	// none (default: "default"); AllNamespaces reads every one.
	Namespace     string
	AllNamespaces bool
	// The Gateway's class, name and namespace ("": the Ingresses').
	GatewayClass     string
	GatewayName      string
	GatewayNamespace string
}

// Defaults are what `svcnet ingress convert` runs with when a flag is
// not given.
func Defaults() Options {
	return Options{GatewayClass: convert.DefaultGatewayClass, GatewayName: convert.DefaultGatewayName}
}

// validate checks that the flags ask for one source, and names.
func (o Options) validate() error {
	var errs []error
	switch {
	case len(o.Files) == 0 && !o.FromCluster:
		errs = append(errs, fmt.Errorf("give the Ingresses with -f FILE (- for stdin) or --from-cluster"))
	case len(o.Files) > 0 && o.FromCluster:
		errs = append(errs, fmt.Errorf("-f and --from-cluster are two sources: give one"))
	}
	if o.AllNamespaces && o.Namespace != "" {
		errs = append(errs, fmt.Errorf("-n and -A: give one"))
	}
	if o.AllNamespaces && !o.FromCluster {
		errs = append(errs, fmt.Errorf("-A reads every namespace of the cluster: it needs --from-cluster"))
	}
	if o.Kubeconfig != "" && !o.FromCluster {
		errs = append(errs, fmt.Errorf("--kubeconfig is for --from-cluster"))
	}
	if slices.Contains(o.Files, "") {
		errs = append(errs, fmt.Errorf("-f: an empty file name"))
	}
	if i := slices.Index(o.Files, "-"); i >= 0 && slices.Contains(o.Files[i+1:], "-") {
		errs = append(errs, fmt.Errorf("-f - twice: stdin is read once"))
	}
	for _, n := range []struct{ flag, v string }{{"--namespace", o.Namespace}, {"--gateway-namespace", o.GatewayNamespace}} {
		if n.v == "" {
			continue
		}
		if e := validation.IsDNS1123Label(n.v); len(e) > 0 {
			errs = append(errs, fmt.Errorf("%s %q: %s", n.flag, n.v, strings.Join(e, "; ")))
		}
	}
	return errors.Join(errs...)
}
