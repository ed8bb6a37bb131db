package ipset

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kipvs/kipvs/internal/kerr"
)

// Primitives are the single kernel requests Replace is built from. The real implementation
// and the fake (ipsettest) both provide them, so Replace runs the same steps (and meets
// injected faults at the same points) on both.
type Primitives interface {
	// ListSet returns a set with its members; kerr.ErrNotFound when absent.
	ListSet(name string) (*SetInfo, error)
	// CreateSet makes a normalized set; kerr.ErrExists when the name is taken.
	CreateSet(s Set) error
	DestroySet(name string) error
	// AddEntries adds members already checked against s with Prepare.
	AddEntries(s Set, entries []Entry) error
	SwapSets(a, b string) error
}

// ReplaceWith implements Interface.Replace on p. The caller serializes calls per instance,
// since two concurrent Replaces of one set would share its temporary set.
func ReplaceWith(p Primitives, s Set, entries []Entry) error {
	s, err := s.Normalize()
	if err != nil {
		return err
	}
	entries, err = Prepare(s, entries)
	if err != nil {
		return err
	}
	want := make(map[Entry]string, len(entries)) // member -> comment; a repeated member's last comment wins, as with add -exist
	for _, e := range entries {
		want[e.Key()] = e.Comment
	}

	cur, err := p.ListSet(s.Name)
	switch {
	case kerr.IsNotFound(err):
		// Create the set empty and swap the content in like for any other set, so that
		// the set appears with its content in one step.
		if err := p.CreateSet(s); err != nil {
			return fmt.Errorf("ipset: replace %s: %w", s.Name, err)
		}
	case err != nil:
		return fmt.Errorf("ipset: replace %s: %w", s.Name, err)
	case cur.Type != s.Type || cur.Family != s.Family:
		return fmt.Errorf("ipset: replace %s: the set exists as %s, want %s: %w", s.Name, cur.Set.String(), s.String(), kerr.ErrExists)
	case compatible(cur.Set, s) && sameMembers(cur.Entries, want):
		return nil
	}

	tmp := s
	tmp.Name = TempName(s.Name)
	if err := p.DestroySet(tmp.Name); err != nil && !kerr.IsNotFound(err) {
		return fmt.Errorf("ipset: replace %s: remove leftover temporary set: %w", s.Name, err)
	}
	if err := p.CreateSet(tmp); err != nil {
		return fmt.Errorf("ipset: replace %s: %w", s.Name, err)
	}
	fill := make([]Entry, 0, len(want))
	for e, c := range want {
		e.Comment = c
		fill = append(fill, e)
	}
	slices.SortFunc(fill, CompareEntries) // a fixed order, so an injected fault hits the same member every run
	if err := p.AddEntries(tmp, fill); err != nil {
		return cleanup(p, s.Name, tmp.Name, err)
	}
	if err := p.SwapSets(tmp.Name, s.Name); err != nil {
		return cleanup(p, s.Name, tmp.Name, err)
	}
	if err := p.DestroySet(tmp.Name); err != nil {
		return fmt.Errorf("ipset: replace %s: content swapped in, but: %w", s.Name, err)
	}
	return nil
}

// cleanup removes the temporary set after a failed step, keeping the step's error first.
func cleanup(p Primitives, name, tmp string, stepErr error) error {
	err := fmt.Errorf("ipset: replace %s: %w", name, stepErr)
	if derr := p.DestroySet(tmp); derr != nil {
		return errors.Join(err, fmt.Errorf("ipset: replace %s: remove temporary set: %w", name, derr))
	}
	return err
}

// sameMembers reports whether have holds exactly the members (and comments) of want.
func sameMembers(have []Entry, want map[Entry]string) bool {
	if len(have) != len(want) {
		return false
	}
	for _, e := range have {
		c, ok := want[e.Key()]
		if !ok || c != e.Comment {
			return false
		}
	}
	return true
}
