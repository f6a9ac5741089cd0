package hostside

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/rollcage/rollcage/agent"
	"github.com/rollcage/rollcage/sandbox"
	"github.com/rollcage/rollcage/sandbox/host"
)

// Paths and addresses inside every container sandbox. The agent and its
// run directory live under /.rollcage, which no task image uses.
const (
	AgentPath      = "/.rollcage/rollcage-agent"
	RunDirPath     = "/.rollcage/run"
	AgentSockName  = "agent.sock"
	ProxySockName  = "proxy.sock"
	ProxyListen    = "127.0.0.1:3128"
	SandboxUser    = "1000:1000"
	DefaultWorkdir = "/workspace"
)

// AgentCaps are the capabilities the agent keeps: enough to create its
// socket, chown files it copies in, switch to the sandbox user and kill its
// process groups. The sandbox user's commands lose them all at the uid
// change.
var AgentCaps = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"}

// RootAgentCaps are the capabilities of a root sandbox's container: the
// agent keeps them (agent.NestCaps) and the policy's root has them only
// inside its own user namespace, without SYS_ADMIN and SETFCAP.
var RootAgentCaps = agent.NestCaps

// AgentArgs are the agent's arguments for a sandbox with this lease;
// socketOwner is "uid:gid" of the host process ("" when root), proxy
// whether the egress relay listens, root whether the policy is root in
// a user namespace (sandbox.UserRoot).
func AgentArgs(lease time.Duration, socketOwner string, proxy, root bool) []string {
	user := SandboxUser
	if root {
		user = "0:0"
	}
	args := []string{
		"--listen", "unix:" + RunDirPath + "/" + AgentSockName,
		"--user", user,
		"--workdir", DefaultWorkdir,
		"--lease", lease.String(),
		"--shell", "auto",
	}
	if socketOwner != "" {
		args = append(args, "--socket-owner", socketOwner)
	}
	if proxy {
		args = append(args, "--proxy-listen", ProxyListen, "--proxy-socket", RunDirPath+"/"+ProxySockName)
	}
	if root {
		args = append(args, "--nest")
	}
	return args
}

// ResolveSpec validates spec and fills its defaults: limits from
// defLimits, the lease from lease, the workdir, and the proxy variables in
// proxy mode.
func ResolveSpec(spec sandbox.Spec, defLimits sandbox.Limits, lease time.Duration) (sandbox.Spec, error) {
	if spec.Image == "" {
		return spec, errors.New("spec has no image: set Spec.Image (e.g. rollcage/base:latest)")
	}
	switch spec.Network {
	case "", sandbox.NetworkNone:
		spec.Network = sandbox.NetworkNone
		if spec.ProxySocket != "" {
			return spec, errors.New("ProxySocket is set but Network is not \"proxy\": set Network to sandbox.NetworkProxy or drop ProxySocket")
		}
	case sandbox.NetworkProxy:
		if !filepath.IsAbs(spec.ProxySocket) {
			return spec, fmt.Errorf("network %q needs ProxySocket, the absolute host path of the egress proxy's unix socket (got %q)", spec.Network, spec.ProxySocket)
		}
		if _, err := os.Stat(spec.ProxySocket); err != nil {
			return spec, fmt.Errorf("proxy socket %s: start the egress proxy before the sandbox: %w", spec.ProxySocket, err)
		}
	default:
		return spec, fmt.Errorf("unknown network %q: use %q or %q", spec.Network, sandbox.NetworkNone, sandbox.NetworkProxy)
	}
	switch spec.User {
	case sandbox.UserDefault, sandbox.UserRoot:
	default:
		return spec, fmt.Errorf("unknown sandbox user %q: use %q (the default, uid 1000) or %q (root in a user namespace)", spec.User, sandbox.UserDefault, sandbox.UserRoot)
	}
	if err := host.CheckLimits(spec.Limits); err != nil {
		return spec, fmt.Errorf("limits: %w", err)
	}
	if spec.Lease < 0 || (spec.Lease > 0 && spec.Lease < 3*time.Second) {
		return spec, fmt.Errorf("lease %v: use 0 for the default or at least 3s", spec.Lease)
	}
	spec.Limits = host.FillLimits(spec.Limits, defLimits)
	spec.Lease = cmp.Or(spec.Lease, lease)
	if spec.Workdir == "" {
		spec.Workdir = DefaultWorkdir
	}
	if spec.Network == sandbox.NetworkProxy {
		env := maps.Clone(spec.Env)
		if env == nil {
			env = map[string]string{}
		}
		url := "http://" + ProxyListen
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			env[k] = url
		}
		env["NO_PROXY"], env["no_proxy"] = "localhost,127.0.0.1", "localhost,127.0.0.1"
		spec.Env = env
	}
	return spec, nil
}
