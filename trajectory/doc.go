// Package trajectory records everything an episode does as training data.
//
// An episode is an ordered log of Events (episode_start, model_turn,
// tool_call, decision, tool_output, network, compaction, grade,
// episode_end), each with a dense 0-based Offset. The Store keeps one JSONL
// file per episode in a directory and a durable index of finished segments
// and episodes (_finished.jsonl); the Hub streams both over WebSocket,
// resumable from any offset; Export turns finished episodes into
// training samples, one per model turn or per chain of turns whose prompts
// only grew, token-exact where the model server returned ids (messages
// JSONL or Parquet), tool trajectories for episodes without model turns,
// or ATIF trajectories. Served reads the token data of a model server's
// responses (vLLM, SGLang, OpenAI) once for every recorder.
//
// The package is plain data: it imports none of rollcage's packages. Payloads
// owned by other packages (the tool call, its normalization, flags, the
// judge's verdict) travel as json.RawMessage.
//
// Durability: every event is written to the OS (one write per event) before
// Append returns, so a process crash loses nothing that Append reported. The
// file is fsynced at episode end, on Close and every SyncInterval, so a
// machine crash loses at most the events of the last SyncInterval. A torn
// last line (a write cut by a crash) is detected and dropped when the
// Store is opened; readers never return it.
package trajectory
