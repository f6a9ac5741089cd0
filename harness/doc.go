// Package harness runs episodes: one policy's attempt at one task in one
// sandbox, every tool call through the monitor, everything recorded.
//
// A Runner owns what episodes share (the sandbox backend, the monitor
// pipeline, the trajectory store). Runner.Start creates the sandbox, probes
// the repository, hashes the visible tests and opens the monitor episode;
// Episode.Call takes one tool call through the monitor; Episode.Finish
// stops the agent for good, checks the protected files, grades with the
// hidden tests and closes the sandbox. The gateway drives an Episode
// directly; the built-in policies (Replay, OpenAI) drive it through
// Runner.Run, and Runner.RunBatch runs many, resumably.
//
// The OpenAI policy is the agent loop: chat completions with function
// tools, malformed output turned into observations the model can recover
// from, and compaction into a new segment when the conversation outgrows
// its budget. Each segment is one training sample (trajectory.Export).
package harness
