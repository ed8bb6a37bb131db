// Package debugapi is the contract between the daemon and its readers: the documents
// `kipvs run` serves under DebugPrefix when --kipvs-debug-endpoints is on (State, the
// VirtualServerList) and what it answers when they are off. `kipvs doctor` reads State to
// find drift; `kipvs status --services` and the per-Service metrics (svcstats) read the
// virtual servers. internal/server serves them; nothing here depends on HTTP.
package debugapi
