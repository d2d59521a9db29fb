package images

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// handler is netexec's HTTP server. Bodies carry no trailing newline
// unless noted; errors made with http.Error end in one.
//
//	/                 "NOW: " and the time
//	/clientip         the client's host:port
//	/serverport       --http-port
//	/header?key=K     the request's header K; without key, all as JSON
//	/dial?…           see dial
//	/echo?msg=M&code= M, with status code if given
//	/exit?code=&timeout=&wait=  exit the process
//	/healthz          200 while a UDP server runs, else 412
//	/readyz           "ok" as /healthz, 412 unready, 503 "shutting down" after SIGTERM
//	/hostname, /hostName  the pod's hostname
//	/envvar?var=V     the environment variable V
//	/redirect?location=L&code=  a redirect (302 by default)
//	/shell?cmd=C      {"output":…,"error":…} of sh -c C
//	/upload           a multipart "file", stored in the upload directory
//	/shutdown         exit 0 at once
//
// With --http-override every request is answered as a GET of that path.
func (n *netexec) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		n.log.Printf("GET /")
		fmt.Fprintf(w, "NOW: %v", time.Now())
	})
	mux.HandleFunc("/clientip", func(w http.ResponseWriter, r *http.Request) {
		n.log.Printf("GET /clientip")
		fmt.Fprint(w, r.RemoteAddr)
	})
	mux.HandleFunc("/serverport", func(w http.ResponseWriter, _ *http.Request) {
		n.log.Printf("GET /serverport")
		fmt.Fprint(w, n.httpPort)
	})
	mux.HandleFunc("/header", n.header)
	mux.HandleFunc("/dial", n.dial)
	mux.HandleFunc("/echo", n.echo)
	mux.HandleFunc("/exit", n.exit)
	mux.HandleFunc("/healthz", n.healthz)
	mux.HandleFunc("/readyz", n.readyz)
	mux.HandleFunc("/hostname", n.hostname)
	mux.HandleFunc("/hostName", n.hostname)
	mux.HandleFunc("/envvar", n.envvar)
	mux.HandleFunc("/redirect", n.redirect)
	mux.HandleFunc("/shell", n.shell)
	mux.HandleFunc("/upload", n.upload)
	mux.HandleFunc("/shutdown", func(_ http.ResponseWriter, _ *http.Request) {
		n.log.Printf("GET /shutdown")
		n.requestExit(netexecExit{code: 0})
	})
	if n.httpOverride == "" {
		return mux
	}
	outer := http.NewServeMux()
	outer.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// A request of its own, as agnhost makes: no client address, no
		// headers.
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, n.httpOverride, nil)
		if err != nil {
			http.Error(w, fmt.Sprintf("override request failed: %v", err), http.StatusInternalServerError)
			return
		}
		mux.ServeHTTP(w, req)
	})
	return outer
}

func (n *netexec) header(w http.ResponseWriter, r *http.Request) {
	key := r.FormValue("key")
	if key != "" {
		n.log.Printf("GET /header?key=%s", key)
		fmt.Fprint(w, r.Header.Get(key))
		return
	}
	n.log.Printf("GET /header")
	b, err := json.Marshal(r.Header)
	if err != nil {
		fmt.Fprintf(w, "error marshalling header, err: %v", err)
		return
	}
	w.Write(b)
}

func (n *netexec) echo(w http.ResponseWriter, r *http.Request) {
	msg, code := r.FormValue("msg"), r.FormValue("code")
	n.log.Printf("GET /echo?msg=%s&code=%s", msg, code)
	if code != "" {
		c, err := strconv.Atoi(code)
		if err != nil {
			fmt.Fprintf(w, "argument 'code' must be an integer or empty, got %q\n", code)
			return
		}
		w.WriteHeader(c)
	}
	fmt.Fprint(w, msg)
}

// exit ends the process with ?code= (0) after waiting ?wait= and then
// letting open requests finish for up to ?timeout= (0: at once).
func (n *netexec) exit(w http.ResponseWriter, r *http.Request) {
	waitArg, timeoutArg, codeArg := r.FormValue("wait"), r.FormValue("timeout"), r.FormValue("code")
	n.log.Printf("GET /exit?code=%s&timeout=%s&wait=%s", codeArg, timeoutArg, waitArg)
	var e netexecExit
	var wait time.Duration
	var err error
	if timeoutArg != "" {
		if e.grace, err = time.ParseDuration(timeoutArg); err != nil {
			fmt.Fprintf(w, "argument 'timeout' must be a valid golang duration or empty, got %q\n", timeoutArg)
			return
		}
	}
	if waitArg != "" {
		if wait, err = time.ParseDuration(waitArg); err != nil {
			fmt.Fprintf(w, "argument 'wait' must be a valid golang duration or empty, got %q\n", waitArg)
			return
		}
	}
	if codeArg != "" {
		if e.code, err = strconv.Atoi(codeArg); err != nil {
			fmt.Fprintf(w, "argument 'code' must be an integer [0-127] or empty, got %q\n", codeArg)
			return
		}
	}
	n.log.Printf("Will begin shutdown in %s, allowing %s for connections to close, then will exit with %d", wait, e.grace, e.code)
	time.Sleep(wait)
	n.requestExit(e)
}

