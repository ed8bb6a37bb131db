package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kipvs/kipvs/internal/version"
)

// errVersionPrinted ends a command after --version printed the version: main exits 0.
var errVersionPrinted = errors.New("version printed")

// versionFlag is kube-proxy's --version (component-base's verflag): "true" (or the flag
// alone) prints one line and quits, "raw" prints the whole build information and quits,
// "false" does nothing. kube-proxy takes "vX.Y.Z" as a version to report instead of its
// own; kipvs accepts it, so such command lines keep working, and always reports its own.
type versionFlag string

func (v *versionFlag) String() string   { return string(*v) }
func (v *versionFlag) Type() string     { return "version" }
func (v *versionFlag) IsBoolFlag() bool { return true }

func (v *versionFlag) Set(s string) error {
	if s == "raw" || strings.HasPrefix(s, "v") {
		*v = versionFlag(s)
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*v = versionFlag(strconv.FormatBool(b))
	return nil
}

// addVersionFlag gives root and every command under it --version, handled before the
// command runs. kube-proxy prints "Kubernetes vX.Y.Z"; kipvs prints
// "kipvs <version> (kube-proxy v1.34 compatible)".
func addVersionFlag(root *cobra.Command) {
	v := versionFlag("false")
	root.PersistentFlags().Var(&v, "version", "--version, --version=raw prints version information and quits; --version=vX.Y.Z... is accepted for kube-proxy compatibility (kipvs reports its own version)")
	root.PersistentFlags().Lookup("version").NoOptDefVal = "true"
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		switch v {
		case "true":
			fmt.Fprintln(cmd.OutOrStdout(), version.Get().Short())
		case "raw":
			fmt.Fprintf(cmd.OutOrStdout(), "%#v\n", version.Get())
		default:
			return nil
		}
		return errVersionPrinted
	}
}
