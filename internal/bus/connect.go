package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/tunejet/tunejet/internal/clock"
)

// ConnectForever, as ConnectOptions.ConnectTimeout, keeps trying until
// ctx ends.
const ConnectForever time.Duration = -1

// The pace of Dial's attempts while no server answers: the wait doubles
// from connectBackoffFloor to connectBackoffCeiling, with jitter, and a failure is
// logged at the first attempt and then at most every connectLogEvery.
const (
	connectBackoffFloor   = 100 * time.Millisecond
	connectBackoffCeiling = 5 * time.Second
	connectLogEvery       = 30 * time.Second
	// dialTimeout bounds one attempt; connectLastTry is the least time an
	// attempt gets, for the one made as ConnectTimeout runs out.
	dialTimeout    = 10 * time.Second
	connectLastTry = 100 * time.Millisecond
)

// ConnectOptions says how to reach a NATS deployment. Every field is
// optional; URL defaults to NATS_URL.
type ConnectOptions struct {
	// URL is one or more comma-separated server URLs.
	URL string
	// Name is the client connection name shown by the server.
	Name string
	// User and Password authenticate with a user name.
	User, Password string
	// Token authenticates with a token.
	Token string
	// CredsFile is a JWT credentials file (.creds).
	CredsFile string
	// NKeyFile is a file holding an nkey seed.
	NKeyFile string
	// TLSCA is a CA bundle to verify the server; TLSCert and TLSKey are a
	// client certificate.
	TLSCA, TLSCert, TLSKey string
	// ConnectTimeout is how long Dial keeps trying while no server
	// answers (refused, unreachable, not resolvable, timed out): 0 makes a
	// single attempt; ConnectForever (any negative value) tries until ctx
	// ends. Errors no retry can mend — a bad URL, bad credentials, a TLS
	// mismatch — end it at once.
	ConnectTimeout time.Duration
	// Log gets the failed attempts: the first, then at most one every 30 s.
	// The zero Logger logs nothing.
	Log zerolog.Logger
}

// Dial connects to NATS with the options and returns a bus on the
// connection; source names the service instance (Bus.Source). Close or
// Drain ends the connection. Each attempt is bounded by ctx's
// deadline, or 10 s when ctx has none; while no server answers it tries
// again for o.ConnectTimeout, waiting 100 ms doubling to 5 s (with jitter)
// between attempts. It returns only once the connection is up, or with a
// clear error: when the time is up, the error is not one to retry, or ctx
// ends (that error wraps ctx.Err()).
func Dial(ctx context.Context, o ConnectOptions, source string, log zerolog.Logger) (*Bus, error) {
	nc, err := connect(ctx, o)
	if err != nil {
		return nil, err
	}
	return onConn(nc, source, log)
}

// onConn is New on a connection the bus made, closed when New fails.
func onConn(nc *nats.Conn, source string, log zerolog.Logger) (*Bus, error) {
	b, err := New(nc, source, log)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return b, nil
}

