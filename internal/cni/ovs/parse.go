package ovs

import (
	"encoding/json"
	"fmt"
)

// table is ovs-vsctl's --format=json output.
type table struct {
	Headings []string            `json:"headings"`
	Data     [][]json.RawMessage `json:"data"`
}

// parseInterfaces reads rows of the columns name and external_ids (--data=json), in any order.
func parseInterfaces(out []byte) ([]Interface, error) {
	var t table
	if err := json.Unmarshal(out, &t); err != nil {
		return nil, fmt.Errorf("parsing ovs-vsctl output: %w", err)
	}
	nameCol, idsCol := -1, -1
	for i, h := range t.Headings {
		switch h {
		case "name":
			nameCol = i
		case "external_ids":
			idsCol = i
		}
	}
	if nameCol < 0 || idsCol < 0 {
		return nil, fmt.Errorf("parsing ovs-vsctl output: columns name and external_ids missing in %v", t.Headings)
	}
	var out2 []Interface
	for _, row := range t.Data {
		if len(row) <= max(nameCol, idsCol) {
			return nil, fmt.Errorf("parsing ovs-vsctl output: short row %d", len(row))
		}
		var name string
		if err := json.Unmarshal(row[nameCol], &name); err != nil {
			return nil, fmt.Errorf("parsing ovs-vsctl output: interface name: %w", err)
		}
		ids, err := parseMap(row[idsCol])
		if err != nil {
			return nil, fmt.Errorf("parsing ovs-vsctl output: external_ids of %s: %w", name, err)
		}
		out2 = append(out2, Interface{Name: name, ExternalIDs: ids})
	}
	return out2, nil
}

// parseMap reads an OVSDB map in JSON notation: ["map", [[key, value], ...]].
func parseMap(raw json.RawMessage) (map[string]string, error) {
	var pair []json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return nil, fmt.Errorf("not an OVSDB map: %s", raw)
	}
	var tag string
	if err := json.Unmarshal(pair[0], &tag); err != nil || tag != "map" {
		return nil, fmt.Errorf("not an OVSDB map: %s", raw)
	}
	var kvs [][2]string
	if err := json.Unmarshal(pair[1], &kvs); err != nil {
		return nil, fmt.Errorf("not a string map: %w", err)
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv[0]] = kv[1]
	}
	return m, nil
}
