// Package memnet is an in-memory network for tests: a net.Listener whose
// connections are net.Pipe pairs, and HTTP servers and clients on it. Its
// connections block on channels only, never on the kernel, so a server
// and its clients on memnet run inside a testing/synctest bubble, whose
// fake clock then drives their timers (reapers, leases, timeouts) without
// real waits.
package memnet