// connect dials NATS with the options, as Dial says.
func connect(ctx context.Context, o ConnectOptions) (*nats.Conn, error) {
	if o.URL == "" {
		o.URL = os.Getenv("NATS_URL")
	}
	if o.URL == "" {
		return nil, errors.New("connect to NATS: no URL given (use --nats or NATS_URL)")
	}
	opts, err := o.natsOptions()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var giveUp time.Time // zero: never
	if o.ConnectTimeout > 0 {
		giveUp = start.Add(o.ConnectTimeout)
	}
	backoff := connectBackoffFloor
	var logged time.Time
	for attempt := 1; ; attempt++ {
		nc, err := dialOnce(ctx, o.URL, append(opts[:len(opts):len(opts)], nats.Timeout(attemptTimeout(ctx, giveUp))))
		if err == nil {
			if attempt > 1 {
				o.Log.Info().Str("url", redactURLs(o.URL)).Int("attempts", attempt).Dur("elapsed", time.Since(start)).
					Msg("connected to NATS")
			}
			return nc, nil
		}
		if ctx.Err() != nil {
			//nolint:errorlint // the cause is the caller's context; the last attempt's error is only told
			return nil, fmt.Errorf("connect to NATS at %s: gave up waiting after %d attempts in %s (last error: %v): %w",
				o.URL, attempt, time.Since(start).Round(time.Millisecond), err, ctx.Err())
		}
		if o.ConnectTimeout == 0 || !connectRetryable(err) {
			return nil, fmt.Errorf("connect to NATS at %s: %w", o.URL, err)
		}
		now := time.Now()
		if !giveUp.IsZero() && !now.Before(giveUp) {
			return nil, fmt.Errorf("connect to NATS at %s: no answer within the connect timeout of %s (%d attempts): %w",
				o.URL, o.ConnectTimeout, attempt, err)
		}
		if logged.IsZero() || now.Sub(logged) >= connectLogEvery {
			o.Log.Warn().Str("url", redactURLs(o.URL)).Int("attempts", attempt).Dur("elapsed", now.Sub(start)).Err(err).
				Msg("NATS is not answering; trying again")
			logged = now
		}
		// Full jitter over the upper half: services restarted together do
		// not knock in step.
		wait := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, connectBackoffCeiling)
		if !giveUp.IsZero() {
			wait = min(wait, giveUp.Sub(now))
		}
		if clock.Sleep(ctx, wait) != nil {
			//nolint:errorlint // the cause is the caller's context; the last attempt's error is only told
			return nil, fmt.Errorf("connect to NATS at %s: gave up waiting after %d attempts in %s (last error: %v): %w",
				o.URL, attempt, time.Since(start).Round(time.Millisecond), err, ctx.Err())
		}
	}
}

// attemptTimeout is how long one attempt may take: dialTimeout, or less
// when ctx or the connect timeout ends sooner (but never less than
// connectLastTry, so the attempt made as time runs out is a real one).
func attemptTimeout(ctx context.Context, giveUp time.Time) time.Duration {
	t := dialTimeout
	if d, ok := ctx.Deadline(); ok {
		t = min(t, time.Until(d))
	}
	if !giveUp.IsZero() {
		t = min(t, time.Until(giveUp))
	}
	return max(t, connectLastTry)
}

// dialOnce is one nats.Connect, abandoned when ctx ends (a connection made
// after that is closed).
func dialOnce(ctx context.Context, url string, opts []nats.Option) (*nats.Conn, error) {
	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := nats.Connect(url, opts...)
		done <- result{nc, err}
	}()
	select {
	case r := <-done:
		return r.nc, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// connectRetryable reports whether a failed connect may succeed later: no server
// answered, or the network failed. A bad URL, a refused login or a TLS
// failure is not retried.
func connectRetryable(err error) bool {
	if errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	return errors.As(err, &opErr) || errors.As(err, &dnsErr)
}

// redactURLs hides the passwords in a comma-separated URL list, for logs.
func redactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}

// natsOptions are the options of every attempt but its timeout.
func (o ConnectOptions) natsOptions() ([]nats.Option, error) {
	opts := []nats.Option{nats.Name(o.Name), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(false)}
	if o.User != "" {
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	}
	if o.Token != "" {
		opts = append(opts, nats.Token(o.Token))
	}
	if o.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	if o.NKeyFile != "" {
		opt, err := nats.NkeyOptionFromSeed(o.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("nkey file %s: %w", o.NKeyFile, err)
		}
		opts = append(opts, opt)
	}
	if o.TLSCA != "" {
		opts = append(opts, nats.RootCAs(o.TLSCA))
	}
	if o.TLSCert != "" || o.TLSKey != "" {
		if o.TLSCert == "" || o.TLSKey == "" {
			return nil, errors.New("TLS client certificate needs both --tls-cert and --tls-key")
		}
		opts = append(opts, nats.ClientCert(o.TLSCert, o.TLSKey))
	}
	return opts, nil
}

// EmbedOptions configures an in-process nats-server.
type EmbedOptions struct {
	// StoreDir holds JetStream's data. Default ~/.tunejet/jetstream.
	StoreDir string
	// Listen opens a TCP listener on Host (default 127.0.0.1) and Port
	// (-1 or 0 for any free port); without it the server is reachable
	// only in-process.
	Listen bool
	Host   string
	Port   int
}

// DefaultStoreDir is where the embedded server keeps its data by default.
func DefaultStoreDir() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "tunejet", "jetstream")
	}
	return filepath.Join(home, ".tunejet", "jetstream")
}

