package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tunejet/tunejet/internal/bus"
)

// Default --connect-timeout: services wait for NATS as long as it takes
// (0); client commands give up soon, to tell the user.
const (
	serviceConnectTimeout = 0
	clientConnectTimeout  = 5 * time.Second
)

// connFlags are the flags that say how to reach NATS.
type connFlags struct {
	o              bus.ConnectOptions
	connectTimeout time.Duration
	// envErr is a TUNEJET_CONNECT_TIMEOUT that is not a duration.
	envErr error
}

// add registers the flags; defaultTimeout is --connect-timeout's default
// when TUNEJET_CONNECT_TIMEOUT is not set.
func (c *connFlags) add(fs *pflag.FlagSet, defaultTimeout time.Duration) {
	fs.StringVar(&c.o.URL, "nats", os.Getenv("NATS_URL"), "NATS server URL(s); empty starts an embedded server (env NATS_URL)")
	fs.StringVar(&c.o.User, "user", os.Getenv("NATS_USER"), "NATS user (env NATS_USER)")
	fs.StringVar(&c.o.Password, "password", os.Getenv("NATS_PASSWORD"), "NATS password (env NATS_PASSWORD)")
	fs.StringVar(&c.o.Token, "token", os.Getenv("NATS_TOKEN"), "NATS token (env NATS_TOKEN)")
	fs.StringVar(&c.o.CredsFile, "creds", os.Getenv("NATS_CREDS"), "NATS credentials file (env NATS_CREDS)")
	fs.StringVar(&c.o.NKeyFile, "nkey", os.Getenv("NATS_NKEY"), "NATS nkey seed file (env NATS_NKEY)")
	fs.StringVar(&c.o.TLSCA, "tls-ca", os.Getenv("NATS_CA"), "CA bundle to verify the NATS server (env NATS_CA)")
	fs.StringVar(&c.o.TLSCert, "tls-cert", os.Getenv("NATS_CERT"), "client certificate (env NATS_CERT)")
	fs.StringVar(&c.o.TLSKey, "tls-key", os.Getenv("NATS_KEY"), "client key (env NATS_KEY)")
	if v := os.Getenv("TUNEJET_CONNECT_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			c.envErr = fmt.Errorf("TUNEJET_CONNECT_TIMEOUT=%q: want a duration such as 30s or 0 (forever)", v)
		}
		defaultTimeout = d
	}
	fs.DurationVar(&c.connectTimeout, "connect-timeout", defaultTimeout,
		"how long to keep trying while NATS does not answer; 0 waits forever (env TUNEJET_CONNECT_TIMEOUT)")
}

// addDeployment registers the flags of a command that needs a
// deployment's NATS: --nats is then required (see required).
func (c *connFlags) addDeployment(fs *pflag.FlagSet, defaultTimeout time.Duration) {
	c.add(fs, defaultTimeout)
	fs.Lookup("nats").Usage = "the deployment's NATS server `URL`(s); required (env NATS_URL; on one machine, tunejet nats-server runs one)"
}

// required is the usage error of a command that needs a deployment when
// neither --nats nor NATS_URL names one.
func (c *connFlags) required(cmd *cobra.Command) error {
	if c.o.URL != "" {
		return nil
	}
	return usageError(cmd, fmt.Errorf("%s needs --nats URL (or NATS_URL), the NATS server of a deployment; on one machine `tunejet nats-server` runs one (the embedded server of `tunejet run` lives only while it runs)", cmd.Name()))
}

// options are the connect options the flags say, logging failed attempts
// to log.
func (c *connFlags) options(log zerolog.Logger) (bus.ConnectOptions, error) {
	if c.envErr != nil {
		return bus.ConnectOptions{}, c.envErr
	}
	if c.connectTimeout < 0 {
		return bus.ConnectOptions{}, fmt.Errorf("--connect-timeout %s: must not be negative (0 waits forever)", c.connectTimeout)
	}
	o := c.o
	o.ConnectTimeout = c.connectTimeout
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = bus.ConnectForever
	}
	o.Log = log
	return o, nil
}

// logFlags choose the log level and format.
type logFlags struct {
	level  string
	format string
}

func (l *logFlags) add(fs *pflag.FlagSet, defaultLevel string) {
	fs.StringVar(&l.level, "log-level", envOr("TUNEJET_LOG_LEVEL", defaultLevel), "log level: debug, info, warn, error (env TUNEJET_LOG_LEVEL)")
	fs.StringVar(&l.format, "log-format", envOr("TUNEJET_LOG_FORMAT", ""), "log format: json or console (coloured only on a terminal); default console on a terminal, json otherwise (env TUNEJET_LOG_FORMAT)")
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
		// Colour codes only for a terminal: not in a file or a pipe.
		w = zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly, NoColor: !isTerminal(os.Stderr)}
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
