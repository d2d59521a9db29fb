package apiserver

import (
	"encoding/json"
	"net/http"
	"runtime"
	"strings"

	"k8s.io/apimachinery/pkg/version"
)

// versionInfo is what /version answers: the Kubernetes API level svcnet
// implements, marked as svcnet's build.
func versionInfo() version.Info {
	parts := strings.SplitN(KubernetesVersion, ".", 3)
	return version.Info{
		Major:      parts[0],
		Minor:      parts[1],
		GitVersion: "v" + KubernetesVersion + "+svcnet",
		GoVersion:  runtime.Version(),
		Compiler:   runtime.Compiler,
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// withVersion answers /version itself (the library's answer carries the
// library's placeholder build version).
func withVersion(next http.Handler) http.Handler {
	body, _ := json.MarshalIndent(versionInfo(), "", "  ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/version" || r.URL.Path == "/version/" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body)
			return
		}
		next.ServeHTTP(w, r)
	})
}
