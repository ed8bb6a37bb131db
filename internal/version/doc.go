// Package version holds build information stamped in with -ldflags -X.
package version
