package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

// attachConn is the agent's stdin and stdout over the pod's attach stream,
// as the io.ReadWriteCloser agent.NewClient wants.
type attachConn struct {
	r      *io.PipeReader // the agent's stdout
	w      *io.PipeWriter // the agent's stdin
	cancel context.CancelFunc
	done   chan struct{} // closed when the stream ended
	once   sync.Once
}

func (c *attachConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *attachConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// Close ends the agent's stdin and gives the stream closeGrace to end on
// its own (an agent that was shut down exits, and the API server closes
// the stream cleanly) before tearing it down: a stream cut under a
// reading client makes client-go log an unhandled error.
func (c *attachConn) Close() error {
	c.once.Do(func() {
		c.w.Close()
		t := time.NewTimer(closeGrace)
		select {
		case <-c.done:
		case <-t.C:
		}
		t.Stop()
		c.cancel()
		c.r.Close()
	})
	<-c.done
	return nil
}

// closeGrace is how long Close waits for the attach stream to end.
const closeGrace = 2 * time.Second

// attach opens the attach stream of pod's sandbox container: WebSocket
// first, SPDY where the server does not upgrade to it (as kubectl does).
// The stream lives until Close, not bound by ctx.
func (b *Backend) attach(pod string) (*attachConn, error) {
	req := b.cs.CoreV1().RESTClient().Post().
		Namespace(b.cfg.Namespace).Resource("pods").Name(pod).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: containerName, Stdin: true, Stdout: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(b.rest, "GET", req.URL().String())
	if err != nil {
		return nil, fmt.Errorf("kube: attach %s: %w", pod, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(b.rest, "POST", req.URL())
	if err != nil {
		return nil, fmt.Errorf("kube: attach %s: %w", pod, err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, fmt.Errorf("kube: attach %s: %w", pod, err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	c := &attachConn{r: outR, w: inW, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW})
		if err == nil {
			err = io.EOF
		} else if ctx.Err() != nil {
			err = errors.Join(io.ErrClosedPipe, err)
		}
		outW.CloseWithError(fmt.Errorf("attach stream of %s ended: %w", pod, err))
		// Closing the write half ends the agent client's writes (blocked
		// ones too) and gives client-go's stdin copier, which may still be
		// reading, a quiet EOF: closing the read half under it logged
		// "Copying stdin failed".
		inW.Close()
	}()
	return c, nil
}
