package apis

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
)

// addParameterConversions lets the API server read the query parameters
// of pods/log, exec, portforward and proxy (and services/proxy) into
// their option types.
func addParameterConversions(s *runtime.Scheme) error {
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.PodLogOptions)(nil), func(a, b any, _ conversion.Scope) error {
		return podLogOptions(*a.(*url.Values), b.(*corev1.PodLogOptions))
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.PodExecOptions)(nil), func(a, b any, _ conversion.Scope) error {
		return podExecOptions(*a.(*url.Values), b.(*corev1.PodExecOptions))
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.PodAttachOptions)(nil), func(a, b any, _ conversion.Scope) error {
		return podAttachOptions(*a.(*url.Values), b.(*corev1.PodAttachOptions))
	}); err != nil {
		return err
	}
	// The proxies' path (the rest of the URL, put there by the server).
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.PodProxyOptions)(nil), func(a, b any, _ conversion.Scope) error {
		b.(*corev1.PodProxyOptions).Path = a.(*url.Values).Get("path")
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.ServiceProxyOptions)(nil), func(a, b any, _ conversion.Scope) error {
		b.(*corev1.ServiceProxyOptions).Path = a.(*url.Values).Get("path")
		return nil
	}); err != nil {
		return err
	}
	return s.AddConversionFunc((*url.Values)(nil), (*corev1.PodPortForwardOptions)(nil), func(a, b any, _ conversion.Scope) error {
		o := b.(*corev1.PodPortForwardOptions)
		for _, v := range (*a.(*url.Values))["ports"] {
			p, err := strconv.ParseInt(v, 10, 32)
			if err != nil || p < 1 || p > 65535 {
				return fmt.Errorf("ports: %q is not a port number", v)
			}
			o.Ports = append(o.Ports, int32(p))
		}
		return nil
	})
}

func boolParam(q url.Values, k string) (bool, error) {
	v := q.Get(k)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s: %w", k, err)
	}
	return b, nil
}

func intParam(q url.Values, k string) (*int64, error) {
	v := q.Get(k)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	return &n, nil
}

func podLogOptions(q url.Values, o *corev1.PodLogOptions) error {
	var err error
	o.Container = q.Get("container")
	if o.Follow, err = boolParam(q, "follow"); err != nil {
		return err
	}
	if o.Previous, err = boolParam(q, "previous"); err != nil {
		return err
	}
	if o.Timestamps, err = boolParam(q, "timestamps"); err != nil {
		return err
	}
	if o.InsecureSkipTLSVerifyBackend, err = boolParam(q, "insecureSkipTLSVerifyBackend"); err != nil {
		return err
	}
	if o.SinceSeconds, err = intParam(q, "sinceSeconds"); err != nil {
		return err
	}
	if o.TailLines, err = intParam(q, "tailLines"); err != nil {
		return err
	}
	if o.LimitBytes, err = intParam(q, "limitBytes"); err != nil {
		return err
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return fmt.Errorf("sinceTime: %w", err)
		}
		mt := metav1.NewTime(t)
		o.SinceTime = &mt
	}
	return nil
}

func podExecOptions(q url.Values, o *corev1.PodExecOptions) error {
	var err error
	o.Container = q.Get("container")
	o.Command = q["command"]
	for k, dst := range map[string]*bool{"stdin": &o.Stdin, "stdout": &o.Stdout, "stderr": &o.Stderr, "tty": &o.TTY} {
		if *dst, err = boolParam(q, k); err != nil {
			return err
		}
	}
	return nil
}

func podAttachOptions(q url.Values, o *corev1.PodAttachOptions) error {
	var err error
	o.Container = q.Get("container")
	for k, dst := range map[string]*bool{"stdin": &o.Stdin, "stdout": &o.Stdout, "stderr": &o.Stderr, "tty": &o.TTY} {
		if *dst, err = boolParam(q, k); err != nil {
			return err
		}
	}
	return nil
}
