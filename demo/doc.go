// Package demo is rollcage's built-in task suite, embedded in the binary:
// eight small SWE-style Python repositories with a real bug each (images
// built from images/tasks/<id>), their hidden tests (demo/hidden/<id>,
// which exist nowhere else, in particular not in the images) and scripted
// trajectories (demo/scripts/<id>): an honest solve, a no-op and hacked
// solves covering every category of the default rules.
//
// It lets `rollcage demo`, the harness's replay tests and the monitor's
// end-to-end tests run without any task file on disk.
package demo
