package e2b

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rollcage/rollcage/e2b/envd/filesystem"
	"github.com/rollcage/rollcage/e2b/envd/filesystem/filesystemconnect"
	"github.com/rollcage/rollcage/toolcall"
)

// filesystemService answers the filesystem RPCs with bash calls through
// the monitor (recorded like the policy's own), whose find -printf
// output it parses.
type filesystemService struct {
	filesystemconnect.UnimplementedFilesystemHandler
	s *Server
}

var _ filesystemconnect.FilesystemHandler = (*filesystemService)(nil)

// Exit codes of the scripts below, mapped to Connect codes.
const (
	exitNotFound = 3
	exitNotDir   = 4
	exitExists   = 5
)

// entryFormat is one find -printf line per entry: type, size, octal
// permissions, ls-style permissions, owner, group, mtime, path, link
// target.
const entryFormat = `'%y\t%s\t%m\t%M\t%u\t%g\t%T@\t%p\t%l\n'`

func mustExist(q string) string {
	return fmt.Sprintf("[ -e %s ] || [ -L %s ] || { echo 'No such file or directory' >&2; exit %d; }\n", q, q, exitNotFound)
}

func printEntry(q string) string {
	return fmt.Sprintf("find %s -maxdepth 0 -printf %s\n", q, entryFormat)
}

// fsCall runs one filesystem script and returns its output, or the
// Connect error its exit code stands for.
func (f *filesystemService) fsCall(ctx context.Context, what, p, script string) (string, error) {
	if p == "" {
		return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: path is empty: give a path", what))
	}
	b := sandboxOf(ctx)
	// A subshell: an exit in the script must not end the session's shell.
	res, err := f.s.call(ctx, b, toolcall.Bash, toolcall.BashArgs{Command: "(\n" + strings.TrimSpace(script) + "\n)"}, "")
	if err != nil {
		return "", err
	}
	switch {
	case res.ExitCode == 0 && res.Exec != nil && res.Exec.Truncated:
		// A listing cut at the monitor's output bound: an error naming
		// it, never part of the entries as if they were all.
		return "", connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%s %s: the answer is %d bytes, over the monitor's output bound for one call: list fewer entries (a smaller depth, a subdirectory) or run find with commands.run", what, p, res.Exec.TotalBytes))
	case res.ExitCode == 0:
		return res.Output, nil
	}
	switch res.ExitCode {
	case exitNotFound:
		return "", connect.NewError(connect.CodeNotFound, fmt.Errorf("%s %s: no such file or directory", what, p))
	case exitNotDir:
		return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s %s: not a directory", what, p))
	case exitExists:
		return "", connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("%s %s: already exists", what, p))
	}
	return "", connect.NewError(connect.CodeInternal, fmt.Errorf("%s %s: exit %d: %s", what, p, res.ExitCode, clip(res.Output, 300)))
}

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// parseEntries reads entryFormat lines.
func parseEntries(out string) ([]*filesystem.EntryInfo, error) {
	var entries []*filesystem.EntryInfo
	for line := range strings.SplitSeq(out, "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 9 {
			return nil, fmt.Errorf("unexpected listing line %q", clip(line, 120))
		}
		size, _ := strconv.ParseInt(f[1], 10, 64)
		perm, _ := strconv.ParseUint(f[2], 8, 32)
		mtime, _ := strconv.ParseFloat(f[6], 64)
		mode := fs.FileMode(perm) & fs.ModePerm
		e := &filesystem.EntryInfo{Name: path.Base(f[7]), Path: f[7], Size: size, Permissions: f[3], Owner: f[4], Group: f[5],
			ModifiedTime: timestamppb.New(time.Unix(0, int64(mtime*1e9)))}
		switch f[0] {
		case "f":
			e.Type = filesystem.FileType_FILE_TYPE_FILE
		case "d":
			e.Type, mode = filesystem.FileType_FILE_TYPE_DIRECTORY, mode|fs.ModeDir
		case "l":
			e.Type, mode = filesystem.FileType_FILE_TYPE_SYMLINK, mode|fs.ModeSymlink
			target := f[8]
			e.SymlinkTarget = &target
		default:
			continue // FIFOs, sockets, devices: the SDKs drop unspecified types
		}
		e.Mode = uint32(mode)
		entries = append(entries, e)
	}
	return entries, nil
}

func oneEntry(what, out string) (*filesystem.EntryInfo, error) {
	es, err := parseEntries(out)
	if err != nil || len(es) != 1 {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("%s: reading the entry: %v (output %q)", what, err, clip(out, 120)))
	}
	return es[0], nil
}

func (f *filesystemService) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	q := shellQuote(req.Msg.Path)
	out, err := f.fsCall(ctx, "stat", req.Msg.Path, mustExist(q)+printEntry(q))
	if err != nil {
		return nil, err
	}
	e, err := oneEntry("stat", out)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: e}), nil
}

func (f *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	depth := max(req.Msg.Depth, 1)
	q := shellQuote(req.Msg.Path)
	script := mustExist(q) + fmt.Sprintf("[ -d %s ] || exit %d\nfind %s -mindepth 1 -maxdepth %d -printf %s", q, exitNotDir, q, depth, entryFormat)
	out, err := f.fsCall(ctx, "list", req.Msg.Path, script)
	if err != nil {
		return nil, err
	}
	es, err := parseEntries(out)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("list %s: %w", req.Msg.Path, err))
	}
	return connect.NewResponse(&filesystem.ListDirResponse{Entries: es}), nil
}

func (f *filesystemService) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	q := shellQuote(req.Msg.Path)
	script := fmt.Sprintf("[ -e %s ] && exit %d\nmkdir -p -- %s || exit 1\n", q, exitExists, q) + printEntry(q)
	out, err := f.fsCall(ctx, "make dir", req.Msg.Path, script)
	if err != nil {
		return nil, err
	}
	e, err := oneEntry("make dir", out)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: e}), nil
}

func (f *filesystemService) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	src, dst := shellQuote(req.Msg.Source), shellQuote(req.Msg.Destination)
	if req.Msg.Destination == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("move: destination is empty: give a path"))
	}
	script := mustExist(src) + fmt.Sprintf("mkdir -p -- \"$(dirname -- %s)\" && mv -- %s %s || exit 1\n", dst, src, dst) + printEntry(dst)
	out, err := f.fsCall(ctx, "move", req.Msg.Source, script)
	if err != nil {
		return nil, err
	}
	e, err := oneEntry("move", out)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: e}), nil
}

func (f *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	q := shellQuote(req.Msg.Path)
	if _, err := f.fsCall(ctx, "remove", req.Msg.Path, mustExist(q)+fmt.Sprintf("rm -rf -- %s\n", q)); err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}
