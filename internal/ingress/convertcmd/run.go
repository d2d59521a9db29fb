package convertcmd

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/ingress/convert"
	"github.com/svcnet/svcnet/internal/kubeclient"
)

// Run prints the Gateway API objects for the Ingresses o names on
// stdout, and the Notes, one per line, on stderr (they are in the
// output's comment block too).
func Run(ctx context.Context, o Options, stdin io.Reader, stdout, stderr io.Writer) error {
	return run(ctx, o, env{stdin: stdin, stdout: stdout, stderr: stderr, client: newClient})
}

// env is what the command reads and writes; client stands in for the
// API server in tests.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// client makes the API client of a kubeconfig, and tells its
	// context's namespace.
	client func(kubeconfig string) (kubernetes.Interface, string, error)
}

func newClient(kubeconfig string) (kubernetes.Interface, string, error) {
	client, _, err := kubeclient.New(kubeconfig, kubeclient.Options{UserAgent: "svcnet-ingress-convert"})
	if err != nil {
		return nil, "", err
	}
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}, &clientcmd.ConfigOverrides{}).Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	return client, ns, nil
}

func run(ctx context.Context, o Options, e env) error {
	if err := o.validate(); err != nil {
		return err
	}
	read := fromFiles
	if o.FromCluster {
		read = fromCluster
	}
	ings, lookup, err := read(ctx, o, e)
	if err != nil {
		return err
	}
	res, err := convert.Convert(ings, convert.Options{GatewayClass: o.GatewayClass, GatewayName: o.GatewayName,
		GatewayNamespace: o.GatewayNamespace, Services: lookup})
	if err != nil {
		return err
	}
	if err := convert.Write(e.stdout, res); err != nil {
		return err
	}
	for _, n := range res.Notes {
		fmt.Fprintln(e.stderr, n)
	}
	return nil
}

// fromFiles reads the files; the Services among their objects resolve
// named ports, and the other objects are named on stderr.
func fromFiles(_ context.Context, o Options, e env) ([]*networkingv1.Ingress, convert.ServiceLookup, error) {
	var m convert.Manifest
	ns := cmp.Or(o.Namespace, metav1.NamespaceDefault)
	for _, name := range o.Files {
		if name == "-" {
			if err := m.Decode(e.stdin, "stdin", ns); err != nil {
				return nil, nil, err
			}
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			return nil, nil, err
		}
		err = m.Decode(f, name, ns)
		f.Close()
		if err != nil {
			return nil, nil, err
		}
	}
	for _, s := range m.Skipped {
		fmt.Fprintf(e.stderr, "skipped: %s\n", s)
	}
	if len(m.Ingresses) == 0 {
		return nil, nil, fmt.Errorf("no networking.k8s.io/v1 Ingress in %s", strings.Join(o.Files, ", "))
	}
	return m.Ingresses, m.Lookup, nil
}

// fromCluster lists the Ingresses of the namespace (or all), and the
// Services of their namespaces.
func fromCluster(ctx context.Context, o Options, e env) ([]*networkingv1.Ingress, convert.ServiceLookup, error) {
	client, ns, err := e.client(o.Kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	ns = cmp.Or(o.Namespace, ns, metav1.NamespaceDefault)
	if o.AllNamespaces {
		ns = metav1.NamespaceAll
	}
	list, err := client.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list Ingresses: %w", err)
	}
	if len(list.Items) == 0 {
		if o.AllNamespaces {
			return nil, nil, fmt.Errorf("no Ingresses in the cluster")
		}
		return nil, nil, fmt.Errorf("no Ingresses in namespace %s", ns)
	}
	var ings []*networkingv1.Ingress
	var namespaces []string
	for i := range list.Items {
		ings = append(ings, &list.Items[i])
		if n := list.Items[i].Namespace; !slices.Contains(namespaces, n) {
			namespaces = append(namespaces, n)
		}
	}
	if o.AllNamespaces {
		namespaces = []string{metav1.NamespaceAll}
	}
	services := map[string]*corev1.Service{}
	for _, n := range namespaces {
		svcs, err := client.CoreV1().Services(n).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("list Services (for the Ingresses' named ports): %w", err)
		}
		for i := range svcs.Items {
			s := &svcs.Items[i]
			services[s.Namespace+"/"+s.Name] = s
		}
	}
	return ings, func(namespace, name string) *corev1.Service { return services[namespace+"/"+name] }, nil
}
