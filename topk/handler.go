package topk

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"time"
)

// Defaults and bounds of NewHandler.
const (
	// DefaultK is the default number of keys a Handler serves.
	DefaultK = 10
	// MinSecretLen is the shortest secret, in bytes, WithHashSecret
	// accepts: shorter ones could be guessed, and with them every key
	// that can be enumerated (an IPv4 address) recovered from its hash.
	MinSecretLen = 16
)

// A HandlerOption configures a Handler.
type HandlerOption func(*handlerConfig)

type handlerConfig struct {
	secret []byte
	raw    bool
	k      int
	err    error
}

func (c *handlerConfig) invalid(option string, format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: %s: %s", ErrInvalidOption, option, fmt.Sprintf(format, args...))
	}
}

// WithHashSecret sets the secret of the keyed hash that stands for keys
// (HMAC-SHA256), at least MinSecretLen bytes. Handlers with the same
// secret, on every instance and across restarts, show a key as the same
// ID, and whoever holds the secret finds a key's ID with Handler.KeyID;
// without the secret, an ID reveals nothing of its key. Default: a random
// secret per Handler, so IDs are stable while the process runs.
func WithHashSecret(secret []byte) HandlerOption {
	return func(c *handlerConfig) {
		if len(secret) < MinSecretLen {
			c.invalid("WithHashSecret", "%d-byte secret, want at least %d", len(secret), MinSecretLen)
			return
		}
		c.secret = append([]byte(nil), secret...)
	}
}

// WithRawKeys makes the Handler show keys as they are (client IPs, user
// IDs, API keys: serve it only to operators allowed to see them). It
// cannot be combined with WithHashSecret. Default: false, keys are shown
// hashed.
func WithRawKeys(on bool) HandlerOption {
	return func(c *handlerConfig) { c.raw = on }
}

// WithDefaultK sets how many keys the Handler serves when the request has
// no k parameter, between 1 and the tracker's capacity. Default: DefaultK,
// or the capacity if smaller.
func WithDefaultK(k int) HandlerOption {
	return func(c *handlerConfig) {
		if k < 1 {
			c.invalid("WithDefaultK", "%d keys, want at least 1", k)
			return
		}
		c.k = k
	}
}

// A Handler serves a Tracker's Snapshot as JSON. It is safe for
// concurrent use.
//
// GET (or HEAD) with an optional query parameter k, the number of keys
// (1 to the tracker's capacity), answers 200 with
//
//	{"keys":"hmac-sha256","since":"2025-01-02T15:04:05Z","until":"2025-01-02T15:12:00Z",
//	"total":1520,"capacity":1024,"bound":0,
//	"top":[{"key":"9f86d081884c7d659a2feaa0c55ad015","count":900,"error":0}, ...]}
//
// (on one line), the fields of Snapshot and Entry: since and until in RFC
// 3339, and per key its count and error, a true count between count −
// error and count; "long":true marks a key counted under its digest.
// "keys" says how keys are shown: "hmac-sha256", the first 16 bytes in hex
// of an HMAC-SHA256 of the key (see WithHashSecret and KeyID), or "raw"
// (WithRawKeys). A bad k answers 400, another method 405, each with an
// application/problem+json body.
type Handler struct {
	t      *Tracker
	secret []byte
	raw    bool
	k      int
}

// NewHandler returns a Handler serving t. An invalid option, or a nil t,
// makes it return an error wrapping ErrInvalidOption.
func NewHandler(t *Tracker, opts ...HandlerOption) (*Handler, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: NewHandler: nil Tracker", ErrInvalidOption)
	}
	c := handlerConfig{k: min(DefaultK, t.capacity)}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	switch {
	case c.err != nil:
		return nil, c.err
	case c.k > t.capacity:
		return nil, fmt.Errorf("%w: WithDefaultK: %d keys, more than the capacity %d", ErrInvalidOption, c.k, t.capacity)
	case c.raw && c.secret != nil:
		return nil, fmt.Errorf("%w: WithRawKeys and WithHashSecret exclude each other", ErrInvalidOption)
	}
	if !c.raw && c.secret == nil {
		c.secret = make([]byte, 32)
		rand.Read(c.secret)
	}
	return &Handler{t: t, secret: c.secret, raw: c.raw, k: c.k}, nil
}

// KeyID returns how the Handler shows key: key itself (or, for a long
// key, its hex SHA-256) with WithRawKeys, else its keyed hash. An operator
// who suspects a client finds it in the JSON by this ID.
func (h *Handler) KeyID(key string) string {
	if len(key) > h.t.maxKeyLen {
		d := sha256.Sum256([]byte(key))
		return h.id(hmac.New(sha256.New, h.secret), d[:], true)
	}
	return h.id(hmac.New(sha256.New, h.secret), []byte(key), false)
}

// id returns how the Handler shows a key whose bytes (or digest, if long)
// are b, hashing with mac when keys are hashed. Short and long keys are
// hashed apart, as the tracker counts them.
func (h *Handler) id(mac hash.Hash, b []byte, long bool) string {
	switch {
	case h.raw && long:
		return hex.EncodeToString(b)
	case h.raw:
		return string(b)
	}
	mac.Reset()
	if long {
		mac.Write([]byte{'l'})
	} else {
		mac.Write([]byte{'s'})
	}
	mac.Write(b)
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

// report is the JSON of a Snapshot.
type report struct {
	Keys     string    `json:"keys"`
	Since    time.Time `json:"since"`
	Until    time.Time `json:"until"`
	Total    int64     `json:"total"`
	Capacity int       `json:"capacity"`
	Bound    int64     `json:"bound"`
	Top      []entry   `json:"top"`
}

type entry struct {
	Key   string `json:"key"`
	Long  bool   `json:"long,omitempty"`
	Count int64  `json:"count"`
	Error int64  `json:"error"`
}

// ServeHTTP serves the snapshot.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		problem(w, http.StatusMethodNotAllowed, "Use GET.")
		return
	}
	k := h.k
	if q := r.URL.Query(); q.Has("k") {
		n, err := strconv.Atoi(q.Get("k"))
		if err != nil || n < 1 || n > h.t.capacity {
			problem(w, http.StatusBadRequest, fmt.Sprintf("The parameter k must be a whole number from 1 to %d.", h.t.capacity))
			return
		}
		k = n
	}
	s := h.t.Snapshot(k)
	rep := report{
		Keys:     "hmac-sha256",
		Since:    s.Since.UTC(),
		Until:    s.Until.UTC(),
		Total:    s.Total,
		Capacity: s.Capacity,
		Bound:    s.Bound,
		Top:      make([]entry, len(s.Entries)),
	}
	if h.raw {
		rep.Keys = "raw"
	}
	mac := hmac.New(sha256.New, h.secret)
	for i, e := range s.Entries {
		b := []byte(e.Key)
		if e.Long {
			b, _ = hex.DecodeString(e.Key) // Top encoded it
		}
		rep.Top[i] = entry{Key: h.id(mac, b, e.Long), Long: e.Long, Count: e.Count, Error: e.Error}
	}
	body, err := json.Marshal(rep)
	if err != nil { // a clock outside the years 0 to 9999
		problem(w, http.StatusInternalServerError, "The report could not be encoded.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(append(body, '\n'))
}

// problem answers status with an RFC 9457 problem+json body.
func problem(w http.ResponseWriter, status int, detail string) {
	body, _ := json.Marshal(map[string]any{
		"title":  http.StatusText(status),
		"status": status,
		"detail": detail,
	})
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}
