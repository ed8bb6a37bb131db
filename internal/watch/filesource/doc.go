// Package filesource is the file source of package watch (--kipvs-source-file): a
// watch.Source that serves Services, EndpointSlices, an optional Node and optional
// ServiceCIDRs from a YAML or JSON stream in a file, and re-reads the file when it changes
// (Source). decode.go turns a revision of the file into a watch.State, skipping the objects
// that are wrong (DecodeIssue); file.go polls the file, reads a settled revision and hands a
// good one to its watch.Store whole (watch.Replacer), which gives the consumer the same
// semantics as the API source. The file's format is docs/source-file.md's.
package filesource
