package main

import (
	"fmt"
	"strings"
)

// parseLdd returns the files in ldd's output, in its order: each library it resolved
// ("libssl.so.3 => /lib/x86_64-linux-gnu/libssl.so.3 (0x...)") and the dynamic loader
// ("/lib64/ld-linux-x86-64.so.2 (0x...)"). The vDSO ("linux-vdso.so.1 (0x...)") has no file: the kernel
// maps it. A library ldd could not find is an error, since the image would not run without it.
func parseLdd(out string) ([]string, error) {
	var paths, missing []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line == "statically linked" || line == "not a dynamic executable" {
			continue
		}
		lib, target, resolved := strings.Cut(line, "=>")
		if resolved {
			target = strings.TrimSpace(target)
			if strings.HasPrefix(target, "not found") {
				missing = append(missing, strings.TrimSpace(lib))
				continue
			}
			line = target
		}
		p, _, _ := strings.Cut(line, " (")
		if strings.HasPrefix(p, "/") {
			paths = append(paths, p)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("libraries not found: %s", strings.Join(missing, ", "))
	}
	return paths, nil
}
