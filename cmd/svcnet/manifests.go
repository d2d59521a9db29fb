package main

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svcnet/svcnet/deploy"
	"github.com/svcnet/svcnet/internal/proxy/app"
)

func newManifestsCommand() *cobra.Command {
	v := deploy.Defaults()
	cmd := &cobra.Command{
		Use:   "manifests [COMPONENT...]",
		Short: "Print the manifests that install svcnet's proxy, DNS, ingress or the Gateway API's CRDs into a cluster",
		Long: `Print, ready for kubectl apply, the manifests of deploy/ with their
placeholders filled: ` + componentList() + `. Without
arguments, all of them. svcnet up installs its add-ons from the same files.`,
		Example: `  # svcnet's proxy in place of kube-proxy (delete kube-proxy's DaemonSet first)
  svcnet manifests proxy --api-server https://10.0.0.10:6443 --cluster-cidr 10.244.0.0/16 | kubectl apply -f -
  # the DNS behind the existing kube-dns Service, and the ingress controller
  svcnet manifests dns ingress --image registry.example.com/svcnet:1.0 | kubectl apply -f -
  # the Gateway API's standard CRDs, which the ingress controller serves
  svcnet manifests gateway | kubectl apply --server-side -f -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				for _, c := range deploy.Components {
					args = append(args, c.Name)
				}
			}
			out, err := renderManifests(args, v)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&v.Image, "image", v.Image, "svcnet's image (make image builds it)")
	f.StringVar(&v.APIServer, "api-server", v.APIServer, "proxy: the API server's URL as the nodes reach it (not the kubernetes Service's ClusterIP, which the proxy makes)")
	f.StringVar(&v.ClusterCIDR, "cluster-cidr", v.ClusterCIDR, "proxy, dns: the pod network (the proxy masquerades traffic from outside it to cluster IPs; the DNS answers its PTR questions)")
	f.StringVar(&v.ProxyMode, "proxy-mode", v.ProxyMode, "proxy: "+strings.Join(app.ModeNames(), ", "))
	f.StringVar(&v.DNSUpstream, "dns-upstream", v.DNSUpstream, "dns: upstream servers IP[:PORT],… or none (default: the nodes' /etc/resolv.conf)")
	f.StringVar(&v.ClusterDomain, "cluster-domain", v.ClusterDomain, "dns: the cluster's domain")
	f.StringVar(&v.ServiceCIDR, "service-cidr", v.ServiceCIDR, "dns: the service range, whose PTR questions it answers (with --cluster-cidr, the pod network's)")
	return cmd
}

func componentList() string {
	var out []string
	for _, c := range deploy.Components {
		out = append(out, c.Name+" ("+c.Doc+")")
	}
	return strings.Join(out, ", ")
}

// renderManifests checks the values the named components use and
// renders them, one YAML stream.
func renderManifests(names []string, v deploy.Values) ([]byte, error) {
	var out []byte
	for _, name := range names {
		c, err := deploy.Lookup(name)
		if err != nil {
			return nil, err
		}
		if name == "proxy" {
			if err := checkProxyValues(v); err != nil {
				return nil, err
			}
		}
		b, err := c.Render(v.Map())
		if err != nil {
			return nil, err
		}
		if len(out) > 0 {
			out = append(out, "---\n"...)
		}
		out = append(out, b...)
	}
	return out, nil
}

func checkProxyValues(v deploy.Values) error {
	u, err := url.Parse(v.APIServer)
	if v.APIServer == "" || err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("proxy: --api-server %q: want the API server's https URL as the nodes reach it, e.g. https://10.0.0.10:6443", v.APIServer)
	}
	if v.ClusterCIDR != "" {
		if _, err := netip.ParsePrefix(v.ClusterCIDR); err != nil {
			return fmt.Errorf("proxy: --cluster-cidr %q: %v", v.ClusterCIDR, err)
		}
	}
	if !slices.Contains(app.ModeNames(), v.ProxyMode) {
		return fmt.Errorf("proxy: --proxy-mode %q: want one of %s", v.ProxyMode, strings.Join(app.ModeNames(), ", "))
	}
	return nil
}
