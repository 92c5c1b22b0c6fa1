package keyfuncs

import (
	"context"
	"net/http"
	"net/url"
)

// fakeRequest is a Request built field by field, as an adapter would
// present it.
type fakeRequest struct {
	method, path, route string
	remote              string
	header              http.Header
	query               url.Values
	ctx                 context.Context
}

func (f *fakeRequest) Method() string                    { return f.method }
func (f *fakeRequest) Path() string                      { return f.path }
func (f *fakeRequest) Route() string                     { return f.route }
func (f *fakeRequest) Header(name string) string         { return f.header.Get(name) }
func (f *fakeRequest) HeaderValues(name string) []string { return f.header.Values(name) }
func (f *fakeRequest) Query(name string) string          { return f.query.Get(name) }
func (f *fakeRequest) RemoteAddr() string                { return f.remote }

func (f *fakeRequest) Context() context.Context {
	if f.ctx == nil {
		return context.Background()
	}
	return f.ctx
}

// peerRequest returns a request from remote carrying the given header
// field lines, given as name, value pairs; a name may repeat.
func peerRequest(remote string, nameValues ...string) *fakeRequest {
	h := http.Header{}
	for i := 0; i+1 < len(nameValues); i += 2 {
		h.Add(nameValues[i], nameValues[i+1])
	}
	return &fakeRequest{method: "GET", path: "/", remote: remote, header: h}
}
