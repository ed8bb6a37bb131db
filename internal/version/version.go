package version

import (
	"fmt"
	"regexp"
	"runtime"
	"strings"
)

// Stamped at build time by the Makefile (-ldflags "-X github.com/kipvs/kipvs/internal/version.Version=...").
var (
	Version   = "dev"
	GitCommit = "unknown"
	BuildDate = "unknown"
	// GitTreeState is "clean" or "dirty"; when not stamped it is derived from Version (git
	// describe --dirty) and GitCommit.
	GitTreeState = ""
)

// KubeProxyCompatible is the kube-proxy release whose flags, config file, kernel objects
// and metrics kipvs matches.
const KubeProxyCompatible = "v1.34"

// Info is the build information of this binary.
type Info struct {
	Version string `json:"version"`
	// Major and Minor are Version's first two numbers ("" when Version is not vX.Y...), as
	// kubernetes_build_info labels them.
	Major        string `json:"major"`
	Minor        string `json:"minor"`
	GitCommit    string `json:"gitCommit"`
	GitTreeState string `json:"gitTreeState"`
	BuildDate    string `json:"buildDate"`
	GoVersion    string `json:"goVersion"`
	Compiler     string `json:"compiler"`
	Platform     string `json:"platform"`
	// KubeProxyCompatible is the kube-proxy release kipvs matches.
	KubeProxyCompatible string `json:"kubeProxyCompatible"`
}

var semver = regexp.MustCompile(`^v(\d+)\.(\d+)`)

// Get returns the build information.
func Get() Info {
	i := Info{
		Version:             Version,
		GitCommit:           GitCommit,
		GitTreeState:        GitTreeState,
		BuildDate:           BuildDate,
		GoVersion:           runtime.Version(),
		Compiler:            runtime.Compiler,
		Platform:            runtime.GOOS + "/" + runtime.GOARCH,
		KubeProxyCompatible: KubeProxyCompatible,
	}
	if m := semver.FindStringSubmatch(Version); m != nil {
		i.Major, i.Minor = m[1], m[2]
	}
	if i.GitTreeState == "" && GitCommit != "unknown" {
		i.GitTreeState = "clean"
		if strings.HasSuffix(Version, "-dirty") {
			i.GitTreeState = "dirty"
		}
	}
	return i
}

// String renders the information as one line per field, as `kipvs version` prints it.
func (i Info) String() string {
	return fmt.Sprintf("kipvs %s\n  git commit: %s\n  build date: %s\n  go version: %s\n  platform:   %s\n  kube-proxy compatible: %s\n",
		i.Version, i.GitCommit, i.BuildDate, i.GoVersion, i.Platform, i.KubeProxyCompatible)
}

// Short is the one line `kipvs --version` prints, in the form of kube-proxy's "Kubernetes
// vX.Y.Z": "kipvs <version> (kube-proxy <release> compatible)".
func (i Info) Short() string {
	return fmt.Sprintf("kipvs %s (kube-proxy %s compatible)", i.Version, i.KubeProxyCompatible)
}
