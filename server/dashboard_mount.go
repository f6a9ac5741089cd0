package server

import (
	"cmp"
	"crypto/subtle"
	"net/http"
	"time"
)

// dashboardCookie carries the admin token for the dashboard: a browser
// cannot put an Authorization header on a page load or a WebSocket.
const dashboardCookie = "rollcage_admin"

// mountDashboard serves the live dashboard at /dashboard/ to the admin.
// Open /dashboard/?access_token=ADMIN_TOKEN once: the token moves into an
// HttpOnly, SameSite=Strict cookie scoped to /dashboard and the URL is
// cleaned; later requests (the page's fetches and WebSockets) carry it.
func (s *Server) mountDashboard(m *http.ServeMux) {
	dash := http.StripPrefix("/dashboard", NewDashboard(DashboardConfig{Hub: s.hub, List: StoreLister(s.cfg.Store), Logger: s.cfg.Logger}))
	m.HandleFunc("/dashboard/", func(w http.ResponseWriter, r *http.Request) {
		// access_token, the one query parameter of the token convention
		// (token: its older name).
		if tok := cmp.Or(r.URL.Query().Get("access_token"), r.URL.Query().Get("token")); tok != "" {
			if !s.isAdmin(tok) {
				writeError(w, http.StatusUnauthorized, "dashboard: wrong admin token in ?access_token=")
				return
			}
			http.SetCookie(w, &http.Cookie{Name: dashboardCookie, Value: tok, Path: "/dashboard", HttpOnly: true,
				SameSite: http.SameSiteStrictMode, Expires: time.Now().Add(12 * time.Hour)})
			http.Redirect(w, r, "/dashboard/", http.StatusSeeOther)
			return
		}
		tok := bearer(r)
		if c, err := r.Cookie(dashboardCookie); tok == "" && err == nil {
			tok = c.Value
		}
		if !s.isAdmin(tok) {
			writeError(w, http.StatusUnauthorized, "dashboard: admin only; open /dashboard/?access_token=<admin token>")
			return
		}
		dash.ServeHTTP(w, r)
	})
}

func (s *Server) isAdmin(tok string) bool {
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.AdminToken)) == 1
}
