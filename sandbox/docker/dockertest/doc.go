// Package dockertest gives the tests of other packages (harness, server,
// demo, audit, monitor) the Docker backend the way CI wants it: failing,
// not skipping, under CI=true when no engine answers, with the agent built
// when the Makefile has not named one. Images are checked with
// sandboxtest.Create and sandboxtest.RequireImage.
package dockertest
