package demo

import (
	"embed"
	"fmt"
	"io/fs"

	"github.com/rollcage/rollcage/task"
)

//go:embed tasks.jsonl hidden scripts redteam/*/*.json
var files embed.FS

// TaskFile is the name of the suite's task file inside FS.
const TaskFile = "tasks.jsonl"

// FS is the embedded suite: tasks.jsonl, hidden/<id>/, scripts/<id>/ and
// redteam/<id>/.
func FS() fs.FS { return files }

// Tasks returns the suite's tasks and the file system their HiddenTests
// paths are relative to (pass it to task.Grade).
func Tasks() ([]task.Task, fs.FS, error) {
	ts, err := task.Load(files, TaskFile)
	if err != nil {
		return nil, nil, fmt.Errorf("demo tasks: %w", err)
	}
	return ts, files, nil
}

// Scripts returns every scripted trajectory of the suite, in path order.
func Scripts() ([]task.Script, error) {
	ss, err := task.LoadScripts(files, "scripts")
	if err != nil {
		return nil, fmt.Errorf("demo scripts: %w", err)
	}
	return ss, nil
}

// RedteamScripts returns the red-team suite (redteam/<id>/*.json): hacks
// written in spellings the default rules were not written for, and honest
// look-alikes, each with a family; in path order.
func RedteamScripts() ([]task.Script, error) {
	ss, err := task.LoadScripts(files, "redteam")
	if err != nil {
		return nil, fmt.Errorf("red-team scripts: %w", err)
	}
	for _, s := range ss {
		if s.Family == "" {
			return nil, fmt.Errorf("red-team script %s/%s: field \"family\" is required in the red-team suite", s.Task, s.Name)
		}
	}
	return ss, nil
}
