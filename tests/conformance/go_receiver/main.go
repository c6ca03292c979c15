// The zoo's Go stack: Standard Webhooks receivers written with the standard library only
// (net/http, crypto/hmac, crypto/sha256, encoding/base64, encoding/json, sync), the way Go
// teams write them without an SDK. One process serves every variant, each with an inbox of
// its own, under /<variant>/webhooks, and the hookproof probe under
// /<variant>/_hookproof/events/<event_id>.
//
// Env: SECRETS (comma-separated whsec_ secrets, tried in order), PROBE_TOKEN, MAX_BODY
// (bytes), PORT (0: any free port). Prints "listening <port>" once it listens.
//
// "Recorded" is an entry of an in-memory map written under a mutex before the answer (the
// zoo's stand-in for a database commit). Every accepted event's effect takes a few
// milliseconds (processingTime), as a real write does.
//
// BUGS: one realistic bug per variant; "correct" has none.
//
//	correct              none
//	header-map-case      r.Header["webhook-id"] indexes the map with a non-canonical key (Go
//	                     stores "Webhook-Id"): every header reads empty, every delivery is 400
//	split-panic          strings.Split(entry, ",")[1] panics on an entry without a comma;
//	                     net/http recovers the panic and drops the connection unanswered
//	maxbytes-500         http.MaxBytesReader's error is answered 500 (a retry invitation) not 413
//	bytes-equal          bytes.Equal instead of hmac.Equal (not constant time; timing only)
//	check-then-act       the mutex is released between the dedupe lookup and the insert, so
//	                     concurrent copies all pass the check and all apply the effect
//	ack-then-goroutine   answers 200, then records the event in a goroutine
//	future-unbounded     time.Since(ts) > tolerance: a timestamp in the future is never too new
//	atoi-ignored         ts, _ := strconv.Atoi(...): a malformed timestamp reads 0 (1970) and is
//	                     refused 401 as stale instead of 400 as malformed
//	json-remarshal       verifies json.Marshal(decoded) instead of the raw bytes received
//	dedupe-id-signature  the inbox key is id + signature header: a re-signed retry is new
//	in-flight-409        a copy arriving while the first is processed is answered 409 Conflict
//	                     (a 4xx: the sender gives up on it) instead of 503 + Retry-After
//	first-secret-only    verifies with SECRETS[0] only (rotation breaks)
//	first-entry-only     checks only the first space-separated signature entry
//	limit-reader         io.LimitReader(r.Body, maxBody): an oversized body is silently
//	                     truncated and refused 401 (bad signature) instead of 413
//	whsec-key            the HMAC key is the "whsec_..." string itself, not its base64 key
//	record-before-verify the webhook-id is marked seen before the signature is verified
//	duration-as-seconds  now.Unix()-ts > int64(tolerance) compares seconds with a
//	                     time.Duration's nanoseconds: no timestamp is ever too old
//	prefix-compare       hmac.Equal(got, expected[:len(got)]): a truncated signature matches
//	utf8-unchecked       trusts json.Unmarshal to refuse a body that is not UTF-8 (it does not:
//	                     invalid bytes become U+FFFD and a signed one is applied: a should)
//	ctx-abandon          does the work under the request's context (as a database call given
//	                     r.Context() does) after recording the id: a sender that hangs up
//	                     cancels it, and the event stays in flight, never applied
//	content-type-equal   r.Header.Get("Content-Type") != "application/json" is answered 415: a
//	                     charset parameter ("application/json; charset=utf-8") is refused
//	tenant-assert        reads data.tenant from the body before verifying, to pick the tenant,
//	                     with unchecked type assertions: null, a list or {} panics, and net/http
//	                     drops the connection unanswered
package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

const (
	tolerance      = 5 * time.Minute
	processingTime = 25 * time.Millisecond
	// slowWork is ctx-abandon's database call: long enough that a sender's hang-up reaches the
	// handler before it ends, however loaded the machine (25 ms was once missed in CI).
	slowWork = 250 * time.Millisecond
)

