package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/toolcall"
)

// newMCPHandler returns the episode's MCP endpoint: the same tools as the
// JSON API, over streamable HTTP. It is stateless (every POST stands
// alone, no server-held sessions or standing streams), so it needs no
// cleanup and never holds a shutdown up.
//
// What an MCP client sees is what the model sees: output (dummy when
// blocked) and whether it failed, never the monitor's decision, which is
// in the trajectory.
func (s *Server) newMCPHandler(se *session) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "rollcage", Title: "rollcage sandbox", Version: "v1"}, &mcp.ServerOptions{
		Instructions: "Tools of one rollcage episode: a sandboxed repository at the task's workdir. Call submit when done.",
		Logger:       s.log.With("episode_id", se.id, "component", "mcp"),
	})
	// rollcage's tools, then the foreign names the monitor maps (FromForeign).
	for _, t := range append(toolcall.Tools(), toolcall.ForeignTools()...) {
		srv.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.Schema}, s.mcpTool(se, t.Name))
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, MaxRequestBodyBytes: s.cfg.MaxBodyBytes,
		Logger: s.log.With("episode_id", se.id, "component", "mcp"),
	})
}

func (s *Server) mcpTool(se *session, name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		se.touch(time.Now())
		call := toolcall.Call{Tool: name, Args: req.Params.Arguments, RequestID: mcpRequestID(req.Params.Meta)}
		res, code, err := s.runCall(ctx, se, call)
		switch {
		case code != 0:
			return toolText(true, "error: "+err.Error()), nil
		case err == nil:
		case errors.Is(err, harness.ErrFinished):
			return toolText(true, "error: the episode has ended; no more tool calls are taken"), nil
		case harness.LimitReason(err) != "":
			return toolText(true, fmt.Sprintf("error: the episode reached its %s limit; call submit", harness.LimitReason(err))), nil
		default:
			return nil, fmt.Errorf("rollcage: infrastructure fault running %s: %w", name, err)
		}
		out := res.Output
		if res.Submitted {
			out = "Submitted. The episode is over."
		} else if res.ExitCode != 0 && name == toolcall.Bash {
			out += fmt.Sprintf("\n[exit code %d]", res.ExitCode)
		}
		return toolText(res.ExitCode != 0, out), nil
	}
}

func toolText(isErr bool, text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: isErr, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func (s *Server) handleMCP(w http.ResponseWriter, r *http.Request, c caller) {
	se, ok := s.episodeFor(w, r, c)
	if !ok {
		return
	}
	se.mcp.ServeHTTP(w, r)
}

// mcpRequestID is the call's id from its _meta (tool_call_id, the id in
// the model's assistant message, or request_id): it names the call in the
// trajectory and makes retries idempotent, as request_id does on /calls.
func mcpRequestID(meta mcp.Meta) string {
	for _, k := range []string{"tool_call_id", "request_id"} {
		if v, ok := meta[k].(string); ok && v != "" {
			return v
		}
	}
	return ""
}
