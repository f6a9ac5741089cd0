package server

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"github.com/rollcage/rollcage/sandbox/fake"
)

// TestDashboardMount: the dashboard is the admin's only. A wrong or missing
// token is refused; ?token=ADMIN sets a cookie and redirects, after which
// the page and its episode list load with the cookie alone; an episode's
// token does not open it.
func TestDashboardMount(t *testing.T) {
	e := newEnv(t, &fake.Backend{}, nil)
	ep := e.create()
	get := func(c *http.Client, path string, header string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", e.http.URL+path, nil)
		if header != "" {
			req.Header.Set("Authorization", "Bearer "+header)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	plain := &http.Client{}
	if code, body := get(plain, "/dashboard/", ""); code != http.StatusUnauthorized || !strings.Contains(body, "open /dashboard/?access_token=") {
		t.Errorf("no token: %d %s", code, body)
	}
	if code, _ := get(plain, "/dashboard/?token=wrong", ""); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", code)
	}
	if code, _ := get(plain, "/dashboard/", ep.Token); code != http.StatusUnauthorized {
		t.Errorf("an episode token opened the dashboard: %d", code)
	}
	if code, _ := get(plain, "/dashboard/api/episodes", testAdmin); code != http.StatusOK {
		t.Errorf("admin bearer: %d", code)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	code, body := get(browser, "/dashboard/?access_token="+testAdmin, "")
	if code != http.StatusOK || !strings.Contains(strings.ToLower(body), "<html") {
		t.Fatalf("admin via ?token=: %d %.200s", code, body)
	}
	code, body = get(browser, "/dashboard/api/episodes", "")
	if code != http.StatusOK || !strings.Contains(body, ep.EpisodeID) {
		t.Errorf("episode list with the cookie: %d %.300s", code, body)
	}
}