func (n *netexec) healthz(w http.ResponseWriter, _ *http.Request) {
	n.log.Printf("GET /healthz")
	if n.ready.Load() {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.WriteHeader(http.StatusPreconditionFailed)
}

func (n *netexec) readyz(w http.ResponseWriter, _ *http.Request) {
	n.log.Printf("GET /readyz")
	select {
	case <-n.terminating:
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "shutting down")
		return
	default:
	}
	if n.ready.Load() {
		io.WriteString(w, "ok")
		return
	}
	w.WriteHeader(http.StatusPreconditionFailed)
}

func (n *netexec) hostname(w http.ResponseWriter, r *http.Request) {
	n.log.Printf("GET %s", r.URL.Path)
	name, err := os.Hostname()
	if err != nil {
		http.Error(w, fmt.Sprintf("failed to get hostname: %v", err), http.StatusInternalServerError)
		return
	}
	fmt.Fprint(w, name)
}

func (n *netexec) envvar(w http.ResponseWriter, r *http.Request) {
	name := r.FormValue("var")
	if name == "" {
		http.Error(w, "'var' query parameter is required", http.StatusBadRequest)
		return
	}
	n.log.Printf("GET /envvar?var=%s", name)
	v, ok := os.LookupEnv(name)
	if !ok {
		http.Error(w, fmt.Sprintf("env var %q is not set", name), http.StatusInternalServerError)
		return
	}
	fmt.Fprint(w, v)
}

func (n *netexec) redirect(w http.ResponseWriter, r *http.Request) {
	location, codeArg := r.FormValue("location"), r.FormValue("code")
	n.log.Printf("%s /redirect?msg=%s&code=%s", r.Method, location, codeArg)
	code := http.StatusFound
	if codeArg != "" {
		c, err := strconv.Atoi(codeArg)
		if err != nil {
			fmt.Fprintf(w, "argument 'code' must be an integer or empty, got %q\n", codeArg)
			return
		}
		code = c
	}
	http.Redirect(w, r, location, code)
}

// shell runs ?shellCommand= (or ?cmd=) with sh -c and answers
// {"output": combined output, "error": how it failed}, each field only
// when there is something to say, with status 200 either way.
func (n *netexec) shell(w http.ResponseWriter, r *http.Request) {
	command := r.FormValue("shellCommand")
	if command == "" {
		command = r.FormValue("cmd")
	}
	n.log.Printf("GET /shell?cmd=%s", command)
	out, err := exec.Command(n.env.shell, "-c", command).CombinedOutput()
	result := map[string]string{}
	if len(out) > 0 {
		result["output"] = string(out)
	}
	if err != nil {
		result["error"] = err.Error()
	}
	n.log.Printf("Output: %s", result)
	writeJSONOr(w, result, "response could not be serialized", http.StatusExpectationFailed)
}

// upload stores the multipart field "file" as a new file of the upload
// directory: 201 and {"output": its path}, or 200 and {"error": …}.
func (n *netexec) upload(w http.ResponseWriter, r *http.Request) {
	n.log.Printf("GET /upload")
	fail := func(msg string, err error) {
		n.log.Printf("%s: %v", msg, err)
		writeJSONOr(w, map[string]string{"error": msg}, msg+". Also unable to serialize output", http.StatusInternalServerError)
	}
	in, _, err := r.FormFile("file")
	if err != nil {
		fail("Unable to upload file.", err)
		return
	}
	defer in.Close()
	f, err := os.CreateTemp(n.env.uploadDir, "upload")
	if err != nil {
		fail("Unable to open file for write", err)
		return
	}
	defer f.Close()
	if _, err := io.Copy(f, in); err != nil {
		fail("Unable to write file.", err)
		return
	}
	if err := os.Chmod(f.Name(), 0o700); err != nil {
		fail("Unable to chmod file.", err)
		return
	}
	n.log.Printf("Wrote upload to %s", f.Name())
	b, err := json.Marshal(map[string]string{"output": f.Name()})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusCreated)
	w.Write(b)
}

// writeJSONOr writes v as JSON, or an error of status code if it cannot.
func writeJSONOr(w http.ResponseWriter, v any, failure string, code int) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, fmt.Sprintf("%s. %v", failure, err), code)
		return
	}
	w.Write(b)
}
