package imagestore

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// nodePlatform is the platform this binary runs on, with the ARM variant
// it was built for (GOARM, from the build settings).
func nodePlatform() v1.Platform {
	p := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	if runtime.GOARCH == "arm" {
		p.Variant = "v7"
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "GOARM" && s.Value != "" {
					p.Variant = "v" + strings.SplitN(s.Value, ",", 2)[0]
				}
			}
		}
	}
	return p
}

// platformMatches reports whether an image for have runs on want. A
// variant left out on either side matches any; arm64's "v8" and amd64's
// "v1" are their architectures' baseline, the same as none.
func platformMatches(have, want v1.Platform) bool {
	if have.OS != want.OS || have.Architecture != want.Architecture {
		return false
	}
	hv, wv := baseVariant(have), baseVariant(want)
	return hv == "" || wv == "" || hv == wv
}

func baseVariant(p v1.Platform) string {
	if (p.Architecture == "arm64" && p.Variant == "v8") || (p.Architecture == "amd64" && p.Variant == "v1") {
		return ""
	}
	return p.Variant
}

// choosePlatform picks the first manifest of the index for want, or
// fails naming the platforms the index offers.
func choosePlatform(ref string, im *v1.IndexManifest, want v1.Platform) (v1.Descriptor, error) {
	var offered []string
	for _, d := range im.Manifests {
		if !d.MediaType.IsImage() && !d.MediaType.IsIndex() {
			continue
		}
		// A manifest without a platform is taken to be linux/amd64, as
		// registries' clients do.
		p := v1.Platform{OS: "linux", Architecture: "amd64"}
		if d.Platform != nil {
			p = *d.Platform
		}
		// Build attestations ride in indexes as "unknown/unknown".
		if p.OS == "unknown" {
			continue
		}
		if platformMatches(p, want) {
			return d, nil
		}
		offered = append(offered, p.String())
	}
	return v1.Descriptor{}, fmt.Errorf("%w: %s offers %s; this node is %s", ErrPlatform, ref, orNone(offered), want.String())
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no platform"
	}
	return strings.Join(s, ", ")
}
