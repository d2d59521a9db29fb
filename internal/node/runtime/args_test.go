package runtime

import (
	"reflect"
	"testing"
)

// TestArgsRoundTrip: what Args writes, the parsers read back the same.
func TestArgsRoundTrip(t *testing.T) {
	cases := []ExecOptions{
		{Netns: "svcnet-x-node-1-0a1b2c3d", Hostname: "web-0", ResolvConf: "/p/resolv.conf", Hosts: "/p/hosts", HostnameFile: "/p/hostname", Dir: "/srv", Argv: []string{"sh", "-c", "echo --not-a-flag"}},
		{Netns: "n", PID: PIDOwn, IPC: "/p/ns/ipc", UTS: "/p/ns/uts", Shm: "/p/ns/shm", Argv: []string{"sleep", "1"},
			Cgroups: []string{"/sys/fs/cgroup/memory/svcnet-x/cgroup.procs", "/sys/fs/cgroup/cpu/svcnet-x/cgroup.procs"}},
		{Netns: "n", PID: "/proc/7/ns/pid", Argv: []string{"true"}, Join: 4242, Security: &Security{UID: 1234, GID: 1234, ReadOnlyHost: true, RootLayer: "/p/layer", Layers: []string{"/s/a", "/s/b"}}},
	}
	for _, want := range cases {
		got, err := ParseExecArgs(want.Args()[2:])
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("pod-exec round trip:\n got %+v\nwant %+v", got, want)
		}
		shim := ShimOptions{StateDir: "/p/c-1", Log: "/p/c.log", Stdio: Stdio{Stdin: true, TTY: true}, Exec: want}
		gotShim, err := ParseShimArgs(shim.Args()[2:])
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gotShim, shim) {
			t.Errorf("container-shim round trip:\n got %+v\nwant %+v", gotShim, shim)
		}
	}
	if _, err := ParseShimArgs([]string{"--state", "/p", "--", "sh"}); err == nil {
		t.Error("a shim command line without pod-exec's was read")
	}
}
