package nft

import (
	"encoding/json"
	"fmt"
	"strconv"

	"sigs.k8s.io/knftables"
)

// ParseSetElements reads the sets of `nft --json list table` output: set name -> its
// elements, each key as knftables lists it (a concatenation's fields in order, a prefix as
// "addr/len", a range as "first-last", a number in decimal). Maps and the other objects are
// skipped.
func ParseSetElements(out []byte) (map[string][]*knftables.Element, error) {
	var doc struct {
		NFTables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("nft --json listing: %w", err)
	}
	sets := map[string][]*knftables.Element{}
	for _, obj := range doc.NFTables {
		raw, ok := obj["set"]
		if !ok {
			continue
		}
		var set struct {
			Name string `json:"name"`
			Elem []any  `json:"elem"`
		}
		if err := json.Unmarshal(raw, &set); err != nil {
			return nil, fmt.Errorf("nft --json listing: set: %w", err)
		}
		els := make([]*knftables.Element, 0, len(set.Elem))
		for _, e := range set.Elem {
			key, err := elementKey(e)
			if err != nil {
				return nil, fmt.Errorf("nft --json listing: set %s: %w", set.Name, err)
			}
			els = append(els, &knftables.Element{Set: set.Name, Key: key})
		}
		sets[set.Name] = els
	}
	return sets, nil
}

// elementKey reads one element of a set's "elem" list as its key's fields.
func elementKey(v any) ([]string, error) {
	if obj, ok := v.(map[string]any); ok {
		if elem, ok := obj["elem"].(map[string]any); ok { // an element with a comment, counter or timeout
			v = elem["val"]
		}
	}
	if obj, ok := v.(map[string]any); ok {
		if parts, ok := obj["concat"].([]any); ok {
			key := make([]string, 0, len(parts))
			for _, p := range parts {
				f, err := field(p)
				if err != nil {
					return nil, err
				}
				key = append(key, f)
			}
			return key, nil
		}
	}
	f, err := field(v)
	if err != nil {
		return nil, err
	}
	return []string{f}, nil
}

// field reads one field of an element: a string, a number, a prefix or a range.
func field(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case map[string]any:
		if p, ok := v["prefix"].(map[string]any); ok {
			addr, aok := p["addr"].(string)
			n, nok := p["len"].(float64)
			if aok && nok {
				return addr + "/" + strconv.FormatFloat(n, 'f', -1, 64), nil
			}
		}
		if r, ok := v["range"].([]any); ok && len(r) == 2 {
			first, err := field(r[0])
			if err != nil {
				return "", err
			}
			last, err := field(r[1])
			if err != nil {
				return "", err
			}
			return first + "-" + last, nil
		}
	}
	return "", fmt.Errorf("element field %v: not a string, number, prefix or range", v)
}
