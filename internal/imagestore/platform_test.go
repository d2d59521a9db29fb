package imagestore

import (
	"errors"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func TestPlatformMatches(t *testing.T) {
	p := func(os, arch, variant string) v1.Platform {
		return v1.Platform{OS: os, Architecture: arch, Variant: variant}
	}
	for _, tc := range []struct {
		have, want v1.Platform
		match      bool
	}{
		{p("linux", "amd64", ""), p("linux", "amd64", ""), true},
		{p("linux", "arm64", "v8"), p("linux", "arm64", ""), true},
		{p("linux", "amd64", "v1"), p("linux", "amd64", ""), true},
		{p("linux", "arm", "v7"), p("linux", "arm", "v7"), true},
		{p("linux", "arm", ""), p("linux", "arm", "v7"), true},
		{p("linux", "arm", "v6"), p("linux", "arm", "v7"), false},
		{p("linux", "arm64", ""), p("linux", "amd64", ""), false},
		{p("windows", "amd64", ""), p("linux", "amd64", ""), false},
	} {
		if got := platformMatches(tc.have, tc.want); got != tc.match {
			t.Errorf("platformMatches(%s, %s) = %v", tc.have.String(), tc.want.String(), got)
		}
	}
}

func TestChoosePlatform(t *testing.T) {
	desc := func(digit string, p *v1.Platform) v1.Descriptor {
		return v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Digest:    v1.Hash{Algorithm: "sha256", Hex: digit},
			Platform:  p,
		}
	}
	im := &v1.IndexManifest{Manifests: []v1.Descriptor{
		desc("1", &v1.Platform{OS: "linux", Architecture: "arm", Variant: "v6"}),
		desc("2", &v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}),
		desc("3", nil), // no platform: linux/amd64
		desc("4", &v1.Platform{OS: "unknown", Architecture: "unknown"}),
	}}
	for _, tc := range []struct {
		want   v1.Platform
		digest string
	}{
		{v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}, "2"},
		{v1.Platform{OS: "linux", Architecture: "amd64"}, "3"},
		{v1.Platform{OS: "linux", Architecture: "riscv64"}, ""},
	} {
		d, err := choosePlatform("r", im, tc.want)
		if tc.digest == "" {
			if !errors.Is(err, ErrPlatform) || err.Error() != "platform not offered: r offers linux/arm/v6, linux/arm/v7, linux/amd64; this node is linux/riscv64" {
				t.Errorf("%s: %v", tc.want.String(), err)
			}
			continue
		}
		if err != nil || d.Digest.Hex != tc.digest {
			t.Errorf("%s: got %v, %v; want %s", tc.want.String(), d.Digest, err, tc.digest)
		}
	}
}