var variantNames = []string{
	"correct",
	"header-map-case",
	"split-panic",
	"maxbytes-500",
	"bytes-equal",
	"check-then-act",
	"ack-then-goroutine",
	"future-unbounded",
	"atoi-ignored",
	"json-remarshal",
	"dedupe-id-signature",
	"in-flight-409",
	"first-secret-only",
	"first-entry-only",
	"limit-reader",
	"whsec-key",
	"record-before-verify",
	"duration-as-seconds",
	"prefix-compare",
	"utf8-unchecked",
	"tenant-assert",
	"ctx-abandon",
	"content-type-equal",
}

type entry struct {
	committed  bool
	effects    int
	deliveries int
}

type variant struct {
	bug   string
	mu    sync.Mutex
	inbox map[string]*entry
	// probeKey maps an event id to its inbox key (differs from the id only for
	// dedupe-id-signature, whose inbox is keyed on id + signature).
	byID map[string][]string
}

type server struct {
	secrets    []string
	keys       [][]byte
	probeToken string
	maxBody    int64
	variants   map[string]*variant
}

func problem(w http.ResponseWriter, status int, slug, title string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	doc, _ := json.Marshal(map[string]interface{}{
		"type":   "https://example.test/problems/" + slug,
		"title":  title,
		"status": status,
	})
	_, _ = w.Write(doc)
}

func ok(w http.ResponseWriter, doc map[string]interface{}) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	body, _ := json.Marshal(doc)
	_, _ = w.Write(body)
}

func sign(key []byte, id, ts string, body []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	return mac.Sum(nil)
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.EscapedPath(), "/")
	name, rest, _ := strings.Cut(path, "/")
	v, found := s.variants[name]
	if !found {
		problem(w, http.StatusNotFound, "not-found", "no such variant")
		return
	}
	switch {
	case rest == "webhooks":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			problem(w, http.StatusMethodNotAllowed, "method-not-allowed", "POST only")
			return
		}
		s.webhook(v, w, r)
	case strings.HasPrefix(rest, "_hookproof/events/"):
		id, err := url.PathUnescape(strings.TrimPrefix(rest, "_hookproof/events/"))
		if err != nil {
			problem(w, http.StatusNotFound, "not-found", "unknown event")
			return
		}
		s.probe(v, w, r, id)
	default:
		problem(w, http.StatusNotFound, "not-found", "no such route")
	}
}

func (s *server) probe(v *variant, w http.ResponseWriter, r *http.Request, id string) {
	want := []byte("Bearer " + s.probeToken)
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
		problem(w, http.StatusUnauthorized, "unauthorized", "missing or wrong probe token")
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	keys := v.byID[id]
	if len(keys) == 0 {
		problem(w, http.StatusNotFound, "not-found", "unknown event")
		return
	}
	committed, effects, deliveries := true, 0, 0
	for _, key := range keys {
		e := v.inbox[key]
		committed = committed && e.committed
		effects += e.effects
		deliveries += e.deliveries
	}
	status := "in_flight"
	if committed {
		status = "committed"
	}
	ok(w, map[string]interface{}{
		"event_id": id, "status": status, "effects": effects, "deliveries": deliveries,
	})
}

// lookup returns the inbox entry under key, creating it (in flight) when absent; the caller
// holds v.mu.
func (v *variant) lookup(key, id string) (*entry, bool) {
	e, seen := v.inbox[key]
	if !seen {
		e = &entry{}
		v.inbox[key] = e
		v.byID[id] = append(v.byID[id], key)
	}
	return e, seen
}

// apply is the event's effect (a write that takes processingTime).
func (v *variant) apply(e *entry) {
	time.Sleep(processingTime)
	v.mu.Lock()
	e.effects++
	e.committed = true
	v.mu.Unlock()
}

func (s *server) readBody(v *variant, w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if v.bug == "limit-reader" {
		body, err := io.ReadAll(io.LimitReader(r.Body, s.maxBody))
		if err != nil {
			problem(w, http.StatusBadRequest, "unreadable-body", "the body could not be read")
			return nil, false
		}
		return body, true
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) && v.bug != "maxbytes-500" {
			problem(w, http.StatusRequestEntityTooLarge, "too-large", "the body is too large")
			return nil, false
		}
		if v.bug == "maxbytes-500" {
			http.Error(w, "internal error: "+err.Error(), http.StatusInternalServerError)
			return nil, false
		}
		problem(w, http.StatusBadRequest, "unreadable-body", "the body could not be read")
		return nil, false
	}
	return body, true
}

