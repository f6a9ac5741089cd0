// Package golden reads the golden files tests compare their output with,
// rewriting them first when the test runs with -update. It owns that flag:
// a test binary that links it has -update, and no test package defines
// its own.
package golden
