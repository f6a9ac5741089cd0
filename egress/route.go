package egress

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// Route is one endpoint a sandbox may reach through the proxy besides the
// task's allowed hosts: the trainer's model adapter. A host named by a
// route, and its subdomains, are reachable only through the routes:
// another port or path on them is refused.
type Route struct {
	Scheme string // http or https
	Host   string // lowercase, no port
	Port   int
	// Path is the prefix a plain HTTP request's path must have ("" for
	// any path): "/v1" admits /v1 and /v1/chat/completions, not /v10.
	// Always "" for https: the proxy does not see paths inside TLS.
	Path string
}

// hostName is a DNS name: letters, digits, hyphens and dots (underscores
// too, as some internal names have them); never a glob the rules' allowed
// hosts would widen.
var hostName = regexp.MustCompile(`^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$`)

// ParseRoute parses a route URL: http://host[:port][/path] or
// https://host[:port]. Errors say what to give instead.
func ParseRoute(s string) (Route, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Route{}, fmt.Errorf("model route %q: %v: give a URL such as http://adapter:8000/v1", s, err)
	}
	var r Route
	switch u.Scheme {
	case "http", "https":
		r.Scheme = u.Scheme
	default:
		return Route{}, fmt.Errorf("model route %q: scheme %q: give an http:// or https:// URL such as http://adapter:8000/v1", s, u.Scheme)
	}
	if u.User != nil {
		return Route{}, fmt.Errorf("model route %q: has credentials: give the URL without user:password@ (the agent sends its own headers)", s)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return Route{}, fmt.Errorf("model route %q: no host: give %s://host:port/path", s, r.Scheme)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return Route{}, fmt.Errorf("model route %q: has a query or fragment: give scheme, host, port and path only", s)
	}
	host, port, err := splitHostPort(u.Host, r.Scheme == "https")
	if err != nil {
		return Route{}, fmt.Errorf("model route %q: %v: give %s://host:port/path", s, err, r.Scheme)
	}
	if !hostName.MatchString(host) && net.ParseIP(host) == nil {
		return Route{}, fmt.Errorf("model route %q: host %q is not a host name or IP address (no wildcards): give the adapter's own host", s, host)
	}
	r.Host, r.Port = host, port
	p := strings.TrimRight(u.Path, "/")
	if p != "" && path.Clean(p) != p {
		return Route{}, fmt.Errorf("model route %q: path %q is not clean: give it without . or .. segments", s, u.Path)
	}
	if p != "" && r.Scheme == "https" {
		return Route{}, fmt.Errorf("model route %q: a path on an https route cannot be checked (the proxy does not see inside TLS): give https://%s without the path, or an http:// route", s, u.Host)
	}
	r.Path = p
	return r, nil
}

// ParseRoutes parses each of ss; the first bad one is the error.
func ParseRoutes(ss []string) ([]Route, error) {
	var out []Route
	for _, s := range ss {
		r, err := ParseRoute(s)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// String is the route as a URL.
func (r Route) String() string {
	return r.Scheme + "://" + net.JoinHostPort(r.Host, strconv.Itoa(r.Port)) + r.Path
}

// match reports whether a request (CONNECT for https, a plain request's
// decoded path for http) is under r. A path that is not clean never
// matches: the upstream would resolve "/v1/../admin" outside the prefix.
func (r Route) match(method, host string, port int, reqPath string) bool {
	if host != r.Host || port != r.Port {
		return false
	}
	if r.Scheme == "https" {
		return method == "CONNECT"
	}
	if method == "CONNECT" {
		return false
	}
	if r.Path == "" {
		return true
	}
	if c := path.Clean(reqPath); c != reqPath && c+"/" != reqPath {
		return false
	}
	return reqPath == r.Path || strings.HasPrefix(reqPath, r.Path+"/")
}
