// Package deploy holds the manifests that install svcnet's node proxy,
// cluster DNS and ingress controller into a Kubernetes cluster, and the
// Gateway API's CRDs, and renders them. `svcnet up` installs its add-ons from these same files,
// so what a user applies to a real cluster is what the tests run.
//
// The files are plain Kubernetes YAML with ${NAME} placeholders, which
// envsubst fills as well as Render does.
package deploy

//go:generate go run ./gatewaysync

import (
	"bufio"
	"bytes"
	"embed"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

//go:embed *.yaml gateway-api/*.yaml
var files embed.FS

// Component is one thing to install: a file of this directory, or every
// .yaml file of a directory of it, in name order.
type Component struct {
	Name string
	File string // a file, or a directory
	Doc  string
}

// Components are the installable parts, in the order they go in: the
// proxy first, as the others reach the API through the kubernetes
// Service; the Gateway API's CRDs before the ingress controller, which
// serves them.
var Components = []Component{
	{Name: "proxy", File: "kube-proxy.yaml", Doc: "the node proxy as a DaemonSet in place of kube-proxy"},
	{Name: "dns", File: "dns.yaml", Doc: "the cluster DNS as a Deployment behind the kube-dns Service, in place of CoreDNS"},
	{Name: "gateway", File: GatewayAPIDir, Doc: "the Gateway API's standard-channel CRDs as sigs.k8s.io/gateway-api ships them"},
	{Name: "ingress", File: "ingress.yaml", Doc: "the ingress controller, its IngressClass and LoadBalancer Service"},
}

// GatewayAPIDir holds the CRD files of sigs.k8s.io/gateway-api's
// config/crd/standard as the module go.mod requires has them, copied by
// ./gatewaysync (go generate); its test fails when the copies differ
// from the module's.
const GatewayAPIDir = "gateway-api"

// Lookup finds a component by name.
func Lookup(name string) (Component, error) {
	i := slices.IndexFunc(Components, func(c Component) bool { return c.Name == name })
	if i < 0 {
		var names []string
		for _, c := range Components {
			names = append(names, c.Name)
		}
		return Component{}, fmt.Errorf("no component %q (components: %s)", name, strings.Join(names, ", "))
	}
	return Components[i], nil
}

// placeholder is ${NAME}; $(NAME) is Kubernetes' own expansion of a
// container's environment and is left alone.
var placeholder = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// Raw is the file as it is in the repository; a directory's files are
// joined into one YAML stream.
func (c Component) Raw() ([]byte, error) {
	entries, err := files.ReadDir(c.File)
	if err != nil {
		return files.ReadFile(c.File)
	}
	var out []byte
	for _, e := range entries { // sorted by name
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		b, err := files.ReadFile(c.File + "/" + e.Name())
		if err != nil {
			return nil, err
		}
		if len(out) > 0 {
			if out[len(out)-1] != '\n' {
				out = append(out, '\n')
			}
			if !bytes.HasPrefix(b, []byte("---\n")) {
				out = append(out, "---\n"...)
			}
		}
		out = append(out, b...)
	}
	return out, nil
}

// Vars lists the placeholders the file has.
func (c Component) Vars() ([]string, error) {
	raw, err := c.Raw()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, m := range placeholder.FindAllSubmatch(stripComments(raw), -1) {
		seen[string(m[1])] = true
	}
	var out []string
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out, nil
}

// Render fills the file's placeholders from vars; a placeholder without
// a value is an error (an empty value is a value), as are values a
// manifest cannot hold on one line.
func (c Component) Render(vars map[string]string) ([]byte, error) {
	raw, err := c.Raw()
	if err != nil {
		return nil, err
	}
	// Comments name the placeholders too, and stay as they are.
	var out bytes.Buffer
	var missing []string
	for _, line := range bytes.SplitAfter(raw, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			line = placeholder.ReplaceAllFunc(line, func(m []byte) []byte {
				name := string(placeholder.FindSubmatch(m)[1])
				if v, ok := vars[name]; ok {
					return []byte(v)
				}
				if !slices.Contains(missing, name) {
					missing = append(missing, name)
				}
				return m
			})
		}
		out.Write(line)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: no value for %s", c.File, strings.Join(missing, ", "))
	}
	for name, v := range vars {
		if strings.ContainsAny(v, "\n\r\"'#") {
			return nil, fmt.Errorf("%s: value of %s %q: newlines, quotes and # are not allowed", c.File, name, v)
		}
	}
	return out.Bytes(), nil
}

// stripComments drops YAML comment lines (those starting with #).
func stripComments(b []byte) []byte {
	var out bytes.Buffer
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			continue
		}
		out.Write(line)
	}
	return out.Bytes()
}

// Objects renders the file and decodes its objects.
func (c Component) Objects(vars map[string]string) ([]runtime.Object, error) {
	out, err := c.Render(vars)
	if err != nil {
		return nil, err
	}
	return Objects(out)
}

// decoder knows client-go's kinds and CustomResourceDefinitions.
var decoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	utilruntime.Must(scheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return serializer.NewCodecFactory(s).UniversalDeserializer()
}()

// Objects decodes rendered YAML into typed API objects, in file order.
func Objects(rendered []byte) ([]runtime.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(rendered)))
	var out []runtime.Object
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decode %.60q: %w", bytes.TrimSpace(stripComments(doc)), err)
		}
		out = append(out, obj)
	}
}

// Values are the placeholders' values, by meaning.
type Values struct {
	Image         string // SVCNET_IMAGE
	APIServer     string // API_SERVER
	ClusterCIDR   string // CLUSTER_CIDR
	ProxyMode     string // PROXY_MODE
	DNSUpstream   string // DNS_UPSTREAM
	ClusterDomain string // CLUSTER_DOMAIN
	ServiceCIDR   string // SERVICE_CIDR
}

// DefaultImage is the image `make image` builds (svcnet's own nodes know
// it by that name too).
const DefaultImage = "svcnet:latest"

// Defaults are the values of a cluster that says nothing: the API
// server's address has none.
func Defaults() Values {
	return Values{Image: DefaultImage, ProxyMode: "iptables", ClusterDomain: "cluster.local"}
}

// Map is v by placeholder.
func (v Values) Map() map[string]string {
	return map[string]string{"SVCNET_IMAGE": v.Image, "API_SERVER": v.APIServer, "CLUSTER_CIDR": v.ClusterCIDR,
		"PROXY_MODE": v.ProxyMode, "DNS_UPSTREAM": v.DNSUpstream, "CLUSTER_DOMAIN": v.ClusterDomain,
		"SERVICE_CIDR": v.ServiceCIDR}
}
