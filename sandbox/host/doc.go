// Package host is the configuration every sandbox backend shares, written
// once: Config's fields with their documentation, their defaults and
// their validation, and the labels the container backends (sandbox/docker,
// sandbox/containerd) put on their containers. The backends' own Config
// types embed Config (Docker's is Config) and add what only they have;
// the engine-neutral machinery that acts on it is in sandbox/internal/hostside.
package host
