package guardtest

import (
	"net/http"
	"strconv"

	"github.com/tollgate/tollgate/guard"
)

// App is the application handler Run puts behind the middleware. It
// replies according to the request's query:
//
//	status=N   the status (default 200)
//	body=S     the body (default "ok")
//	report=N   guard.ReportCost(r.Context(), N) before replying
//
// An adapter whose framework cannot run an http.Handler with the context
// the middleware passed on may mount its own handler instead, provided it
// replies exactly so (with ReportCost on the context the Guard passed to
// Next).
func App() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if s := q.Get("report"); s != "" {
			n, _ := strconv.ParseInt(s, 10, 64)
			guard.ReportCost(r.Context(), n)
		}
		status := http.StatusOK
		if s := q.Get("status"); s != "" {
			status, _ = strconv.Atoi(s)
		}
		body := "ok"
		if q.Has("body") {
			body = q.Get("body")
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	})
}
