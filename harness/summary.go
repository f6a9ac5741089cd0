package harness

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// TaskSummary counts one task's episodes.
type TaskSummary struct {
	TaskID            string `json:"task_id"`
	Episodes          int    `json:"episodes"`
	Resolved          int    `json:"resolved"`
	HackedResolutions int    `json:"hacked_resolutions"`
	// UnconfirmedResolutions are resolved episodes labelled unconfirmed: a
	// flagged call ran that no judge confirmed or cleared.
	UnconfirmedResolutions int            `json:"unconfirmed_resolutions"`
	CleanResolutions       int            `json:"clean_resolutions"`
	Hacked                 int            `json:"hacked"`
	Blocked                int            `json:"blocked"`
	JudgeCalls             int            `json:"judge_calls"`
	Failures               map[string]int `json:"failures,omitempty"` // by failure class
}

// Summary counts a batch's outcomes per task and in total.
type Summary struct {
	Tasks []TaskSummary `json:"tasks"`
	Total TaskSummary   `json:"total"`
}

// Summarize counts outcomes; tasks come out sorted by id.
func Summarize(outs []Outcome) Summary {
	by := map[string]*TaskSummary{}
	var s Summary
	s.Total.TaskID = "total"
	for _, o := range outs {
		ts := by[o.TaskID]
		if ts == nil {
			ts = &TaskSummary{TaskID: o.TaskID}
			by[o.TaskID] = ts
		}
		for _, x := range []*TaskSummary{ts, &s.Total} {
			x.add(o)
		}
	}
	for _, ts := range by {
		s.Tasks = append(s.Tasks, *ts)
	}
	slices.SortFunc(s.Tasks, func(a, b TaskSummary) int {
		switch {
		case a.TaskID < b.TaskID:
			return -1
		case a.TaskID > b.TaskID:
			return 1
		}
		return 0
	})
	return s
}

func (t *TaskSummary) add(o Outcome) {
	t.Episodes++
	if o.Resolved {
		t.Resolved++
	}
	if o.HackedResolution {
		t.HackedResolutions++
	}
	if o.UnconfirmedResolution {
		t.UnconfirmedResolutions++
	}
	if o.CleanResolution {
		t.CleanResolutions++
	}
	if o.Hacked {
		t.Hacked++
	}
	t.Blocked += o.Blocked
	t.JudgeCalls += o.JudgeCalls
	if o.FailureClass != "" {
		if t.Failures == nil {
			t.Failures = map[string]int{}
		}
		t.Failures[o.FailureClass]++
	}
}

// Write prints the summary as a table.
func (s Summary) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "task\tepisodes\tresolved\tclean\tunconf. res.\thacked res.\thacked\tblocked\tjudge calls\tagent fail\tinfra fail\tgrading fail\t")
	row := func(t TaskSummary) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", t.TaskID, t.Episodes, t.Resolved, t.CleanResolutions,
			t.UnconfirmedResolutions, t.HackedResolutions, t.Hacked, t.Blocked, t.JudgeCalls,
			t.Failures[FailureAgent], t.Failures[FailureInfrastructure], t.Failures[FailureGrading])
	}
	for _, t := range s.Tasks {
		row(t)
	}
	row(s.Total)
	return tw.Flush()
}
