// A Standard Webhooks sender as a Go platform team writes one with the standard library only
// (net/http client, crypto/hmac, crypto/sha256, encoding/base64, time, math/rand, sync), with
// variants that each carry ONE realistic bug. Written from docs/check-sender.md, the Standard
// Webhooks spec and `hookproof check-sender --help` alone.
//
// Usage:  go build -o sender main.go && ./sender   (one process serves every variant)
//
//	env WEBHOOK_SECRET        whsec_<base64 key> (required)
//	env WEBHOOK_BASE_DELAY    seconds of the first retry delay (default 0.5)
//	env WEBHOOK_MAX_DELAY     cap of a delay in seconds (default 2)
//	env WEBHOOK_JITTER        "full" (wait uniform in [0, min(cap, base*2^(n-1))]) or "none"
//	                          (wait exactly min(cap, base*2^(n-1))) (default full)
//	env WEBHOOK_MAX_ATTEMPTS  attempts per event, the first one included (default 4)
//	env WEBHOOK_TIMEOUT       seconds per request, connect to last byte (default 1)
//	env PORT                  port of the control API on 127.0.0.1 (default 0: a free one)
//
// It prints "listening on PORT" and serves the control API:
//
//	POST /v/VARIANT/deliveries   body: the target URL  ->  202, one new event delivered to it
//	GET  /healthz                ->  200
//
// Every retry is scheduled from the previous attempt's *scheduled* time; 2xx is delivered;
// 408, 429, 5xx, timeouts and connection errors are retried; everything else stops; a
// Retry-After (seconds or HTTP date) on a retried answer postpones the next attempt.
//
// BUGS (one line per variant):
//
//	correct              none: per-event id, fresh timestamp and signature per attempt, backoff
//	uuid-per-attempt     webhook-id is a new random id on every attempt, not once per event
//	stale-timestamp      webhook-timestamp and signature computed once per event, reused on retries
//	encoder-newline      body sent from json.NewEncoder (a trailing "\n"), signature over json.Marshal
//	whsec-key            HMAC keyed with the "whsec_..." string itself, not its base64-decoded key
//	no-client-timeout    http.Client{} without Timeout: waits forever on a silent receiver
//	follow-redirects     the default CheckRedirect: a 307 is followed to its Location
//	retry-4xx            `resp.StatusCode >= 400` retried: 401, 403, 410, 422 retried too
//	retry-503-only       only 429 and 503 retried: a 500 is taken as final
//	error-not-retried    a transport error (timeout, reset) ends the delivery: only statuses retry
//	one-fewer-attempt    `for attempt := 1; attempt < maxAttempts; attempt++`: one attempt short
//	one-extra-attempt    `for attempt := 0; attempt <= maxAttempts; attempt++`: one attempt too many
//	retry-after-ignored  Retry-After never read: the next attempt follows the schedule
//	fixed-delay          the base delay (with jitter: a draw below it) after every attempt, no backoff
//	linear-delay         `time.Duration(attempt) * base`: 0.5 s, 1 s, 1.5 s instead of 0.5, 1, 2
//	success-below-400    `resp.StatusCode < 400` counted as delivered: a 3xx is a success
//	async-overlap        next attempt armed with time.AfterFunc before the request: overlaps a slow one
//	jitter-nanoseconds   jitter drawn as rand.Int63n(ms) and used as a Duration: nanoseconds, no wait
package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	mrand "math/rand"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

var variantNames = []string{
	"correct",
	"uuid-per-attempt",
	"stale-timestamp",
	"encoder-newline",
	"whsec-key",
	"no-client-timeout",
	"follow-redirects",
	"retry-4xx",
	"retry-503-only",
	"error-not-retried",
	"one-fewer-attempt",
	"one-extra-attempt",
	"retry-after-ignored",
	"fixed-delay",
	"linear-delay",
	"success-below-400",
	"async-overlap",
	"jitter-nanoseconds",
}

type config struct {
	secret      string
	key         []byte
	base        time.Duration
	maxDelay    time.Duration
	jitter      bool
	maxAttempts int
	timeout     time.Duration
}

type event struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      eventData `json:"data"`
}

type eventData struct {
	Message string `json:"message"`
	Target  string `json:"target"`
	Amount  int    `json:"amount"`
}

type outcome int

const (
	delivered outcome = iota
	retry
	stop
)

