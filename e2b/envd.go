package e2b

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/rollcage/rollcage/decision"
	"github.com/rollcage/rollcage/e2b/envd/filesystem/filesystemconnect"
	"github.com/rollcage/rollcage/e2b/envd/process/processconnect"
	"github.com/rollcage/rollcage/harness"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/server"
	"github.com/rollcage/rollcage/toolcall"
)

// session is the shell session E2B calls run in, apart from the default
// one a gateway client may also use. Every process is a subshell, so cd
// and exports do not leak from one process into the next.
const session = "e2b"

type sbxKey struct{}

func sandboxOf(ctx context.Context) *sbx { return ctx.Value(sbxKey{}).(*sbx) }

func (s *Server) routeEnvd() {
	m := http.NewServeMux()
	opts := connect.WithInterceptors() // none: auth is the HTTP middleware below
	m.Handle(processconnect.NewProcessHandler(&processService{s: s}, opts))
	m.Handle(filesystemconnect.NewFilesystemHandler(&filesystemService{s: s}, opts))
	m.HandleFunc("GET /files", s.handleDownload)
	m.HandleFunc("POST /files", s.handleUpload)
	m.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	s.envd = s.withSandbox(m)
}

// withSandbox resolves the request's sandbox (E2b-Sandbox-Id or host
// name) and checks its X-Access-Token, the episode's token: 401 without
// the right one, 502 for a sandbox that is gone (what E2B's proxy
// answers, and what the SDKs read as "sandbox was killed"). On the RPC
// paths the body is a Connect error ({"code": "unavailable", ...}): the
// Python SDK's client takes a JSON body's code as a Connect code name.
func (s *Server) withSandbox(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail := func(status int, code connect.Code, msg string) {
			if strings.HasPrefix(r.URL.Path, "/"+processconnect.ProcessName+"/") || strings.HasPrefix(r.URL.Path, "/"+filesystemconnect.FilesystemName+"/") {
				writeJSON(w, status, map[string]string{"code": code.String(), "message": msg})
				return
			}
			apiError(w, status, msg)
		}
		id := sandboxIDOf(r)
		if id == "" {
			fail(http.StatusBadRequest, connect.CodeInvalidArgument, "no sandbox named: send the E2b-Sandbox-Id header (set E2B_SANDBOX_URL) or use {port}-{id}.{domain}")
			return
		}
		b := s.lookup("", id)
		if b == nil {
			fail(http.StatusBadGateway, connect.CodeUnavailable, fmt.Sprintf("sandbox %q is not running (killed, timed out, or never created)", id))
			return
		}
		if !b.tokenOK(r.Header.Get("X-Access-Token")) {
			fail(http.StatusUnauthorized, connect.CodeUnauthenticated, fmt.Sprintf("wrong or missing X-Access-Token for sandbox %s: send the envdAccessToken its create returned", id))
			return
		}
		if r.URL.Path == "/health" {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sbxKey{}, b)))
	})
}

// userOf is the user an RPC names in Authorization: Basic base64(user:).
// Processes run as the sandbox's user whatever it names; it is kept for
// the process list.
func userOf(h http.Header) string {
	v, ok := strings.CutPrefix(h.Get("Authorization"), "Basic ")
	if !ok {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	if err != nil {
		return ""
	}
	u, _, _ := strings.Cut(string(raw), ":")
	return u
}

// call takes one tool call through the sandbox's episode.
func (s *Server) call(ctx context.Context, b *sbx, tool string, args any, requestID string) (decision.CallResult, error) {
	return s.callAs(ctx, b, "", tool, args, requestID)
}

// callAs is call as the user the SDK named (b.runAs decides whether it
// is one of the sandbox's own).
func (s *Server) callAs(ctx context.Context, b *sbx, user, tool string, args any, requestID string) (decision.CallResult, error) {
	raw, err := marshalArgs(args)
	if err != nil {
		return decision.CallResult{}, connect.NewError(connect.CodeInvalidArgument, err)
	}
	res, _, err := s.cfg.Episodes.Call(ctx, b.id, toolcall.Call{Tool: tool, Args: raw, Session: session, RequestID: requestID, User: b.runAs(user)})
	if err == nil {
		b.notify(res.Effects)
	}
	return res, callError(b, err)
}

// runAs is the user a call runs as for the user the SDK names: that
// user in a root sandbox, as E2B does, but for root, none and the SDK's
// default "user" (the sandbox's root: images here have no E2B user with
// sudo); "" (the sandbox's own user) in any other sandbox.
func (b *sbx) runAs(user string) string {
	if b.metadata[MetaUser] != sandbox.UserRoot || user == "" || user == "root" || user == "user" {
		return ""
	}
	return user
}

// callError maps a failed call to the Connect code the SDKs read.
func callError(b *sbx, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, harness.ErrFinished), errors.Is(err, server.ErrUnknownEpisode):
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("sandbox %s was killed or its episode ended", b.id))
	case harness.LimitReason(err) != "":
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("sandbox %s reached its episode's %s limit: kill it (or submit it)", b.id, harness.LimitReason(err)))
	case errors.Is(err, server.ErrShuttingDown):
		return connect.NewError(connect.CodeUnavailable, errors.New("rollcage is shutting down"))
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	}
	return connect.NewError(connect.CodeInternal, fmt.Errorf("sandbox %s: infrastructure fault: %w", b.id, err))
}
