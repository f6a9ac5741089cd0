#!/bin/sh
# Regenerates the Go code of the envd protos (go generate ./e2b/envd).
# Needs protoc (Debian: protobuf-compiler) and the two plugins:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.19.1
set -eu
cd "$(dirname "$0")"
PATH="$(go env GOPATH)/bin:$PATH"
protoc -I. -I/usr/include \
	--go_out=. --go_opt=paths=source_relative \
	--connect-go_out=. --connect-go_opt=paths=source_relative \
	process/process.proto filesystem/filesystem.proto
