package e2b_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rollcage/rollcage/e2b"
	"github.com/rollcage/rollcage/trajectory"
)

// get downloads path as files.read does and returns the status, the body
// and the error reading it (a body broken off).
func get(t *testing.T, e *env, c clients, path string) (int, http.Header, []byte, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", e.url+"/files?path="+path, nil)
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body, err
}

// TestDownloadBytes reads files of any bytes and any size back through
// GET /files: byte-identical, streamed from the sandbox, never cut.
func TestDownloadBytes(t *testing.T) {
	e := newEnv(t)
	c := e.clients(e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest"}))
	every := make([]byte, 0, 3*256)
	for range 3 {
		for b := range 256 {
			every = append(every, byte(b))
		}
	}
	big := make([]byte, 33<<20+7) // over 32 MiB, newlines and all
	rng := rand.NewChaCha8([32]byte{7})
	rng.Read(big)
	dir := filepath.Join(e.dir, "dl")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte // written to the file; nil: the path is what it is
		path string
		code int
		msg  string // in the error's message
	}{
		{name: "every byte value", data: every, code: 200},
		{name: "over 32 MiB", data: big, code: 200},
		{name: "256 KiB without a newline", data: bytes.Repeat([]byte{0}, 256<<10), code: 200},
		{name: "text", data: []byte("line one\nline two without end"), code: 200},
		{name: "empty", data: []byte{}, code: 200},
		{name: "missing", path: filepath.Join(dir, "missing"), code: 404, msg: "not found"},
		{name: "directory", path: filepath.Join(dir, "sub"), code: 400, msg: "Is a directory"},
		{name: "fifo", path: filepath.Join(dir, "fifo"), code: 400, msg: "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.path
			if tc.data != nil {
				p = filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
				if err := os.WriteFile(p, tc.data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			code, h, body, err := get(t, e, c, p)
			if err != nil {
				t.Fatalf("reading the body: %v", err)
			}
			if code != tc.code {
				t.Fatalf("status %d (%.200q), want %d", code, body, tc.code)
			}
			if tc.code != 200 {
				var msg struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				}
				if err := json.Unmarshal(body, &msg); err != nil || msg.Code != tc.code || !strings.Contains(msg.Message, tc.msg) {
					t.Errorf("error body %s (%v), want code %d and a message with %q", body, err, tc.code, tc.msg)
				}
				return
			}
			if got, want := sha256.Sum256(body), sha256.Sum256(tc.data); len(body) != len(tc.data) || got != want {
				t.Errorf("read back %d bytes (sha256 %x), want the file's %d (sha256 %x)", len(body), got[:8], len(tc.data), want[:8])
			}
			if ct := h.Get("Content-Type"); ct != "application/octet-stream" {
				t.Errorf("Content-Type %q, want application/octet-stream", ct)
			}
		})
	}
}

// TestDownloadWithheld: a file holding protected material (a line of the
// hidden tests the policy did not write) never comes back changed: a
// 403 when it starts with it, a body broken off when part of the file
// went out already; the read's step says where it stopped.
func TestDownloadWithheld(t *testing.T) {
	e := newEnv(t)
	cr := e.create(keyA, map[string]string{e2b.MetaTask: boundTask.ID})
	c := e.clients(cr)
	dir := filepath.Join(e.dir, "withheld")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	head := bytes.Repeat([]byte("an honest line of the policy's file\n"), 8<<10) // 288 KiB: sent before the line
	for _, tc := range []struct {
		name   string
		data   []byte
		code   int  // 0: a 200 whose body breaks off
		broken bool // the body breaks off
	}{
		{name: "first line", data: []byte("def test_x():\n    pass\n"), code: 403},
		{name: "after 288 KiB", data: append(append(head, "def test_x():\n"...), head...), code: 200, broken: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(p, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, body, err := get(t, e, c, p)
			if code != tc.code {
				t.Fatalf("status %d (%.200q), want %d", code, body, tc.code)
			}
			if tc.code == 403 && !strings.Contains(string(body), "holds protected material") {
				t.Errorf("403 says %s, want that the file holds protected material", body)
			}
			if tc.broken {
				if err == nil {
					t.Fatalf("the body of %d bytes ended cleanly, want it broken off", len(body))
				}
				if bytes.Contains(body, []byte("def test_x")) || !bytes.HasPrefix(head, body[:min(len(body), len(head))]) || len(body) >= len(tc.data) {
					t.Errorf("got %d bytes before the break, want a prefix of the file before its protected line", len(body))
				}
			}
		})
	}
	// Each read's recorded output says where it stopped.
	var stopped int
	e.store.Read(context.Background(), cr.SandboxID, 0, func(ev trajectory.Event) error {
		var o trajectory.ToolOutput
		if ev.Type == trajectory.TypeToolOutput && json.Unmarshal(ev.Data, &o) == nil &&
			strings.Contains(o.Output, "[read stopped at a line of the protected material") {
			stopped++
		}
		return nil
	})
	if stopped != 2 {
		t.Errorf("%d read_file steps recorded as stopped, want 2", stopped)
	}
}

// TestUploadEncoding: a gzip body (the SDKs' write with gzip: true)
// lands as what it unpacks to; another encoding, a body that is not the
// gzip it says, and one that unpacks past the upload limit are errors
// saying so, never a file holding the packed bytes.
func TestUploadEncoding(t *testing.T) {
	e := newEnv(t)
	c := e.clients(e.create(keyA, map[string]string{e2b.MetaImage: "rollcage/plain:latest"}))
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	dir := filepath.Join(e.dir, "enc")
	for _, tc := range []struct {
		name     string
		encoding string
		body     []byte
		code     int
		want     []byte // the file's bytes, for a 200
		msg      string
	}{
		{name: "gzip", encoding: "gzip", body: gz(every), code: 200, want: every},
		{name: "gzip text", encoding: "gzip", body: gz([]byte("text\n")), code: 200, want: []byte("text\n")},
		{name: "identity", encoding: "identity", body: every, code: 200, want: every},
		{name: "not gzip", encoding: "gzip", body: every, code: 400, msg: "is not gzip"},
		{name: "brotli", encoding: "br", body: every, code: 415, msg: "send the body as it is, or gzip"},
		{name: "unpacks past the limit", encoding: "gzip", body: gz(make([]byte, e2b.MaxUpload+1)), code: 400, msg: "upload over 33554432 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			req, _ := http.NewRequest("POST", e.url+"/files?path="+p, bytes.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/octet-stream")
			req.Header.Set("Content-Encoding", tc.encoding)
			resp, err := c.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d %s, want %d", resp.StatusCode, body, tc.code)
			}
			got, rerr := os.ReadFile(p)
			if tc.code != 200 {
				if !strings.Contains(string(body), tc.msg) {
					t.Errorf("error %s, want it to say %q", body, tc.msg)
				}
				if rerr == nil {
					t.Errorf("a refused upload wrote %d bytes", len(got))
				}
				return
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("file holds %q (%v), want %q", got, rerr, tc.want)
			}
		})
	}
}
