// Package fieldguard keeps hand-written comparisons complete. Check changes a populated
// value one field at a time (exported and unexported, recursing into nested structs,
// pointers, slice elements and map entries, and changing lengths and map keys) and expects
// the comparison to notice every change; CheckPresence sets one top-level field at a time
// on a zero value and expects an emptiness check to notice it. A field a comparison leaves
// out on purpose is listed with the reason, so a field added to the type fails the guard
// until someone decides whether it counts.
//
// netip.Addr, netip.Prefix and netip.AddrPort are leaves (changed to another valid value);
// a func, chan or unsafe pointer field cannot be changed and is reported, as is a nil
// pointer or an empty slice or map in the base value (populate it, or nothing inside it
// is checked).
package fieldguard
