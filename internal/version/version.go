// Package version holds build information stamped in with -ldflags -X.
package version

import (
	"fmt"
	"runtime"
)

// Stamped at build time by the Makefile (-ldflags "-X github.com/kipvs/kipvs/internal/version.Version=...").
var (
	Version   = "dev"
	GitCommit = "unknown"
	BuildDate = "unknown"
)

// Info is the build information of this binary.
type Info struct {
	Version   string `json:"version"`
	GitCommit string `json:"gitCommit"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the build information.
func Get() Info {
	return Info{
		Version:   Version,
		GitCommit: GitCommit,
		BuildDate: BuildDate,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// String renders the information as one line per field, as `kipvs version` prints it.
func (i Info) String() string {
	return fmt.Sprintf("kipvs %s\n  git commit: %s\n  build date: %s\n  go version: %s\n  platform:   %s\n",
		i.Version, i.GitCommit, i.BuildDate, i.GoVersion, i.Platform)
}
