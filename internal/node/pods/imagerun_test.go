package pods

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/svcnet/svcnet/internal/imagestore"
)

// TestImageArgv: Kubernetes' rules for command and args over an image's
// entrypoint and cmd.
func TestImageArgv(t *testing.T) {
	full := imagestore.Config{Entrypoint: []string{"/ep", "-x"}, Cmd: []string{"c1", "c2"}}
	cases := []struct {
		name          string
		cfg           imagestore.Config
		command, args []string
		want          []string // nil: an error
	}{
		{"neither: entrypoint and cmd", full, nil, nil, []string{"/ep", "-x", "c1", "c2"}},
		{"args: entrypoint and args", full, nil, []string{"a"}, []string{"/ep", "-x", "a"}},
		{"command: replaces both, cmd ignored", full, []string{"/cmd"}, nil, []string{"/cmd"}},
		{"command and args", full, []string{"/cmd"}, []string{"a", "b"}, []string{"/cmd", "a", "b"}},
		{"cmd alone", imagestore.Config{Cmd: []string{"/bin/sh"}}, nil, nil, []string{"/bin/sh"}},
		{"args, no entrypoint: args alone", imagestore.Config{Cmd: []string{"/bin/sh"}}, nil, []string{"/a"}, []string{"/a"}},
		{"entrypoint alone", imagestore.Config{Entrypoint: []string{"/ep"}}, nil, nil, []string{"/ep"}},
		{"nothing anywhere", imagestore.Config{}, nil, nil, nil},
		{"empty command and args are unset", imagestore.Config{}, []string{}, []string{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := imageArgv(tc.cfg, tc.command, tc.args)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestImageWorkingDir(t *testing.T) {
	for _, tc := range []struct{ container, image, want string }{
		{"/c", "/i", "/c"}, {"", "/i", "/i"}, {"", "", "/"},
	} {
		got := imageWorkingDir(imagestore.Config{WorkingDir: tc.image}, &corev1.Container{WorkingDir: tc.container})
		if got != tc.want {
			t.Errorf("container %q image %q: %q, want %q", tc.container, tc.image, got, tc.want)
		}
	}
}

func TestImageBaseEnv(t *testing.T) {
	str := func(env []corev1.EnvVar) []string {
		var out []string
		for _, e := range env {
			out = append(out, e.Name+"="+e.Value)
		}
		return out
	}
	for _, tc := range []struct {
		env  []string
		want []string
	}{
		{nil, []string{"PATH=" + defaultPath, "HOME=/home/u"}},
		{[]string{"PATH=/bin", "A=1=2", "HOME=/h", "bad"}, []string{"PATH=/bin", "A=1=2", "HOME=/h"}},
		{[]string{"A=x", "A=y"}, []string{"PATH=" + defaultPath, "A=y", "HOME=/home/u"}},
	} {
		if got := str(imageBaseEnv(imagestore.Config{Env: tc.env}, "/home/u")); !slices.Equal(got, tc.want) {
			t.Errorf("image env %q: %q, want %q", tc.env, got, tc.want)
		}
	}
}
