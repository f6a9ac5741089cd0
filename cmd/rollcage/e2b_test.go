package main

import (
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseE2BKeys(t *testing.T) {
	const k1, k2 = "e2b_0123456789abcdef0123456789abcdef01234567", "e2b_00000000000000000000000000000000000000ff"
	tests := []struct {
		in      string
		want    map[string]string
		wantErr string
	}{
		{"", map[string]string{}, ""},
		{k1, map[string]string{k1: "client-1"}, ""},
		{"trainer=" + k1 + ", eval=" + k2, map[string]string{k1: "trainer", k2: "eval"}, ""},
		{"e2b_xxx", nil, `"e2b_xxx" is not e2b_ followed by 40 lowercase hex digits`},
		{"trainer=" + strings.ToUpper(k1), nil, "is not e2b_ followed by 40 lowercase hex digits"},
	}
	for _, tc := range tests {
		got, err := parseE2BKeys(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseE2BKeys(%q): error %v, want one saying %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseE2BKeys(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("parseE2BKeys(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

// TestE2BTLSFlags: the certificate and key go together, and a bad one
// fails the start with the reason, before anything listens.
func TestE2BTLSFlags(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		cert, key, want string
	}{
		{"cert.pem", "", "--e2b-tls-cert and --e2b-tls-key go together"},
		{"", "key.pem", "--e2b-tls-cert and --e2b-tls-key go together"},
		{filepath.Join(t.TempDir(), "none.pem"), filepath.Join(t.TempDir(), "none.key"), "no such file"},
	}
	for _, tc := range tests {
		f := e2bFlags{addr: str("127.0.0.1:0"), keys: str(""), imageKeys: str(""), domain: str("e2b.test"), tlsCert: str(tc.cert), tlsKey: str(tc.key)}
		if _, err := startE2B(f, nil, io.Discard, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("cert %q key %q: %v, want an error saying %q", tc.cert, tc.key, err, tc.want)
		}
	}
}