// ServerVersion is the version of the nats-server StartEmbedded runs.
const ServerVersion = server.VERSION

// Embedded is a running in-process nats-server.
type Embedded struct {
	Server *server.Server
	// StoreDir is the JetStream store it serves.
	StoreDir string
	lock     *storeLock
}

// StartEmbedded starts a nats-server with JetStream in this process. It
// leaves signals to the caller. It locks the store dir for the server's
// life (two servers writing one store corrupt it): when another server,
// here or in another process, runs on it, the error wraps ErrStoreInUse
// and names the process that holds it.
func StartEmbedded(o EmbedOptions) (*Embedded, error) {
	if o.StoreDir == "" {
		o.StoreDir = DefaultStoreDir()
	}
	if abs, err := filepath.Abs(o.StoreDir); err == nil {
		o.StoreDir = abs // named to users as the deployment's store
	}
	if err := os.MkdirAll(o.StoreDir, 0o755); err != nil {
		return nil, fmt.Errorf("embedded NATS: store dir: %w", err)
	}
	lock, err := lockStore(o.StoreDir)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	opts := &server.Options{
		ServerName: "tunejet-embedded",
		JetStream:  true,
		StoreDir:   o.StoreDir,
		NoSigs:     true,
		NoLog:      true,
		DontListen: !o.Listen,
		Host:       cmp.Or(o.Host, "127.0.0.1"),
		Port:       o.Port,
	}
	if o.Listen && o.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	s, err := server.NewServer(opts)
	if err != nil {
		lock.release()
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		s.WaitForShutdown()
		lock.release()
		return nil, fmt.Errorf("embedded NATS: not ready after 30s (store %s)", o.StoreDir)
	}
	return &Embedded{Server: s, StoreDir: o.StoreDir, lock: lock}, nil
}

// Dial returns a bus on a new in-process client connection, which the
// server knows as name; source names the service instance (Bus.Source).
func (e *Embedded) Dial(name, source string, log zerolog.Logger) (*Bus, error) {
	nc, err := nats.Connect("", nats.InProcessServer(e.Server), nats.Name(name))
	if err != nil {
		return nil, fmt.Errorf("connect to embedded NATS: %w", err)
	}
	return onConn(nc, source, log)
}

// drain drains nc and waits until it is closed, at most timeout (then it
// closes it): what it had pending reaches the server before the caller
// shuts an embedded server down. A drain still under way when its server
// goes makes nats.go print the broken pipe on stderr.
func drain(nc *nats.Conn, timeout time.Duration) error {
	closed := make(chan struct{})
	var once sync.Once
	nc.SetClosedHandler(func(*nats.Conn) { once.Do(func() { close(closed) }) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		return fmt.Errorf("drain: %w", err)
	}
	if nc.IsClosed() {
		return nil
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-closed:
		return nil
	case <-t.C:
		nc.Close()
		return fmt.Errorf("drain: not done within %v", timeout)
	}
}

// Drain drains the bus's connection, which its copies share, and waits
// until it is closed, at most timeout (then it closes it): what it had
// pending reaches the server before the caller shuts an embedded server
// down. A drain still under way when its server goes makes nats.go print
// the broken pipe on stderr.
func (b *Bus) Drain(timeout time.Duration) error { return drain(b.nc, timeout) }

// StartDrain starts draining the bus's connection and returns at once:
// the connection closes when what it had pending has reached the server.
func (b *Bus) StartDrain() error { return b.nc.Drain() }

// Close closes the bus's connection at once; what it had pending is lost.
func (b *Bus) Close() { b.nc.Close() }

// ServerURL is the URL of the server the bus is connected to, without
// credentials.
func (b *Bus) ServerURL() string { return b.nc.ConnectedUrlRedacted() }

// URL is the client URL when the server listens on TCP, "" when it does
// not.
func (e *Embedded) URL() string {
	if e.Server.Addr() == nil {
		return ""
	}
	return e.Server.ClientURL()
}

// Shutdown stops the server, waits for it, and unlocks the store dir.
func (e *Embedded) Shutdown() {
	e.Server.Shutdown()
	e.Server.WaitForShutdown()
	e.lock.release()
}