type sender struct {
	bug    string
	cfg    config
	client *http.Client
	rng    *mrand.Rand
	mu     sync.Mutex // guards rng
}

func newSender(bug string, cfg config) *sender {
	client := &http.Client{
		Timeout: cfg.timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirect is an answer, never followed
		},
	}
	switch bug {
	case "no-client-timeout":
		client = &http.Client{CheckRedirect: client.CheckRedirect}
	case "follow-redirects":
		client = &http.Client{Timeout: cfg.timeout}
	}
	return &sender{bug: bug, cfg: cfg, client: client, rng: mrand.New(mrand.NewSource(time.Now().UnixNano()))}
}

func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "msg_" + hex.EncodeToString(b[:])
}

func (s *sender) sign(id, ts string, body []byte) string {
	key := s.cfg.key
	if s.bug == "whsec-key" {
		key = []byte(s.cfg.secret)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// ceiling is the wait after attempt n (1-based) before any jitter: min(cap, base * 2^(n-1)).
func (s *sender) ceiling(n int) time.Duration {
	d := s.cfg.base
	for i := 1; i < n && d < s.cfg.maxDelay; i++ {
		d *= 2
	}
	if d > s.cfg.maxDelay {
		d = s.cfg.maxDelay
	}
	return d
}

func (s *sender) wait(n int) time.Duration {
	c := s.ceiling(n)
	switch s.bug {
	case "fixed-delay":
		c = s.cfg.base
	case "linear-delay":
		c = time.Duration(n) * s.cfg.base
		if c > s.cfg.maxDelay {
			c = s.cfg.maxDelay
		}
	}
	if !s.cfg.jitter {
		return c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bug == "jitter-nanoseconds" {
		return time.Duration(s.rng.Int63n(int64(c/time.Millisecond) + 1))
	}
	return time.Duration(s.rng.Int63n(int64(c) + 1))
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date (0: none).
func retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

func (s *sender) classify(resp *http.Response, err error) outcome {
	if err != nil {
		if s.bug == "error-not-retried" {
			return stop
		}
		return retry // timeouts and connection errors
	}
	code := resp.StatusCode
	if s.bug == "success-below-400" && code < 400 {
		return delivered
	}
	switch {
	case code >= 200 && code < 300:
		return delivered
	case s.bug == "retry-4xx" && code >= 400:
		return retry
	case s.bug == "retry-503-only":
		if code == 429 || code == 503 {
			return retry
		}
		return stop
	case code == 408 || code == 429 || code >= 500:
		return retry
	}
	return stop
}

type message struct {
	id     string
	target string
	body   []byte
	signed []byte // the bytes the signature covers (the body, unless a bug says otherwise)
	ts     string // the stale-timestamp bug's one timestamp
	sig    string // ... and its one signature
}

// attempt sends one attempt and says what to do next, with any Retry-After.
func (s *sender) attempt(m *message, n int) (outcome, time.Duration) {
	id := m.id
	if s.bug == "uuid-per-attempt" {
		id = newID()
	}
	ts, sig := m.ts, m.sig
	if s.bug != "stale-timestamp" {
		ts = strconv.FormatInt(time.Now().Unix(), 10)
		sig = s.sign(id, ts, m.signed)
	}
	req, err := http.NewRequest(http.MethodPost, m.target, bytes.NewReader(m.body))
	if err != nil {
		log.Printf("%s %s: %v", s.bug, id, err)
		return stop, 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "go-webhooks/1.0")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", sig)
	resp, err := s.client.Do(req)
	if resp != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
	result := s.classify(resp, err)
	status := "error"
	if err == nil {
		status = resp.Status
	} else {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			status = "timeout"
		}
	}
	log.Printf("%s %s attempt %d: %s", s.bug, m.id, n, status)
	if result != retry || err != nil || s.bug == "retry-after-ignored" {
		return result, 0
	}
	return result, retryAfter(resp.Header)
}

func (s *sender) newMessage(target string) (*message, error) {
	ev := event{
		Type:      "test.ping",
		Timestamp: time.Now().UTC().Truncate(time.Second),
		Data:      eventData{Message: "hello from go <webhooks> & co", Target: target, Amount: 1999},
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	m := &message{id: newID(), target: target, body: body, signed: body}
	if s.bug == "encoder-newline" {
		var buf bytes.Buffer
		if err := json.NewEncoder(&buf).Encode(ev); err != nil {
			return nil, err
		}
		m.body = buf.Bytes() // what goes on the wire; the signature still covers json.Marshal
	}
	if s.bug == "stale-timestamp" {
		m.ts = strconv.FormatInt(time.Now().Unix(), 10)
		m.sig = s.sign(m.id, m.ts, m.signed)
	}
	return m, nil
}

func sleepUntil(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
}

// deliver runs one event's attempts, one at a time.
func (s *sender) deliver(m *message) {
	if s.bug == "async-overlap" {
		s.deliverAsync(m, 1, time.Now())
		return
	}
	first, last := 1, s.cfg.maxAttempts
	switch s.bug {
	case "one-fewer-attempt":
		last = s.cfg.maxAttempts - 1
	case "one-extra-attempt":
		first = 0
	}
	scheduled := time.Now()
	for attempt := first; attempt <= last; attempt++ {
		n := attempt - first + 1
		sleepUntil(scheduled)
		result, ra := s.attempt(m, n)
		if result != retry {
			return
		}
		scheduled = scheduled.Add(s.wait(n))
		if ra > 0 {
			if later := time.Now().Add(ra); later.After(scheduled) {
				scheduled = later
			}
		}
	}
}

// deliverAsync arms the next attempt before sending this one and disarms it on an answer that
// ends the delivery: a slow answer is overlapped by the next attempt.
func (s *sender) deliverAsync(m *message, n int, scheduled time.Time) {
	var timer *time.Timer
	next := scheduled.Add(s.wait(n))
	if n < s.cfg.maxAttempts {
		timer = time.AfterFunc(time.Until(next), func() { s.deliverAsync(m, n+1, next) })
	}
	result, ra := s.attempt(m, n)
	if timer == nil {
		return
	}
	if result != retry {
		timer.Stop()
		return
	}
	if later := time.Now().Add(ra); ra > 0 && later.After(next) && timer.Stop() {
		time.AfterFunc(time.Until(later), func() { s.deliverAsync(m, n+1, later) })
	}
}

func seconds(name string, fallback float64) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return time.Duration(fallback * float64(time.Second))
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		log.Fatalf("%s: not a number of seconds: %q", name, v)
	}
	return time.Duration(f * float64(time.Second))
}

func loadConfig() config {
	secret := os.Getenv("WEBHOOK_SECRET")
	if !strings.HasPrefix(secret, "whsec_") {
		log.Fatal("WEBHOOK_SECRET must be whsec_<base64 key>")
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		log.Fatalf("WEBHOOK_SECRET: %v", err)
	}
	attempts := 4
	if v := os.Getenv("WEBHOOK_MAX_ATTEMPTS"); v != "" {
		if attempts, err = strconv.Atoi(v); err != nil || attempts < 1 {
			log.Fatalf("WEBHOOK_MAX_ATTEMPTS: %q", v)
		}
	}
	jitter := os.Getenv("WEBHOOK_JITTER")
	if jitter != "" && jitter != "full" && jitter != "none" {
		log.Fatalf("WEBHOOK_JITTER: %q (full or none)", jitter)
	}
	return config{
		secret:      secret,
		key:         key,
		base:        seconds("WEBHOOK_BASE_DELAY", 0.5),
		maxDelay:    seconds("WEBHOOK_MAX_DELAY", 2),
		jitter:      jitter != "none",
		maxAttempts: attempts,
		timeout:     seconds("WEBHOOK_TIMEOUT", 1),
	}
}

func main() {
	cfg := loadConfig()
	senders := map[string]*sender{}
	for _, name := range variantNames {
		senders[name] = newSender(name, cfg)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/v/", func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		if len(parts) != 3 || parts[2] != "deliveries" || senders[parts[1]] == nil {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		raw, err := io.ReadAll(io.LimitReader(r.Body, 4096))
		target := strings.TrimSpace(string(raw))
		if err != nil || !strings.HasPrefix(target, "http") {
			http.Error(w, "the body must be the target URL", http.StatusBadRequest)
			return
		}
		s := senders[parts[1]]
		m, err := s.newMessage(target)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		go s.deliver(m)
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintln(w, m.id)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("PORT"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on %d\n", ln.Addr().(*net.TCPAddr).Port)
	log.Fatal(http.Serve(ln, mux))
}
