package annotations

import (
	"encoding/json"
	"fmt"
	"unsafe"
)

// Encode renders v as an annotation value.
func Encode(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Decode reads the annotation key of annos into v. ok is false when the annotation is absent;
// a present but malformed value is an error that names the key.
func Decode(annos map[string]string, key string, v any) (ok bool, err error) {
	raw, ok := annos[key]
	if !ok {
		return false, nil
	}
	// The decoder reads the value without keeping or changing it: no copy of it (the resync decodes every
	// pod's annotation, and the copies were most of its garbage).
	if err := json.Unmarshal(unsafe.Slice(unsafe.StringData(raw), len(raw)), v); err != nil {
		return true, fmt.Errorf("annotation %s is not valid JSON for its type: %w", key, err)
	}
	return true, nil
}

// Changes returns the annotation updates (value, or nil to delete) needed to make annos hold want;
// it is empty when nothing differs, so callers can skip the write. annos may hold compact values
// (CompactPort), as a cached pod does.
func Changes(annos map[string]string, want map[string]*string) map[string]any {
	out := map[string]any{}
	for k, v := range want {
		cur, has := annos[k]
		switch {
		case v == nil && has:
			out[k] = nil
		case v != nil && (!has || !Same(cur, *v)):
			out[k] = *v
		}
	}
	return out
}

// MergePatch builds a JSON merge patch of metadata.annotations from Changes.
func MergePatch(changes map[string]any) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": changes}})
}