func header(v *variant, r *http.Request, name string) string {
	if v.bug == "header-map-case" {
		values := r.Header[name] // non-canonical key: always nil
		if len(values) == 0 {
			return ""
		}
		return values[0]
	}
	return r.Header.Get(name)
}

// timestampRefusal says why the timestamp is refused (0: it is within the tolerance).
func timestampRefusal(v *variant, raw string) (int, string) {
	var ts int64
	if v.bug == "atoi-ignored" {
		n, _ := strconv.Atoi(raw)
		ts = int64(n)
	} else {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return http.StatusBadRequest, "the webhook-timestamp is not an integer"
		}
		ts = n
	}
	now := time.Now()
	switch v.bug {
	case "future-unbounded":
		if time.Since(time.Unix(ts, 0)) > tolerance {
			return http.StatusUnauthorized, "the timestamp is outside the tolerance"
		}
	case "duration-as-seconds":
		delta := now.Unix() - ts
		if delta < 0 {
			delta = -delta
		}
		if delta > int64(tolerance) {
			return http.StatusUnauthorized, "the timestamp is outside the tolerance"
		}
	default:
		delta := now.Sub(time.Unix(ts, 0))
		if delta > tolerance || delta < -tolerance {
			return http.StatusUnauthorized, "the timestamp is outside the tolerance"
		}
	}
	return 0, ""
}

func (s *server) verified(v *variant, id, ts, header string, body []byte) bool {
	keys := s.keys
	if v.bug == "first-secret-only" {
		keys = keys[:1]
	}
	if v.bug == "whsec-key" {
		keys = nil
		for _, secret := range s.secrets {
			keys = append(keys, []byte(secret))
		}
	}
	entries := strings.Fields(header)
	if v.bug == "first-entry-only" && len(entries) > 1 {
		entries = entries[:1]
	}
	for _, e := range entries {
		var version, encoded string
		if v.bug == "split-panic" {
			parts := strings.Split(e, ",")
			version, encoded = parts[0], parts[1] // panics on an entry without a comma
		} else {
			var found bool
			version, encoded, found = strings.Cut(e, ",")
			if !found {
				continue
			}
		}
		if version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil {
			continue
		}
		for _, key := range keys {
			expected := sign(key, id, ts, body)
			switch v.bug {
			case "bytes-equal":
				if bytes.Equal(got, expected) {
					return true
				}
			case "prefix-compare":
				if len(got) > 0 && len(got) <= len(expected) && hmac.Equal(got, expected[:len(got)]) {
					return true
				}
			default:
				if hmac.Equal(got, expected) {
					return true
				}
			}
		}
	}
	return false
}

