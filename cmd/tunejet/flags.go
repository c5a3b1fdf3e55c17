package main

import (
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/tunejet/tunejet/internal/bus"
)

// connFlags are the flags that say how to reach NATS.
type connFlags struct{ o bus.ConnectOptions }

func (c *connFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&c.o.URL, "nats", os.Getenv("NATS_URL"), "NATS server URL(s); empty starts an embedded server (env NATS_URL)")
	fs.StringVar(&c.o.User, "user", os.Getenv("NATS_USER"), "NATS user (env NATS_USER)")
	fs.StringVar(&c.o.Password, "password", os.Getenv("NATS_PASSWORD"), "NATS password (env NATS_PASSWORD)")
	fs.StringVar(&c.o.Token, "token", os.Getenv("NATS_TOKEN"), "NATS token (env NATS_TOKEN)")
	fs.StringVar(&c.o.CredsFile, "creds", os.Getenv("NATS_CREDS"), "NATS credentials file (env NATS_CREDS)")
	fs.StringVar(&c.o.NKeyFile, "nkey", os.Getenv("NATS_NKEY"), "NATS nkey seed file (env NATS_NKEY)")
	fs.StringVar(&c.o.TLSCA, "tls-ca", os.Getenv("NATS_CA"), "CA bundle to verify the NATS server (env NATS_CA)")
	fs.StringVar(&c.o.TLSCert, "tls-cert", os.Getenv("NATS_CERT"), "client certificate (env NATS_CERT)")
	fs.StringVar(&c.o.TLSKey, "tls-key", os.Getenv("NATS_KEY"), "client key (env NATS_KEY)")
}

// logFlags choose the log level and format.
type logFlags struct {
	level  string
	format string
}

func (l *logFlags) add(fs *pflag.FlagSet, defaultLevel string) {
	fs.StringVar(&l.level, "log-level", envOr("TUNEJET_LOG_LEVEL", defaultLevel), "log level: debug, info, warn, error (env TUNEJET_LOG_LEVEL)")
	fs.StringVar(&l.format, "log-format", envOr("TUNEJET_LOG_FORMAT", ""), "log format: json or console; default console on a terminal, json otherwise (env TUNEJET_LOG_FORMAT)")
}

func (l *logFlags) logger() (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(l.level)
	if err != nil {
		return zerolog.Nop(), err
	}
	var w io.Writer = os.Stderr
	format := l.format
	if format == "" {
		format = "json"
		if isTerminal(os.Stderr) {
			format = "console"
		}
	}
	if format == "console" {
		w = zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func nopLogger() zerolog.Logger { return zerolog.Nop() }
