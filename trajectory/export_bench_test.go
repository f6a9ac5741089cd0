package trajectory

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// benchStore writes n finished episodes of turns model turns each, every
// turn token-exact (prompt ids growing by the last completion and a tool
// output), as a live run records them.
func benchStore(b *testing.B, n, turns int) string {
	b.Helper()
	dir := b.TempDir()
	for e := range n {
		id := fmt.Sprintf("ep%04d", e)
		f, err := os.Create(filepath.Join(dir, id+".jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		enc := json.NewEncoder(f)
		off := int64(0)
		put := func(typ string, v any) {
			x, _ := NewEvent(id, 0, 0, typ, v)
			x.Offset = off
			off++
			enc.Encode(x)
		}
		put(TypeEpisodeStart, EpisodeStart{TaskID: "t"})
		msgs := []Message{{Role: RoleSystem, Content: "sys"}, {Role: RoleUser, Content: "fix it"}}
		prompt := make([]int64, 400)
		for k := range turns {
			comp := make([]int64, 80)
			lps := make([]float64, 80)
			for i := range comp {
				comp[i], lps[i] = int64(k*100+i), -0.5
			}
			resp := Message{Role: RoleAssistant, ToolCalls: []FunctionCall{{ID: fmt.Sprintf("c%d", k), Type: "function", Function: Function{Name: "bash", Arguments: `{"command":"pytest -q"}`}}}}
			put(TypeModelTurn, ModelTurn{Request: msgs, Response: resp, PromptTokenIDs: prompt, TokenIDs: comp, Logprobs: lps, Tools: tools})
			out := Message{Role: RoleTool, ToolCallID: resp.ToolCalls[0].ID, Content: "1 failed, 11 passed"}
			msgs = append(append(msgs[:len(msgs):len(msgs)], resp), out)
			prompt = append(append(prompt[:len(prompt):len(prompt)], comp...), make([]int64, 40)...)
		}
		put(TypeEpisodeEnd, EpisodeEnd{Reward: 1, Resolved: true})
		f.Close()
	}
	return dir
}

// BenchmarkExport exports 20 episodes of 30 token-exact turns (prompts
// growing to 4k ids) per iteration, messages JSONL; samples/s reported.
func BenchmarkExport(b *testing.B) {
	dir := benchStore(b, 20, 30)
	for _, g := range []string{GranularitySegment, GranularityTurn} {
		b.Run(g, func(b *testing.B) {
			for b.Loop() {
				if err := Export(context.Background(), dir, io.Discard, ExportOptions{Granularity: g}); err != nil {
					b.Fatal(err)
				}
			}
			perIter := 20.0
			if g == GranularityTurn {
				perIter = 20 * 30
			}
			b.ReportMetric(perIter*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
			b.ReportMetric(20*float64(b.N)/b.Elapsed().Seconds(), "episodes/s")
		})
	}
}
