package docker

import "github.com/rollcage/rollcage/sandbox/host"

// Config configures a Backend. It is host.Config, whose fields say what
// each does and what its zero value means; the zero Config works on a host
// where the agent binary sits next to the executable or is named by
// $ROLLCAGE_AGENT_BIN.
type Config host.Config

// Validate reports a configuration that cannot work, in one line saying
// what to change.
func (c Config) Validate() error {
	return host.Config(c).Check("docker", host.DefaultMaxCreating)
}
