package e2b_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rollcage/rollcage/e2b"
	"github.com/rollcage/rollcage/e2b/envd/process/processconnect"
)

// writeCert writes a self-signed certificate for names, valid from
// notBefore for a day, and its key; it returns their paths and the pool
// that trusts it.
func writeCert(t *testing.T, notBefore time.Time, names ...string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: notBefore, NotAfter: notBefore.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}

func TestTLSConfig(t *testing.T) {
	now := time.Now().Add(-time.Hour)
	wild, wildKey, _ := writeCert(t, now, "*.e2b.test")
	apiOnly, apiKey, _ := writeCert(t, now, "api.e2b.test")
	old, oldKey, _ := writeCert(t, now.Add(-48*time.Hour), "*.e2b.test")
	tests := []struct {
		name, cert, key, domain string
		wantErr                 string
	}{
		{"wildcard", wild, wildKey, "e2b.test", ""},
		{"no domain", apiOnly, apiKey, "", ""},
		{"api name only", apiOnly, apiKey, "e2b.test", "does not cover 49983-sandboxid.e2b.test"},
		{"other domain", wild, wildKey, "example.test", "does not cover api.example.test"},
		{"expired", old, oldKey, "e2b.test", "not now: renew it"},
		{"key of another", wild, apiKey, "e2b.test", "private key does not match public key"},
		{"no file", filepath.Join(t.TempDir(), "none.pem"), wildKey, "e2b.test", "no such file"},
	}
	for _, tc := range tests {
		_, err := e2b.TLSConfig(tc.cert, tc.key, tc.domain)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.wantErr)
		}
	}
}

// TestHostRoutedTLS: with a certificate, the SDKs' host-routed names
// work over TLS as E2B's do: the control plane at https://api.{domain},
// a sandbox's envd at https://49983-{id}.{domain} with no E2b-Sandbox-Id
// header.
func TestHostRoutedTLS(t *testing.T) {
	const domain = "e2b.test"
	e := newEnvWith(t, func(c *e2b.Config) { c.Domain = domain })
	certFile, keyFile, pool := writeCert(t, time.Now().Add(-time.Hour), "*."+domain)
	cfg, err := e2b.TLSConfig(certFile, keyFile, domain)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(e.api)
	hs.TLS = cfg
	hs.StartTLS()
	t.Cleanup(hs.Close)
	// Every name resolves to the test server, as a DNS wildcard would.
	hc := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, hs.Listener.Addr().String())
		},
	}}

	req, _ := http.NewRequest("POST", "https://api."+domain+"/v2/sandboxes",
		strings.NewReader(`{"templateID":"base","metadata":{"rollcage/image":"rollcage/plain:latest"},"timeout":60}`))
	req.Header.Set("X-API-KEY", keyA)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var c created
	err = json.NewDecoder(resp.Body).Decode(&c)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated || c.SandboxID == "" {
		t.Fatalf("create over TLS: %d %+v %v", resp.StatusCode, c, err)
	}
	if resp.TLS == nil {
		t.Fatal("the control plane answered without TLS")
	}

	envd := "https://49983-" + c.SandboxID + "." + domain
	proc := processconnect.NewProcessClient(&http.Client{Transport: tokenOnly{c.EnvdAccessToken, hc.Transport}}, envd)
	_, out, end, err := run(context.Background(), t, clients{proc: proc}, bashCfg("echo routed by host"))
	if err != nil || end == nil || !strings.Contains(out, "routed by host") {
		t.Fatalf("process over host-routed TLS envd: %q %v %v", out, end, err)
	}
	// A name for another sandbox reaches no sandbox of this one's.
	_, _, _, err = run(context.Background(), t, clients{proc: processconnect.NewProcessClient(&http.Client{Transport: tokenOnly{c.EnvdAccessToken, hc.Transport}},
		"https://49983-nosuchsandbox."+domain)}, bashCfg("true"))
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("unknown sandbox by host: %v, want unavailable", err)
	}
}

// tokenOnly sends the envd access token and nothing that names the
// sandbox: the host name does.
type tokenOnly struct {
	token string
	next  http.RoundTripper
}

func (t tokenOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Access-Token", t.token)
	return t.next.RoundTrip(r)
}
