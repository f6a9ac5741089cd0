package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
)

// Relay accepts TCP connections on ln (the in-container egress proxy
// address that HTTP_PROXY points to) and pipes each to the unix socket at
// socketPath, where the host's per-episode proxy listens. The sandbox has
// no network of its own; this is its only way out, and the host proxy
// decides what passes. Relay returns when ctx is cancelled, closing ln.
func Relay(ctx context.Context, ln net.Listener, socketPath string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		in, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Go(func() {
			defer in.Close()
			var d net.Dialer
			out, err := d.DialContext(ctx, "unix", socketPath)
			if err != nil {
				log.Warn("egress relay: host proxy unreachable", "socket", socketPath, "err", err)
				return
			}
			defer out.Close()
			pipe(in, out)
		})
	}
}

// pipe copies both ways until both directions are done, passing half-closes
// on so request/response protocols see EOF.
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		defer wg.Done()
		_, err := io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		if err != nil && !errors.Is(err, net.ErrClosed) {
			src.Close()
		}
	}
	wg.Add(2)
	go half(a, b)
	go half(b, a)
	wg.Wait()
}
