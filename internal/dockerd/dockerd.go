// Package dockerd reads images from a running Docker daemon through its
// Engine API, as `docker save` does: for `svcnet load NAME`, so that an
// image built with docker build runs in a cluster without an archive
// made by hand (kind load docker-image's way).
package dockerd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// DefaultHost is where Docker's daemon listens unless DOCKER_HOST says.
const DefaultHost = "unix:///var/run/docker.sock"

// Host is the daemon's address as the docker command finds it:
// DOCKER_HOST, else DefaultHost.
func Host() string { return cmp.Or(os.Getenv("DOCKER_HOST"), DefaultHost) }

// ErrNoDaemon is what a call returns when no daemon answers at the host.
var ErrNoDaemon = errors.New("no Docker daemon answers")

// Client talks to one daemon.
type Client struct {
	host string
	base string
	http *http.Client
}

// New is a client of the daemon at host: unix:///path or tcp://host:port
// (plain HTTP; a daemon that wants TLS is refused by name).
func New(host string) (*Client, error) {
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("docker host %q: %w", host, err)
	}
	if os.Getenv("DOCKER_TLS_VERIFY") != "" {
		return nil, fmt.Errorf("docker host %s: DOCKER_TLS_VERIFY is set, and svcnet load speaks plain HTTP to a daemon only: save the image with docker save and load the archive", host)
	}
	tr := &http.Transport{ResponseHeaderTimeout: time.Minute}
	c := &Client{host: host, http: &http.Client{Transport: tr}}
	switch u.Scheme {
	case "unix":
		path := u.Path
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		c.base = "http://docker"
	case "tcp", "http":
		c.base = "http://" + u.Host
	default:
		return nil, fmt.Errorf("docker host %s: svcnet load reaches a daemon at unix:// or tcp:// addresses only", host)
	}
	return c, nil
}

// get sends GET path (with query) to the daemon.
func (c *Client) get(ctx context.Context, path string, query url.Values) (*http.Response, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w at %s: %v", ErrNoDaemon, c.host, err)
	}
	return resp, nil
}

// apiError is the daemon's answer to a failed call, its message read.
func apiError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var m struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &m) == nil && m.Message != "" {
		return fmt.Errorf("docker daemon: %s", m.Message)
	}
	return fmt.Errorf("docker daemon: %s: %s", resp.Status, strings.TrimSpace(string(body)))
}

// Has reports whether the daemon has the image name (a reference or an
// ID).
func (c *Client) Has(ctx context.Context, name string) (bool, error) {
	resp, err := c.get(ctx, "/images/"+name+"/json", nil)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound:
		return false, nil
	}
	return false, apiError(resp)
}

// Save streams the daemon's `docker save` archive of the images names;
// the caller closes it. A daemon that fails in the middle ends the
// stream early: the archive is then incomplete, which its reader finds.
func (c *Client) Save(ctx context.Context, names []string) (io.ReadCloser, error) {
	resp, err := c.get(ctx, "/images/get", url.Values{"names": names})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, apiError(resp)
	}
	return resp.Body, nil
}
