package apiserver

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	valid := func() Options {
		o := Defaults()
		o.DataDir = "/nonexistent/svcnet-apiserver"
		return o
	}
	tests := []struct {
		name string
		edit func(*Options)
		want string // in the error; "" for none
	}{
		{"defaults", func(*Options) {}, ""},
		{"no data dir", func(o *Options) { o.DataDir = "" }, "--data-dir is required"},
		{"advertise not an IP", func(o *Options) { o.AdvertiseAddress = "api.example" }, "--advertise-address"},
		{"advertise loopback", func(o *Options) { o.AdvertiseAddress = "127.0.0.1" }, "not loopback"},
		{"advertise unspecified", func(o *Options) { o.AdvertiseAddress = "0.0.0.0" }, "not loopback"},
		{"advertise reachable", func(o *Options) { o.AdvertiseAddress = "172.18.0.1" }, ""},
		{"repair never", func(o *Options) { o.AllocationRepairInterval = 0 }, "--allocation-repair-interval"},
		{"events kept for no time", func(o *Options) { o.EventTTL = 0 }, "--event-ttl"},
		{"reconciler", func(o *Options) { o.EndpointReconcilerType = "master-count" }, "--endpoint-reconciler-type"},
		{"bind address", func(o *Options) { o.BindAddress = "localhost" }, "--bind-address"},
		{"etcd TLS without etcd servers", func(o *Options) { o.EtcdCAFile = "ca.crt" }, "are for --etcd-servers"},
		{"etcd cert without key", func(o *Options) {
			o.EtcdServers, o.EtcdCertFile = []string{"https://10.0.0.1:2379"}, "client.crt"
		}, "go together"},
		{"external etcd", func(o *Options) {
			o.EtcdServers, o.EtcdCertFile, o.EtcdKeyFile = []string{"https://10.0.0.1:2379"}, "client.crt", "client.key"
		}, ""},
		{"audit", func(o *Options) { o.Audit.LogOptions.Path, o.Audit.LogOptions.MaxAge = "/var/log/audit.log", -1 }, "audit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := valid()
			tc.edit(&o)
			if err := o.complete(); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestConfigReleases: a Config that fails after it has listened leaves
// nothing open.
func TestConfigReleases(t *testing.T) {
	o := Defaults()
	o.DataDir = filepath.Join(t.TempDir(), "api")
	// A file where the PKI directory goes fails the PKI step, which
	// comes after the listener.
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.DataDir, "pki"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.Listener = l
	if err := o.complete(); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Config(t.Context()); err == nil || !strings.Contains(err.Error(), "certificate authority") {
		t.Fatalf("Config: %v, want the certificate authority's error", err)
	}
	// The port is free again: the failed Config closed its listener.
	again, err := net.Listen("tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("the failed Config kept its listener: %v", err)
	}
	again.Close()
}
