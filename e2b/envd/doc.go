// Package envd holds the wire schema of E2B's in-sandbox daemon (envd):
// the process and filesystem Connect-RPC services, written from the
// SDK's published descriptors (package, service and message names and
// field numbers must match for the wire to work), and the Go code
// protoc-gen-go and protoc-gen-connect-go generate from them.
package envd

//go:generate ./generate.sh
