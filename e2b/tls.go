package e2b

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"
)

// TLSConfig loads the certificate and key to serve the API over TLS
// with (rollcage serve --e2b-tls-cert, --e2b-tls-key). The SDKs need it
// when they reach a sandbox's envd by host name,
// https://{port}-{sandboxID}.{domain}, and the control plane at
// https://api.{domain}, which they do when E2B_DOMAIN is set and
// E2B_SANDBOX_URL is not. With a domain the certificate must cover both
// names (a *.{domain} wildcard does): an error names the one it does not
// cover, as it does an expired certificate or a key that does not match.
func TLSConfig(certFile, keyFile, domain string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("e2b: TLS certificate %s with key %s: %w", certFile, keyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil { // GODEBUG x509keypairleaf=0
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("e2b: TLS certificate %s: %w", certFile, err)
		}
	}
	if now := time.Now(); now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		return nil, fmt.Errorf("e2b: TLS certificate %s is valid from %s to %s, not now: renew it", certFile,
			leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if domain != "" {
		for _, host := range []string{"api." + domain, "49983-sandboxid." + domain} {
			if err := leaf.VerifyHostname(host); err != nil {
				return nil, fmt.Errorf("e2b: TLS certificate %s does not cover %s (%v): the SDKs reach api.%s and {port}-{sandboxID}.%s: give one for *.%s", certFile, host, err, domain, domain, domain)
			}
		}
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
