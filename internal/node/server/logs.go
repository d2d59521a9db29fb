package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func (s *Server) logPath(ns, pod, container string, previous bool) (string, error) {
	wp, err := s.pod(ns, pod)
	if err != nil {
		return "", err
	}
	// Only a container of this pod: the name becomes a file name.
	p := wp.Pod
	if !slices.ContainsFunc(append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...),
		func(c corev1.Container) bool { return c.Name == container }) {
		return "", fmt.Errorf("container %q is not valid for pod %q", container, pod)
	}
	name := container + ".log"
	if previous {
		name = container + ".previous.log"
	}
	path := filepath.Join(wp.Dir, name)
	if _, err := os.Stat(path); err != nil {
		if previous {
			return "", fmt.Errorf("previous terminated container %q in pod %q not found", container, pod)
		}
		why := ""
		if t := wp.Exec; t != nil && t.Waiting[container] != "" {
			why = ": " + t.Waiting[container]
		}
		return "", fmt.Errorf("container %q in pod %q is waiting to start%s", container, pod, why)
	}
	return path, nil
}

func (s *Server) serveLogs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	path, err := s.logPath(r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container"), q.Get("previous") == "true")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	opts := logOptions{timestamps: q.Get("timestamps") == "true", tail: -1, limit: -1}
	if v, err := strconv.Atoi(q.Get("tailLines")); err == nil {
		opts.tail = v
	}
	if v, err := strconv.Atoi(q.Get("limitBytes")); err == nil {
		opts.limit = v
	}
	if v, err := strconv.Atoi(q.Get("sinceSeconds")); err == nil {
		opts.since = time.Now().Add(-time.Duration(v) * time.Second)
	}
	if v, err := time.Parse(time.RFC3339, q.Get("sinceTime")); err == nil {
		opts.since = v
	}
	w.Header().Set("Content-Type", "text/plain")
	fw := &flushWriter{w: w}
	offset, err := writeLogs(fw, f, opts)
	if err != nil || q.Get("follow") != "true" {
		return
	}
	// Follow until the client goes or the container stops writing to
	// this file (it exited, or restarted into a new one).
	for {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
		st, err := os.Stat(path)
		if err != nil || st.Size() < offset {
			return
		}
		if st.Size() == offset {
			if !s.node.LogActive(path) {
				return
			}
			continue
		}
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return
		}
		opts.tail = -1
		n, err := writeLogs(fw, f, opts)
		if err != nil {
			return
		}
		offset += n
	}
}

type logOptions struct {
	timestamps  bool
	tail, limit int
	since       time.Time
}

// writeLogs turns CRI log lines into what kubectl logs prints and returns
// how many bytes of the file it consumed.
func writeLogs(w io.Writer, r io.Reader, o logOptions) (int64, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	consumed := int64(bytes.LastIndexByte(data, '\n') + 1)
	lines := strings.Split(string(data[:consumed]), "\n")
	lines = lines[:len(lines)-1]
	if o.tail >= 0 && len(lines) > o.tail {
		lines = lines[len(lines)-o.tail:]
	}
	var out bytes.Buffer
	for _, line := range lines {
		ts, rest, _ := strings.Cut(line, " ")
		_, rest, _ = strings.Cut(rest, " ") // stream
		_, msg, _ := strings.Cut(rest, " ") // F or P
		if !o.since.IsZero() {
			if t, err := time.Parse(time.RFC3339Nano, ts); err == nil && t.Before(o.since) {
				continue
			}
		}
		if o.timestamps {
			out.WriteString(ts + " ")
		}
		out.WriteString(msg + "\n")
	}
	b := out.Bytes()
	if o.limit >= 0 && len(b) > o.limit {
		b = b[:o.limit]
	}
	_, err = w.Write(b)
	return consumed, err
}

type flushWriter struct{ w http.ResponseWriter }

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return n, err
}
