package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rollcage/rollcage/e2b"
	"github.com/rollcage/rollcage/server"
)

type e2bFlags struct {
	addr, keys, imageKeys, domain, tlsCert, tlsKey *string
}

func addE2BFlags(fs *flag.FlagSet) e2bFlags {
	return e2bFlags{
		addr:      fs.String("e2b-addr", os.Getenv("ROLLCAGE_E2B_ADDR"), "also serve the E2B sandbox API (control plane and envd) on HOST:PORT (env ROLLCAGE_E2B_ADDR); off when empty"),
		keys:      fs.String("e2b-api-keys", os.Getenv("ROLLCAGE_E2B_API_KEYS"), "E2B API keys, comma-separated [client=]e2b_<40 hex> (env ROLLCAGE_E2B_API_KEYS); one is generated and printed when empty"),
		imageKeys: fs.String("e2b-image-keys", os.Getenv("ROLLCAGE_E2B_IMAGE_KEYS"), "further sandbox metadata keys read as the image, comma-separated (env ROLLCAGE_E2B_IMAGE_KEYS); rollcage/image is always read"),
		domain:    fs.String("e2b-domain", os.Getenv("ROLLCAGE_E2B_DOMAIN"), "domain returned to the SDKs, for envd routed by host {port}-{id}.{domain} (env ROLLCAGE_E2B_DOMAIN)"),
		tlsCert:   fs.String("e2b-tls-cert", os.Getenv("ROLLCAGE_E2B_TLS_CERT"), "serve the E2B API over TLS with this PEM certificate (env ROLLCAGE_E2B_TLS_CERT), as SDKs routing by host name (https://api.{domain}, https://{port}-{id}.{domain}) need; with --e2b-domain it must cover *.{domain}"),
		tlsKey:    fs.String("e2b-tls-key", os.Getenv("ROLLCAGE_E2B_TLS_KEY"), "the PEM private key of --e2b-tls-cert (env ROLLCAGE_E2B_TLS_KEY)"),
	}
}

// parseE2BKeys reads [client=]key,... ; a key without a client names
// itself client-N.
func parseE2BKeys(s string) (map[string]string, error) {
	keys := map[string]string{}
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		client, key, ok := strings.Cut(item, "=")
		if !ok {
			client, key = fmt.Sprintf("client-%d", i+1), item
		}
		if !e2b.APIKeyPattern.MatchString(key) {
			return nil, fmt.Errorf("--e2b-api-keys: %q is not e2b_ followed by 40 lowercase hex digits (the form the Python SDK accepts)", key)
		}
		keys[key] = client
	}
	return keys, nil
}

// startE2B serves the E2B API beside the gateway when --e2b-addr is set;
// stop closes its sandboxes and listener.
func startE2B(f e2bFlags, srv *server.Server, stdout io.Writer, log *slog.Logger) (stop func(context.Context) error, err error) {
	if *f.addr == "" {
		return func(context.Context) error { return nil }, nil
	}
	keys, err := parseE2BKeys(*f.keys)
	if err != nil {
		return nil, err
	}
	var tlsCfg *tls.Config
	switch {
	case (*f.tlsCert == "") != (*f.tlsKey == ""):
		return nil, fmt.Errorf("--e2b-tls-cert and --e2b-tls-key go together: give both (the certificate and its key) or neither")
	case *f.tlsCert != "":
		if tlsCfg, err = e2b.TLSConfig(*f.tlsCert, *f.tlsKey, *f.domain); err != nil {
			return nil, err
		}
	}
	generated := ""
	if len(keys) == 0 {
		generated = e2b.NewAPIKey()
		keys[generated] = "client-1"
	}
	var imageKeys []string
	for k := range strings.SplitSeq(*f.imageKeys, ",") {
		if k = strings.TrimSpace(k); k != "" {
			imageKeys = append(imageKeys, k)
		}
	}
	api, err := e2b.New(e2b.Config{Episodes: srv, APIKeys: keys, ImageKeys: imageKeys, Domain: *f.domain, Logger: log.With("api", "e2b")})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", *f.addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w (pick another --e2b-addr)", *f.addr, err)
	}
	hs := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn), TLSConfig: tlsCfg}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	go func() {
		var err error
		if tlsCfg != nil {
			err = hs.ServeTLS(ln, "", "") // the certificate is in TLSConfig
		} else {
			err = hs.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("e2b listener", "err", err)
		}
	}()
	if generated != "" {
		fmt.Fprintf(stdout, "rollcage serve: E2B API key (generated; set --e2b-api-keys or ROLLCAGE_E2B_API_KEYS to fix it): %s\n", generated)
	}
	fmt.Fprintf(stdout, "rollcage serve: E2B API on %s://%s (set E2B_API_URL and E2B_SANDBOX_URL to it)\n", scheme, ln.Addr())
	if *f.domain != "" {
		fmt.Fprintf(stdout, "rollcage serve: SDKs with E2B_DOMAIN=%s reach https://api.%s and https://{port}-{id}.%s on port 443: route those names here (TLS here with --e2b-tls-cert, or a terminator in front)\n", *f.domain, *f.domain, *f.domain)
	}
	return func(ctx context.Context) error {
		// Sandboxes first: their episodes close as abandoned before the
		// gateway's shutdown would close them as "shutdown".
		err := api.Close(ctx)
		return errors.Join(err, hs.Shutdown(ctx))
	}, nil
}
