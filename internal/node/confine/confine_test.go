package confine

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/svcnet/svcnet/internal/node/runtime"
)

func TestFor(t *testing.T) {
	uid := types.UID("0f5cdd1a-8a4b-4c9e-9d6e-3b1a2c4d5e6f")
	const def = 201234 // the pod's user, as the node gave it
	type pod = corev1.PodSpec
	ctr := func(sc *corev1.SecurityContext, mounts ...corev1.VolumeMount) corev1.Container {
		return corev1.Container{Name: "c", SecurityContext: sc, VolumeMounts: mounts}
	}
	caps := func(add, drop []corev1.Capability) *corev1.SecurityContext {
		return &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: add, Drop: drop}}
	}
	cases := []struct {
		name    string
		pod     pod
		c       corev1.Container
		want    runtime.Security
		wantErr string
	}{
		{name: "nothing asked: nobody, no capabilities, read-only machine",
			c:    ctr(nil),
			want: runtime.Security{ReadOnlyHost: true, UID: def, GID: def, OwnsRoot: true, NoNewPrivs: true}},
		{name: "pod runAsUser, container overrides group",
			pod:  pod{SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}},
			c:    ctr(&corev1.SecurityContext{RunAsGroup: ptr.To[int64](3000)}),
			want: runtime.Security{ReadOnlyHost: true, UID: 1000, GID: 3000, NoNewPrivs: true}},
		{name: "runAsUser alone: the group follows the user",
			c:    ctr(&corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}),
			want: runtime.Security{ReadOnlyHost: true, UID: 1000, GID: 1000, NoNewPrivs: true}},
		{name: "supplemental groups and fsGroup, deduplicated and sorted",
			pod: pod{SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000),
				SupplementalGroups: []int64{5000, 4000, 1000}, FSGroup: ptr.To[int64](2000)}},
			c:    ctr(nil),
			want: runtime.Security{ReadOnlyHost: true, UID: 1000, GID: 1000, Groups: []uint32{2000, 4000, 5000}, NoNewPrivs: true}},
		{name: "root needs privileged",
			c:       ctr(&corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}),
			wantErr: "needs privileged"},
		{name: "the root group too",
			c:       ctr(&corev1.SecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](0)}),
			wantErr: "needs privileged"},
		{name: "fsGroup root too",
			pod:     pod{SecurityContext: &corev1.PodSecurityContext{FSGroup: ptr.To[int64](0)}},
			c:       ctr(nil),
			wantErr: "needs privileged"},
		{name: "privileged as a user of its own",
			c:    ctr(&corev1.SecurityContext{Privileged: ptr.To(true), RunAsUser: ptr.To[int64](1000)}),
			want: runtime.Security{UID: 1000, GID: 1000, Caps: runtime.AllCaps()}},
		{name: "runAsNonRoot with root",
			pod:     pod{SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)}},
			c:       ctr(&corev1.SecurityContext{Privileged: ptr.To(true)}),
			wantErr: "runAsNonRoot"},
		{name: "runAsNonRoot with the default user is fine",
			c:    ctr(&corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}),
			want: runtime.Security{ReadOnlyHost: true, UID: def, GID: def, OwnsRoot: true, NoNewPrivs: true}},
		{name: "add a capability (both spellings), drop ALL first as CoreDNS does",
			c: ctr(caps([]corev1.Capability{"NET_BIND_SERVICE", "CAP_NET_RAW"}, []corev1.Capability{"ALL"})),
			want: runtime.Security{ReadOnlyHost: true, UID: def, GID: def, OwnsRoot: true, NoNewPrivs: true,
				Caps: []string{"CAP_NET_BIND_SERVICE", "CAP_NET_RAW"}}},
		{name: "drop wins over add unless it is ALL",
			c:    ctr(caps([]corev1.Capability{"NET_ADMIN", "NET_RAW"}, []corev1.Capability{"net_raw"})),
			want: runtime.Security{ReadOnlyHost: true, UID: def, GID: def, OwnsRoot: true, NoNewPrivs: true, Caps: []string{"CAP_NET_ADMIN"}}},
		{name: "hostNetwork: NET_BIND_SERVICE by default",
			pod:  pod{HostNetwork: true},
			c:    ctr(nil),
			want: runtime.Security{ReadOnlyHost: true, UID: def, GID: def, OwnsRoot: true, NoNewPrivs: true, Caps: []string{"CAP_NET_BIND_SERVICE"}}},
		{name: "hostNetwork: the default with what is added",
			pod:  pod{HostNetwork: true},
			c:    ctr(caps([]corev1.Capability{"NET_RAW"}, nil)),
			want: runtime.Security{ReadOnlyHost: true, UID: def, GID: def, OwnsRoot: true, NoNewPrivs: true, Caps: []string{"CAP_NET_BIND_SERVICE", "CAP_NET_RAW"}}},
		{name: "hostNetwork: drop ALL removes the default",
			pod:  pod{HostNetwork: true},
			c:    ctr(caps(nil, []corev1.Capability{"ALL"})),
			want: runtime.Security{ReadOnlyHost: true, UID: def, GID: def, OwnsRoot: true, NoNewPrivs: true}},
		{name: "hostNetwork: dropping it removes the default",
			pod:  pod{HostNetwork: true},
			c:    ctr(caps(nil, []corev1.Capability{"NET_BIND_SERVICE"})),
			want: runtime.Security{ReadOnlyHost: true, UID: def, GID: def, OwnsRoot: true, NoNewPrivs: true}},
		{name: "unknown capability",
			c:       ctr(caps([]corev1.Capability{"FLY"}, nil)),
			wantErr: `unknown capability "FLY"`},
		{name: "allowPrivilegeEscalation true lifts no_new_privs",
			c:    ctr(&corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true)}),
			want: runtime.Security{ReadOnlyHost: true, UID: def, GID: def, OwnsRoot: true}},
		{name: "privileged: root, every capability, the machine writable",
			c:    ctr(&corev1.SecurityContext{Privileged: ptr.To(true)}),
			want: runtime.Security{UID: 0, GID: 0, Caps: runtime.AllCaps()}},
		{name: "privileged without escalation is a contradiction",
			c:       ctr(&corev1.SecurityContext{Privileged: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false)}),
			wantErr: "contradict"},
		{name: "hostPath is read-only for a confined container; emptyDir in the pod's directory",
			pod: pod{Volumes: []corev1.Volume{
				{Name: "cfg", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc/svcnet/x.conf"}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}},
			c: ctr(nil, corev1.VolumeMount{Name: "cfg", MountPath: "/run/cfg/x.conf"}, corev1.VolumeMount{Name: "scratch", MountPath: "/data/"}),
			want: runtime.Security{ReadOnlyHost: true, UID: def, GID: def, OwnsRoot: true, NoNewPrivs: true, Mounts: []runtime.Mount{
				{Source: "/etc/svcnet/x.conf", Target: "/run/cfg/x.conf", ReadOnly: true},
				{Source: "/pods/p/volumes/scratch", Target: "/data"}}}},
		{name: "a secret volume, read-only whatever the mount says",
			pod:  pod{Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "x"}}}}},
			c:    ctr(nil, corev1.VolumeMount{Name: "s", MountPath: "/s"}),
			want: runtime.Security{ReadOnlyHost: true, UID: def, GID: def, OwnsRoot: true, NoNewPrivs: true, Mounts: []runtime.Mount{{Source: "/pods/p/volumes/s", Target: "/s", ReadOnly: true}}}},
		{name: "unsupported volume type",
			pod: pod{Volumes: []corev1.Volume{{Name: "n", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "x", Path: "/"}}}}},
			c:   ctr(nil, corev1.VolumeMount{Name: "n", MountPath: "/n"}), wantErr: "only hostPath, emptyDir"},
		{name: "mount of a missing volume",
			c: ctr(nil, corev1.VolumeMount{Name: "nope", MountPath: "/x"}), wantErr: "names no volume"},
		{name: "subPath",
			pod: pod{Volumes: []corev1.Volume{{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}},
			c:   ctr(nil, corev1.VolumeMount{Name: "e", MountPath: "/x", SubPath: "a"}), wantErr: "subPath"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Spec: tc.pod}
			got, err := For(p, &tc.c, "/pods/p", def)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Every container, privileged or not, gets a root of its own
			// whose layer is mounted on the pod's directory.
			want := tc.want
			want.RootLayer = "/pods/p"
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestForImage: an image's user as Kubernetes takes it, within svcnet's
// defaults (root and group 0 still take privileged).
func TestForImage(t *testing.T) {
	uid := types.UID("5b1c0e8e-2f9a-4d3b-8c7e-1a2b3c4d5e6f")
	const def = 201234 // the pod's user, as the node gave it
	app := &ImageUser{Spec: "app", UID: 1234, GID: 2345}
	type pod = corev1.PodSpec
	cases := []struct {
		name    string
		pod     pod
		sc      *corev1.SecurityContext
		img     *ImageUser
		uid     uint32
		gid     uint32
		owns    bool
		groups  []uint32
		wantErr string
	}{
		{name: "no image user: the pod's default user", uid: def, gid: def, owns: true},
		{name: "hostUsers: false is refused, not ignored", pod: pod{HostUsers: ptr.To(false)}, wantErr: "hostUsers: false"},
		{name: "the image's memberships, not root's group", img: &ImageUser{Spec: "app", UID: 1234, GID: 2345, Groups: []int64{0, 29, 10}},
			pod: pod{SecurityContext: &corev1.PodSecurityContext{SupplementalGroups: []int64{10, 5555}}}, uid: 1234, gid: 2345, groups: []uint32{10, 29, 5555}},
		{name: "runAsUser: the image's memberships are not its", img: &ImageUser{Spec: "app", UID: 1234, GID: 2345, Groups: []int64{29}},
			sc: &corev1.SecurityContext{RunAsUser: ptr.To[int64](500)}, uid: 500, gid: 500},
		{name: "the image's named user and its group", img: app, uid: 1234, gid: 2345},
		{name: "runAsUser wins, its group follows it", img: app,
			sc: &corev1.SecurityContext{RunAsUser: ptr.To[int64](500)}, uid: 500, gid: 500},
		{name: "runAsGroup with the image's user", img: app,
			pod: pod{SecurityContext: &corev1.PodSecurityContext{RunAsGroup: ptr.To[int64](77)}}, uid: 1234, gid: 77},
		{name: "group 0 becomes the user's number", img: &ImageUser{Spec: "1001", UID: 1001}, uid: 1001, gid: 1001},
		{name: "image root: the default user, not root", img: &ImageUser{Spec: "root"}, uid: def, gid: def, owns: true},
		{name: "privileged: the image's root", img: &ImageUser{Spec: "0:0"},
			sc: &corev1.SecurityContext{Privileged: ptr.To(true)}, uid: 0, gid: 0},
		{name: "runAsNonRoot with the image's numeric user", img: &ImageUser{Spec: "1001:1001", UID: 1001, GID: 1001},
			sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}, uid: 1001, gid: 1001},
		{name: "runAsNonRoot and the image's root", img: &ImageUser{Spec: "0"},
			sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}, wantErr: "image will run as root"},
		{name: "runAsNonRoot and a named image user", img: app,
			pod: pod{SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}}, wantErr: "non-numeric user (app)"},
		{name: "runAsNonRoot and runAsUser: the image is not asked", img: &ImageUser{Spec: "0"},
			sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](42)}, uid: 42, gid: 42},
		{name: "runAsNonRoot, no image user: the default user", sc: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			uid: def, gid: def, owns: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Spec: tc.pod}
			got, err := ForImage(p, &corev1.Container{Name: "c", SecurityContext: tc.sc}, "/pods/p", def, tc.img)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.UID != tc.uid || got.GID != tc.gid || got.OwnsRoot != tc.owns || !slices.Equal(got.Groups, tc.groups) {
				t.Errorf("user %d:%d groups %v owns root %v, want %d:%d %v %v", got.UID, got.GID, got.Groups, got.OwnsRoot, tc.uid, tc.gid, tc.groups, tc.owns)
			}
		})
	}
}
