package images

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"time"
)

// nginxWelcome is the page nginx answers / with out of the box.
const nginxWelcome = `<!DOCTYPE html>
<html>
<head>
<title>Welcome to nginx!</title>
</head>
<body>
<h1>Welcome to nginx!</h1>
<p>If you see this page, the nginx web server is successfully installed and
working. (svcnet's built-in stand-in for the nginx image.)</p>
</body>
</html>
`

// runNginx stands in for the nginx image where manifests use it as a
// placeholder web server: HTTP on port 80, nginx's welcome page at /
// (and /index.html), 404 elsewhere. It reads no configuration; nginx's
// own flags (-g 'daemon off;') are accepted and ignored.
func runNginx(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("nginx", flag.ContinueOnError)
	port := fs.Int("port", 80, "HTTP port (svcnet's; nginx has none)")
	fs.String("g", "", "nginx directives (ignored)")
	fs.String("c", "", "nginx configuration file (ignored)")
	if len(args) > 0 && args[0] == "/nginx" {
		args = args[1:] // started as the image's program
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "nginx (svcnet)")
		if r.URL.Path != "/" && r.URL.Path != "/index.html" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Last-Modified", startTime.UTC().Format(http.TimeFormat))
		fmt.Fprint(w, nginxWelcome)
	})
	return serveHTTP(ctx, fmt.Sprintf(":%d", *port), mux)
}

var startTime = time.Now()
