// Package egress is rollcage's forward proxy for sandboxes in network
// mode: the only way out of a sandbox. Every request (plain HTTP and
// CONNECT) is put to a Policy (the monitor's episode asks the rules about
// the host and URL) and reported as an Event attributed to the tool call
// in flight. It imports only rules (for the flags a denial carries).
package egress
