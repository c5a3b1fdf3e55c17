package bus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
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
}

// Connect dials NATS with the options, failing with a clear error if the
// server cannot be reached within ctx (or 10 s when ctx has no deadline).
func Connect(ctx context.Context, o ConnectOptions) (*nats.Conn, error) {
	if o.URL == "" {
		o.URL = os.Getenv("NATS_URL")
	}
	if o.URL == "" {
		return nil, errors.New("connect to NATS: no URL given (use --nats or NATS_URL)")
	}
	opts, err := o.natsOptions(ctx)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", o.URL, err)
	}
	return nc, nil
}

func (o ConnectOptions) natsOptions(ctx context.Context) ([]nats.Option, error) {
	timeout := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	opts := []nats.Option{nats.Name(o.Name), nats.Timeout(timeout), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(false)}
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
	// Listen opens a TCP listener on 127.0.0.1 (Port, -1 for any free
	// port); without it the server is reachable only in-process.
	Listen bool
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

// Embedded is a running in-process nats-server.
type Embedded struct {
	Server *server.Server
}

// StartEmbedded starts a nats-server with JetStream in this process. It
// leaves signals to the caller.
func StartEmbedded(o EmbedOptions) (*Embedded, error) {
	if o.StoreDir == "" {
		o.StoreDir = DefaultStoreDir()
	}
	if err := os.MkdirAll(o.StoreDir, 0o755); err != nil {
		return nil, fmt.Errorf("embedded NATS: store dir: %w", err)
	}
	opts := &server.Options{
		ServerName: "tunejet-embedded",
		JetStream:  true,
		StoreDir:   o.StoreDir,
		NoSigs:     true,
		NoLog:      true,
		DontListen: !o.Listen,
		Host:       "127.0.0.1",
		Port:       o.Port,
	}
	if o.Listen && o.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded NATS: not ready after 30s (store %s)", o.StoreDir)
	}
	return &Embedded{Server: s}, nil
}

// Connect opens an in-process client connection.
func (e *Embedded) Connect(name string) (*nats.Conn, error) {
	nc, err := nats.Connect("", nats.InProcessServer(e.Server), nats.Name(name))
	if err != nil {
		return nil, fmt.Errorf("connect to embedded NATS: %w", err)
	}
	return nc, nil
}

// URL is the client URL when the server listens on TCP.
func (e *Embedded) URL() string { return e.Server.ClientURL() }

// Shutdown stops the server and waits for it.
func (e *Embedded) Shutdown() {
	e.Server.Shutdown()
	e.Server.WaitForShutdown()
}
