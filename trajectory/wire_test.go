package trajectory

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rollcage/rollcage/internal/golden"
)

// TestServed feeds recorded server bodies (one body, or a stream's chunks,
// per line of testdata/wire/NAME.jsonl) through Served and compares the
// token fields it fills with NAME.golden.json; the table says what each
// case must hold whatever the golden file says.
func TestServed(t *testing.T) {
	id := func(n int64) *int64 { return &n }
	tests := []struct {
		name string
		want ModelTurn
	}{
		{"vllm", ModelTurn{
			PromptTokenIDs: []int64{151644, 8948, 198},
			TokenIDs:       []int64{13048, 151645}, Logprobs: []float64{-0.25, -0.5}, Tokens: []string{"Hi", "<|im_end|>"},
			TopLogprobs: [][]TopLogprob{{{Token: "Hi", Logprob: -0.25}, {Token: "Hello", Logprob: -1.5}}, {{Token: "<|im_end|>", Logprob: -0.5}, {Token: "!", Logprob: -1}}},
		}},
		{"vllm-stream", ModelTurn{
			PromptTokenIDs: []int64{1, 2, 3},
			TokenIDs:       []int64{13048, 151645}, Logprobs: []float64{-0.25, -0.5}, Tokens: []string{"Hi", "<|im_end|>"},
		}},
		{"sglang", ModelTurn{
			PromptTokenIDs: []int64{151644, 8948, 198},
			TokenIDs:       []int64{13048, 151645}, Logprobs: []float64{-0.25, -0.5}, Tokens: []string{"Hi", "<|im_end|>"},
			TopLogprobs: [][]TopLogprob{{{Token: "Hi", Logprob: -0.25, ID: id(13048)}, {Token: "Hello", Logprob: -1.5, ID: id(9707)}}, {{Token: "<|im_end|>", Logprob: -0.5, ID: id(151645)}, {Token: "!", Logprob: -1, ID: id(0)}}},
		}},
		{"token-strings", ModelTurn{
			TokenIDs: []int64{13048, 151645}, Logprobs: []float64{-0.25, -0.5}, Tokens: []string{"token_id:13048", "token_id:151645"},
		}},
		{"vllm-completions", ModelTurn{
			PromptTokenIDs: []int64{151644, 8948}, // on the choice, as vLLM's completions API puts them
			TokenIDs:       []int64{13048, 151645}, Logprobs: []float64{-0.25, -0.5}, Tokens: []string{"Hi", "<|im_end|>"},
			TopLogprobs: [][]TopLogprob{{{Token: "Hi", Logprob: -0.25}, {Token: "Hello", Logprob: -1.5}}, {{Token: "<|im_end|>", Logprob: -0.5}}},
		}},
		{"openai-plain", ModelTurn{}}, // choice 1's ids are not choice 0's
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "wire", tc.name+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var s Served
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				s.Add(sc.Bytes())
			}
			var got ModelTurn
			s.Fill(&got)
			pl := got.PromptLogprobs
			got.PromptLogprobs = nil
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("token fields (-want +got):\n%s", d)
			}
			got.PromptLogprobs = pl
			b, _ := json.MarshalIndent(got, "", "  ")
			path := filepath.Join("testdata", "wire", tc.name+".golden.json")
			want := golden.Read(t, path, append(b, '\n'), "go test -run TestServed")
			if d := cmp.Diff(string(want), string(b)+"\n"); d != "" {
				t.Errorf("differs from %s (-want +got):\n%s", path, d)
			}
		})
	}
	t.Run("vllm prompt_logprobs kept as served", func(t *testing.T) {
		line, _ := os.ReadFile(filepath.Join("testdata", "wire", "vllm.jsonl"))
		var s Served
		s.Add(bytes.TrimSpace(line))
		var got ModelTurn
		s.Fill(&got)
		if !strings.HasPrefix(string(got.PromptLogprobs), `[null,{"8948":{"logprob":-3.5`) {
			t.Errorf("prompt_logprobs = %s, want the served array", got.PromptLogprobs)
		}
	})
}

func TestRequestParts(t *testing.T) {
	tests := []struct {
		body, tools, params string
	}{
		{`{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"bash"}}],"temperature":0.7,"top_p":0.9,"return_token_ids":true}`,
			`[{"type":"function","function":{"name":"bash"}}]`, `{"return_token_ids":true,"temperature":0.7,"top_p":0.9}`},
		{`{"model":"m","messages":[]}`, ``, ``},
		{`{"messages":[],"tools":null,"max_tokens":5}`, ``, `{"max_tokens":5}`},
		{`{"model":"m","prompt":[1,2,3],"max_tokens":8}`, ``, `{"max_tokens":8}`},
		{`{"model":"m","system":"be good","messages":[],"max_tokens":8,"tools":[{"name":"bash","input_schema":{}}]}`, `[{"name":"bash","input_schema":{}}]`, `{"max_tokens":8}`},
		{`not json`, ``, ``},
	}
	for _, tc := range tests {
		tools, params := RequestParts([]byte(tc.body))
		if string(tools) != tc.tools || string(params) != tc.params {
			t.Errorf("RequestParts(%s) = %s, %s; want %s, %s", tc.body, tools, params, tc.tools, tc.params)
		}
	}
}

// TestRefusedFields: only a 400 that names a field the caller added is a
// refusal of the token-id fields.
func TestRefusedFields(t *testing.T) {
	added := []string{"logprobs", "return_token_ids"}
	tests := []struct {
		name   string
		status int
		body   string
		added  []string
		want   string
	}{
		{"openai unknown field", 400, `{"error":{"message":"Unrecognized request argument supplied: return_token_ids","type":"invalid_request_error"}}`, added,
			"the model server refused logprobs, return_token_ids (400: Unrecognized request argument supplied: return_token_ids)"},
		{"plain text", 400, "extra fields not permitted:\n return_token_ids", added,
			"the model server refused logprobs, return_token_ids (400: extra fields not permitted: return_token_ids)"},
		{"another 400", 400, `{"error":{"message":"maximum context length is 8192 tokens"}}`, added, ""},
		{"not a 400", 500, `{"error":{"message":"return_token_ids failed"}}`, added, ""},
		{"nothing added", 400, `{"error":{"message":"Unrecognized request argument supplied: return_token_ids"}}`, nil, ""},
	}
	for _, tc := range tests {
		if got := RefusedFields(tc.status, []byte(tc.body), tc.added); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestTokenFieldsDefault: the default mode asks with vLLM's fields and
// AddFields never overrides a field the client set.
func TestTokenFieldsDefault(t *testing.T) {
	def, err := TokenFields("")
	if err != nil {
		t.Fatal(err)
	}
	vllm, _ := TokenFields(TokensVLLM)
	if !reflect.DeepEqual(def, vllm) {
		t.Errorf("TokenFields(\"\") = %v, want vLLM's %v", def, vllm)
	}
	if off, _ := TokenFields(TokensOff); off != nil {
		t.Errorf("TokenFields(off) = %v, want none", off)
	}
	body, added := AddFields([]byte(`{"logprobs":false,"messages":[]}`), def)
	if string(body) != `{"logprobs":false,"messages":[],"return_token_ids":true}` || !reflect.DeepEqual(added, []string{"return_token_ids"}) {
		t.Errorf("AddFields: %s %v", body, added)
	}
}
