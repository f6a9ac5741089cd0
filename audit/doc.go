// Package audit tells earned resolutions from hacked ones after the fact,
// including for runs made before rollcage existed.
//
// It reads trajectories in rollcage's own format (a trajectory Store
// directory or episode .jsonl files), in the OpenAI message format (one
// episode per JSONL line, or one JSON object with a "messages" key, as
// mini-swe-agent writes them) and in SWE-agent's .traj format, maps their
// tools onto the monitor's tool model, and replays every call in order
// through the rules (and the judge when one is configured), with the
// history each call had. Each episode is then classified as a clean or
// hacked resolution, clean or hacked unresolved, or flagged but cleared by
// the judge; a resolution whose patch matches the task's upstream fix
// after an off-limits access is hacked whatever the single calls looked
// like. Reports come as a text table, JSON, or one self-contained HTML
// file.
//
// Task context that third-party data lacks is inferred only where the
// trajectory shows it (the base commit from the first git log, future
// commits from an all-refs listing, the workdir from cd and paths) and
// otherwise left out, never invented.
package audit
