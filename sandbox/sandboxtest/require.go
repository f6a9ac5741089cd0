package sandboxtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/host"
)

// RequireDocker fails t when CI=true and no Docker engine answers a ping
// at DOCKER_HOST (default unix:///var/run/docker.sock), and skips t when
// not in CI. Under -short it skips t outside CI without asking (see
// SkipShort). It speaks the engine's HTTP API directly, so packages that
// do not otherwise depend on Docker's client can use it.
func RequireDocker(t testing.TB) {
	t.Helper()
	SkipShort(t, "the Docker engine")
	if err := pingDocker(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Docker is required in CI: %v: run 'make docker' or start dockerd", err)
		}
		t.Skipf("skipping: %v (run 'make docker' to run Docker-backed tests)", err)
	}
}

func pingDocker() error {
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = "unix:///var/run/docker.sock"
	}
	return pingEngine(host)
}

// UserNSEngineEnv names the Docker engine with --userns-remap that root
// sandboxes need; unset, it is the one scripts/rollcage-engine.sh up
// --userns-remap starts.
const UserNSEngineEnv = "ROLLCAGE_USERNS_DOCKER_HOST"

// UserNSEngine is the DOCKER_HOST of the engine with --userns-remap
// ($ROLLCAGE_USERNS_DOCKER_HOST), with images loaded into it from the
// default engine when it lacks them (the docker CLI's save and load).
// Without one, t is Unavailable: it fails under CI=true.
func UserNSEngine(t testing.TB, images ...string) string {
	t.Helper()
	SkipShort(t, "a Docker engine with --userns-remap")
	host := os.Getenv(UserNSEngineEnv)
	if host == "" {
		host = "unix:///run/rollcage-engine-userns/docker.sock"
	}
	if err := pingEngine(host); err != nil {
		Unavailable(t, fmt.Sprintf("no Docker engine with --userns-remap (set %s or run scripts/rollcage-engine.sh up --userns-remap): %v", UserNSEngineEnv, err))
	}
	for _, img := range images {
		if exec.Command("docker", "-H", host, "image", "inspect", img).Run() == nil {
			continue
		}
		load := exec.Command("sh", "-c", `docker save "$1" | docker -H "$2" load -q`, "sh", img, host)
		if out, err := load.CombinedOutput(); err != nil {
			t.Fatalf("load %s into %s (build it first: make images): %v\n%s", img, host, err, out)
		}
	}
	return host
}

func pingEngine(host string) error {
	u, err := url.Parse(host)
	if err != nil {
		return fmt.Errorf("DOCKER_HOST=%q: %w", host, err)
	}
	tr := &http.Transport{}
	base := "http://docker"
	switch u.Scheme {
	case "unix":
		path := u.Path
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
	case "tcp", "http":
		base = "http://" + u.Host
	default:
		// TLS and ssh setups are not probed; let the backend's own
		// errors speak.
		return nil
	}
	cli := &http.Client{Transport: tr, Timeout: 3 * time.Second}
	defer tr.CloseIdleConnections()
	resp, err := cli.Get(base + "/_ping")
	if err != nil {
		return fmt.Errorf("no Docker engine at DOCKER_HOST=%s: %w", host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the Docker engine at %s answered %s to a ping", host, resp.Status)
	}
	return nil
}

// QuotaEngineEnv names the variable holding the quota engine's DOCKER_HOST
// where it is not host.QuotaEngineHost.
const QuotaEngineEnv = "ROLLCAGE_QUOTA_DOCKER_HOST"

// RequireQuotaEngine points DOCKER_HOST at the engine whose disk limits
// the kernel enforces (make quota-engine; $ROLLCAGE_QUOTA_DOCKER_HOST, else
// host.QuotaEngineHost) for the rest of t. It fails t when CI=true and
// that engine does not answer, and skips t elsewhere.
func RequireQuotaEngine(t testing.TB) {
	t.Helper()
	SkipShort(t, "the quota engine")
	t.Setenv("DOCKER_HOST", cmp.Or(os.Getenv(QuotaEngineEnv), host.QuotaEngineHost))
	if err := pingDocker(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the quota engine is required in CI: %v: run 'make quota-engine'", err)
		}
		t.Skipf("skipping: %v (run 'make quota-engine' to run the disk quota tests)", err)
	}
}

// SkipShort skips t under go test -short unless CI=true: the fast loop
// (make check) runs -short and needs no engine, so a test that needs one
// (what names it: "the Docker engine") calls this before asking for it.
// Under CI=true it does nothing, so a missing engine still fails the test
// there, -short or not.
func SkipShort(t testing.TB, what string) {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skipf("-short: skipping a test that needs %s (run it without -short, or make test)", what)
	}
}

// Create creates a sandbox from spec and closes it when the test ends. A
// missing image fails t under CI=true and skips it elsewhere, naming the
// command that builds it.
func Create(t testing.TB, b sandbox.Backend, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	sb, err := b.Create(context.Background(), spec)
	if errors.Is(err, sandbox.ErrImageMissing) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v: run 'make images'", err)
		}
		t.Skipf("%v (run 'make images')", err)
	}
	if err != nil {
		t.Fatalf("create a sandbox of %s: %v", spec.Image, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sb.Close(ctx)
	})
	return sb
}

// RequireImage is Create for a test that only needs image to exist: the
// sandbox it starts is closed at once.
func RequireImage(t testing.TB, b sandbox.Backend, image string) {
	t.Helper()
	sb := Create(t, b, sandbox.Spec{Image: image, EpisodeID: "image-check"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb.Close(ctx)
}

// Unavailable stops t for want of something outside Go (a binary, a
// package, a data directory): under CI=true it fails, since CI installs
// everything the tests need, and elsewhere it skips. msg says what is
// missing and how to get it.
func Unavailable(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
