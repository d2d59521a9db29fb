package deploy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svcnet/svcnet/internal/cliflags"
	dnscluster "github.com/svcnet/svcnet/internal/dns/cluster"
	ingresscontroller "github.com/svcnet/svcnet/internal/ingress/controller"
	"github.com/svcnet/svcnet/internal/ingress/route"
	proxyapp "github.com/svcnet/svcnet/internal/proxy/app"
)

func values() Values {
	v := Defaults()
	v.APIServer, v.ClusterCIDR = "https://10.0.0.10:6443", "10.244.0.0/16"
	return v
}

// TestComponents renders every file, decodes it and creates its objects:
// each object has a kind Create knows, no placeholder is left, and the
// workload runs svcnet's image with the values given.
func TestComponents(t *testing.T) {
	tests := []struct {
		name     string
		wantKind string
		wantArgs []string
	}{
		{"proxy", "DaemonSet", []string{"proxy", "--kubeconfig=/var/lib/kube-proxy/kubeconfig.conf", "--hostname-override=$(NODE_NAME)",
			"--proxy-mode=iptables", "--cluster-cidr=10.244.0.0/16"}},
		{"dns", "Deployment", []string{"dns", "--zone=cluster.local", "--upstream="}},
		{"ingress", "Deployment", []string{"ingress", "--ingress-class=svcnet"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Lookup(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			out, err := c.Render(values().Map())
			if err != nil {
				t.Fatal(err)
			}
			if i := strings.Index(string(stripComments(out)), "${"); i >= 0 {
				t.Errorf("placeholder left: %q", string(stripComments(out))[i:])
			}
			objs, err := Objects(out)
			if err != nil {
				t.Fatal(err)
			}
			var spec *corev1.PodSpec
			for _, o := range objs {
				switch x := o.(type) {
				case *appsv1.DaemonSet:
					spec = &x.Spec.Template.Spec
				case *appsv1.Deployment:
					spec = &x.Spec.Template.Spec
				}
			}
			if spec == nil {
				t.Fatalf("no %s in %s", tt.wantKind, c.File)
			}
			ctr := spec.Containers[0]
			if ctr.Image != DefaultImage || ctr.Command[0] != "/usr/local/bin/svcnet" {
				t.Errorf("image %q command %q, want %s running /usr/local/bin/svcnet", ctr.Image, ctr.Command, DefaultImage)
			}
			for _, a := range tt.wantArgs {
				if !slices.Contains(ctr.Command, a) {
					t.Errorf("command %q lacks %q", ctr.Command, a)
				}
			}
			// Every flag of the manifest is one of the component's own,
			// with a value it takes.
			if err := parseFlags(ctr.Command[1], ctr.Command[2:]); err != nil {
				t.Errorf("command %q: %v", ctr.Command, err)
			}
			if spec.ServiceAccountName == "" {
				t.Error("no ServiceAccount of its own")
			}
			if err := Create(t.Context(), fake.NewClientset(), objs); err != nil {
				t.Error(err)
			}
		})
	}
}

// parseFlags parses a component's flags as `svcnet <component>` does.
func parseFlags(component string, args []string) error {
	switch component {
	case "proxy":
		o := proxyapp.Defaults()
		return cliflags.Parse(&o, (*proxyapp.Options).AddFlags, args)
	case "dns":
		o := dnscluster.Defaults()
		return cliflags.Parse(&o, (*dnscluster.Options).AddFlags, args)
	case "ingress":
		o := ingresscontroller.Defaults()
		return cliflags.Parse(&o, (*ingresscontroller.Options).AddFlags, args)
	}
	return fmt.Errorf("no flags known for svcnet %s", component)
}

// TestRender: a missing value is named; a value that would break the
// YAML is refused; comments keep their placeholders.
func TestRender(t *testing.T) {
	proxy, _ := Lookup("proxy")
	v := values().Map()
	delete(v, "API_SERVER")
	if _, err := proxy.Render(v); err == nil || !strings.Contains(err.Error(), "no value for API_SERVER") {
		t.Errorf("missing API_SERVER: err %v", err)
	}
	v = values().Map()
	v["CLUSTER_CIDR"] = "10.0.0.0/8\n  evil: true"
	if _, err := proxy.Render(v); err == nil {
		t.Error("a value with a newline was accepted")
	}
	out, err := proxy.Render(values().Map())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "#   ${API_SERVER}") {
		t.Error("the header comment's placeholder was filled")
	}
	vars, _ := proxy.Vars()
	if strings.Join(vars, ",") != "API_SERVER,CLUSTER_CIDR,PROXY_MODE,SVCNET_IMAGE" {
		t.Errorf("proxy vars %v", vars)
	}
	if _, err := Lookup("coredns"); err == nil || !strings.Contains(err.Error(), "proxy, dns, gateway, ingress") {
		t.Errorf("unknown component: err %v", err)
	}
}

// TestIngressClass: the IngressClass names the controller that svcnet
// ingress serves by default, and is the default class.
func TestIngressClass(t *testing.T) {
	c, _ := Lookup("ingress")
	out, err := c.Render(values().Map())
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(out)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(objs, func(o runtime.Object) bool { _, ok := o.(*networkingv1.IngressClass); return ok })
	if i < 0 {
		t.Fatal("no IngressClass")
	}
	class := objs[i].(*networkingv1.IngressClass)
	if class.Spec.Controller != ingresscontroller.DefaultController || class.Annotations[route.DefaultClassAnnotation] != "true" {
		t.Errorf("IngressClass %+v: want controller %s, the default class", class, ingresscontroller.DefaultController)
	}
}
