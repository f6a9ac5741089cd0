// Package python holds rollcage's Python client (rollcage/, standard
// library only), its examples for slime, verl and SkyRL (examples/) and
// its unittest suite (tests/). The Go test here is what runs that suite
// in CI: it builds and starts a real rollcage serve over Docker sandboxes,
// puts a scripted OpenAI-compatible model behind its recording proxy and
// runs python3 -m unittest against it.
package python
