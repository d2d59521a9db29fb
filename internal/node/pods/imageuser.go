package pods

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/svcnet/svcnet/internal/imagestore"
	"github.com/svcnet/svcnet/internal/node/confine"
)

// imageUser resolves the user an image's config names ("uid",
// "uid:gid", "name", "name:group") against the image's own /etc/passwd
// and /etc/group, as containerd does: a name's group is its passwd
// entry's, a number's too if the passwd has it (else 0); a name no file
// has is an error (the kubelet's CreateContainerConfigError). nil: the
// image names no user.
func imageUser(img *imagestore.Image) (*confine.ImageUser, error) {
	spec := img.Config.User
	if spec == "" {
		return nil, nil
	}
	user, group, hasGroup := strings.Cut(spec, ":")
	u := &confine.ImageUser{Spec: spec}
	passwd, err := readIDFile(img, "/etc/passwd")
	if err != nil {
		return nil, err
	}
	name := user
	if n, ok := parseID(user); ok {
		u.UID, name = n, ""
		if e, found := findEntry(passwd, 2, user); found {
			u.GID, _ = parseID(e[3])
			name = e[0]
		}
	} else {
		e, found := findEntry(passwd, 0, user)
		if !found {
			return nil, fmt.Errorf("image %s: unable to find user %s: no matching entries in passwd file", img.Ref, user)
		}
		var ok1, ok2 bool
		u.UID, ok1 = parseID(e[2])
		u.GID, ok2 = parseID(e[3])
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("image %s: malformed passwd entry for %s", img.Ref, user)
		}
	}
	groups, err := readIDFile(img, "/etc/group")
	if err != nil {
		return nil, err
	}
	// The groups that list the user as a member, by name.
	for _, e := range groups {
		if name == "" {
			break
		}
		if slices.Contains(strings.Split(e[3], ","), name) {
			if gid, ok := parseID(e[2]); ok && !slices.Contains(u.Groups, gid) {
				u.Groups = append(u.Groups, gid)
			}
		}
	}
	if !hasGroup {
		return u, nil
	}
	if n, ok := parseID(group); ok {
		u.GID = n
		return u, nil
	}
	e, found := findEntry(groups, 0, group)
	if !found {
		return nil, fmt.Errorf("image %s: unable to find group %s: no matching entries in group file", img.Ref, group)
	}
	if u.GID, found = parseID(e[2]); !found {
		return nil, fmt.Errorf("image %s: malformed group entry for %s", img.Ref, group)
	}
	return u, nil
}

// imageHome is the home directory of uid in the image's /etc/passwd, "/"
// where it has none (runc's HOME for a user the image does not list).
func imageHome(img *imagestore.Image, uid int64) string {
	passwd, err := readIDFile(img, "/etc/passwd")
	if err != nil {
		return "/"
	}
	if e, ok := findEntry(passwd, 2, strconv.FormatInt(uid, 10)); ok && len(e) > 5 && e[5] != "" {
		return e[5]
	}
	return "/"
}

// readIDFile reads a passwd or group file of the image as the
// container will see it; an image without one has no entries.
func readIDFile(img *imagestore.Image, name string) ([][]string, error) {
	data, err := img.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", img.Ref, err)
	}
	var entries [][]string
	for line := range strings.SplitSeq(string(data), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// passwd: name:pw:uid:gid:gecos:home:shell; group: name:pw:gid:members.
		if f := strings.Split(line, ":"); len(f) >= 4 {
			entries = append(entries, f)
		}
	}
	return entries, nil
}

// findEntry is the first entry whose field is value.
func findEntry(entries [][]string, field int, value string) ([]string, bool) {
	for _, e := range entries {
		if e[field] == value {
			return e, true
		}
	}
	return nil, false
}

func parseID(s string) (int64, bool) {
	n, err := strconv.ParseUint(s, 10, 32)
	return int64(n), err == nil
}