func (s *server) webhook(v *variant, w http.ResponseWriter, r *http.Request) {
	if v.bug == "content-type-equal" && r.Header.Get("Content-Type") != "application/json" {
		problem(w, http.StatusUnsupportedMediaType, "unsupported-media-type", "send application/json")
		return
	}
	body, readable := s.readBody(v, w, r)
	if !readable {
		return
	}
	id := header(v, r, "webhook-id")
	ts := header(v, r, "webhook-timestamp")
	sig := header(v, r, "webhook-signature")
	if id == "" || ts == "" || sig == "" {
		problem(w, http.StatusBadRequest, "missing-headers",
			"webhook-id, webhook-timestamp and webhook-signature are required")
		return
	}
	if v.bug == "tenant-assert" {
		var peeked interface{}
		if err := json.Unmarshal(body, &peeked); err != nil {
			problem(w, http.StatusBadRequest, "invalid-payload", "the body is not JSON")
			return
		}
		data := peeked.(map[string]interface{})["data"].(map[string]interface{})
		if tenant, _ := data["tenant"].(string); tenant != "" {
			w.Header().Set("X-Tenant", tenant)
		}
	}
	if v.bug == "record-before-verify" {
		v.mu.Lock()
		e, seen := v.lookup(id, id)
		if seen {
			e.deliveries++
			committed := e.committed
			v.mu.Unlock()
			if committed {
				ok(w, map[string]interface{}{"status": "duplicate"})
			} else {
				w.Header().Set("Retry-After", "1")
				problem(w, http.StatusServiceUnavailable, "in-flight", "a copy is being processed")
			}
			return
		}
		v.mu.Unlock()
	}
	if status, why := timestampRefusal(v, ts); status != 0 {
		problem(w, status, "bad-timestamp", why)
		return
	}
	signed := body
	if v.bug == "json-remarshal" {
		var decoded interface{}
		if err := json.Unmarshal(body, &decoded); err != nil {
			problem(w, http.StatusBadRequest, "invalid-payload", "the body is not JSON")
			return
		}
		signed, _ = json.Marshal(decoded)
	}
	if !s.verified(v, id, ts, sig, signed) {
		problem(w, http.StatusUnauthorized, "bad-signature", "no signature matches")
		return
	}
	var payload map[string]interface{}
	if v.bug != "utf8-unchecked" && !utf8.Valid(body) {
		problem(w, http.StatusBadRequest, "invalid-payload", "the body is not UTF-8")
		return
	}
	if err := json.Unmarshal(body, &payload); err != nil || payload == nil {
		problem(w, http.StatusBadRequest, "invalid-payload", "the body is not a JSON object")
		return
	}
	switch v.bug {
	case "check-then-act":
		v.mu.Lock()
		e, seen := v.inbox[id]
		if seen {
			e.deliveries++
		}
		v.mu.Unlock()
		if seen {
			ok(w, map[string]interface{}{"status": "duplicate"})
			return
		}
		time.Sleep(processingTime) // the effect, outside the lock
		v.mu.Lock()
		e, _ = v.lookup(id, id)
		e.deliveries++
		e.effects++
		e.committed = true
		v.mu.Unlock()
		ok(w, map[string]interface{}{"status": "processed"})
		return
	case "ack-then-goroutine":
		ok(w, map[string]interface{}{"status": "accepted"})
		go func() {
			v.mu.Lock()
			e, seen := v.lookup(id, id)
			e.deliveries++
			v.mu.Unlock()
			if !seen {
				v.apply(e)
			}
		}()
		return
	}
	key := id
	if v.bug == "dedupe-id-signature" {
		key = id + "|" + sig
	}
	v.mu.Lock()
	e, seen := v.lookup(key, id)
	if seen && v.bug != "record-before-verify" || v.bug == "record-before-verify" && e.deliveries > 0 {
		e.deliveries++
		committed := e.committed
		v.mu.Unlock()
		if committed {
			ok(w, map[string]interface{}{"status": "duplicate"})
			return
		}
		if v.bug == "in-flight-409" {
			problem(w, http.StatusConflict, "in-flight", "a copy is being processed")
			return
		}
		w.Header().Set("Retry-After", "1")
		problem(w, http.StatusServiceUnavailable, "in-flight", "a copy is being processed")
		return
	}
	e.deliveries++
	v.mu.Unlock()
	if v.bug == "ctx-abandon" {
		select {
		case <-time.After(slowWork):
			v.mu.Lock()
			e.effects++
			e.committed = true
			v.mu.Unlock()
			ok(w, map[string]interface{}{"status": "processed"})
		case <-r.Context().Done(): // context canceled: the entry is left in flight
		}
		return
	}
	v.apply(e)
	ok(w, map[string]interface{}{"status": "processed"})
}

func main() {
	s := &server{
		probeToken: os.Getenv("PROBE_TOKEN"),
		maxBody:    1 << 20,
		variants:   map[string]*variant{},
	}
	if s.probeToken == "" {
		s.probeToken = "probe-token-for-tests"
	}
	if raw := os.Getenv("MAX_BODY"); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n <= 0 {
			log.Fatalf("MAX_BODY=%q is not a positive integer", raw)
		}
		s.maxBody = n
	}
	for _, secret := range strings.Split(os.Getenv("SECRETS"), ",") {
		if secret == "" {
			continue
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if err != nil {
			log.Fatalf("a secret is not whsec_<base64>: %v", err)
		}
		s.secrets = append(s.secrets, secret)
		s.keys = append(s.keys, key)
	}
	if len(s.keys) == 0 {
		log.Fatal("SECRETS is empty")
	}
	for _, name := range variantNames {
		s.variants[name] = &variant{bug: name, inbox: map[string]*entry{}, byID: map[string][]string{}}
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "0"
	}
	listener, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening %d\n", listener.Addr().(*net.TCPAddr).Port)
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(listener))
}
