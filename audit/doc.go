// Package audit tells earned resolutions from hacked ones after the fact,
// including for runs made before rollcage existed.
//
// It reads trajectories in rollcage's own format (a trajectory Store
// directory or episode .jsonl files), in the OpenAI message format (one
// episode per JSONL line, or one JSON object with a "messages" key, as
// mini-swe-agent and OpenHands' llm_completions logs write them), in
// SWE-agent's .traj format and OpenHands' output.jsonl, maps their
// tools onto the monitor's tool model, and replays every call in order
// through the rules (and the judge when one is configured), with the
// history each call had. Each episode is then classified as a clean or
// hacked resolution, clean or hacked unresolved, or flagged but cleared by
// the judge; a resolution whose patch matches the task's upstream fix
// after an off-limits access is hacked whatever the single calls looked
// like. Reports come as a text table, JSON, or one self-contained HTML
// file.
//
// Task context that third-party data lacks is inferred only from
// evidence that determines it (the workdir the instruction names or pwd
// printed, HEAD from an unfiltered git log or git rev-parse HEAD, future
// commits from an all-refs listing) and otherwise left out, never
// invented. The files the agent created are followed through the episode
// and given to the rules as provenance. Without a judge, an episode with
// only suspicious flags is unconfirmed, neither hacked nor clean; labels
// (LoadLabels, Report.ScoreLabels) measure the audit against a labelled
// corpus.
package audit
