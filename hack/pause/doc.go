// Command pause is the pod sandbox's process (the pause image, hack/ociimage's pause recipe):
// it holds the pod's namespaces open doing nothing, reaps the orphaned children it inherits as
// PID 1, and exits 0 on SIGINT or SIGTERM. `pause -v` prints its name and exits.
package main
