package controller

import (
	"strings"
	"testing"
	"time"
)

func TestOptions(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Options)
		errs   []string
	}{
		{"defaults with a kubeconfig", func(*Options) {}, nil},
		{"no kubeconfig", func(o *Options) { o.Kubeconfig = "" }, []string{"--kubeconfig is required"}},
		{"https off", func(o *Options) { o.HTTPSAddress = "0" }, nil},
		{"http off", func(o *Options) { o.HTTPAddress = "" }, []string{"--http-address is required"}},
		{"bad addresses", func(o *Options) { o.HTTPAddress, o.MetricsAddress = "80", "x" }, []string{"--http-address \"80\"", "--metrics-address \"x\""}},
		{"bad names", func(o *Options) {
			o.PublishService, o.DefaultSSLCertificate, o.WatchNamespace, o.IngressClass = "noslash", "a/b/c", "Bad", ""
		}, []string{"--publish-service", "--default-ssl-certificate", "--watch-namespace", "--ingress-class"}},
		{"controller class", func(o *Options) { o.ControllerClass = "svcnet" }, []string{"--controller-class"}},
		{"limits", func(o *Options) { o.ProxyBodySize, o.MaxConnections, o.ReadTimeout, o.EventLoops = "1q", 0, 0, -1 },
			[]string{"--proxy-body-size", "--max-connections", "--proxy-read-timeout", "--event-loops"}},
		{"send timeout", func(o *Options) { o.SendTimeout = 0 }, []string{"--send-timeout 0s: must be positive"}},
		{"short send timeout", func(o *Options) { o.SendTimeout = time.Second }, nil},
		{"event loops", func(o *Options) { o.EventLoops = 3 }, nil},
		{"no gateway API", func(o *Options) { o.GatewayController = "" }, nil},
		{"API rate", func(o *Options) { o.KubeAPIQPS, o.KubeAPIBurst = 0, 0 }, []string{"--kube-api-qps 0 and --kube-api-burst 0"}},
		{"gateway controller of another domain", func(o *Options) { o.GatewayController = "example.com/gateway" }, nil},
		{"gateway controller without a domain", func(o *Options) { o.GatewayController = "gateway" }, []string{"--gateway-controller \"gateway\""}},
		{"gateway controller with a bad domain", func(o *Options) { o.GatewayController = "Example_com/gw" }, []string{"--gateway-controller"}},
		{"gateway controller without a path", func(o *Options) { o.GatewayController = "example.com/" }, []string{"--gateway-controller"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Defaults()
			o.Kubeconfig = "/k"
			tt.change(&o)
			c, err := o.parse()
			if len(tt.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if c.https != (o.HTTPSAddress != "0") || c.bodyLimit != 1<<20 {
					t.Errorf("parsed %+v", c)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, e := range tt.errs {
				if !strings.Contains(err.Error(), e) {
					t.Errorf("error %q does not mention %q", err, e)
				}
			}
		})
	}
}
