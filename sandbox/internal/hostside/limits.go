package hostside

// AgentPids is the room the backends add to a sandbox's pids limit for the
// agent itself: its reaper and server with their runtime threads, the
// spare threads it reserves at start and the threads it reads and writes
// files on (about 50 at the default limit). The policy cannot keep the
// agent from serving by filling the limit, because the agent needs no new
// thread while it serves (see package agent, threads.go); the room only
// keeps the policy's share what Limits.Pids says.
const AgentPids = 64
