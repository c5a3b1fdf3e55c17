package deploytest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// natsUsers are the users of accounts.conf, sorted; every one but sys is in
// the TUNEJET account.
var natsUsers = []string{"admin", "client", "controller", "observer", "restorer", "runner", "syncer", "sys"}

// testPassword is the password the tests give a user.
func testPassword(user string) string { return "test-" + user + "-password" }

// setPasswords sets the variables accounts.conf reads, for this test only.
func setPasswords(t *testing.T) {
	t.Helper()
	for _, u := range natsUsers {
		t.Setenv(passwordEnvOf(u), testPassword(u))
	}
}

func TestTestUsersAreTheConfiguredUsers(t *testing.T) {
	var want []string
	for _, u := range natsUsers {
		want = append(want, passwordEnvOf(u))
	}
	slices.Sort(want)
	if got := accountsPasswordEnv(t); !slices.Equal(got, want) {
		t.Fatalf("accounts.conf reads %v; the tests know the users %v: update natsUsers", got, natsUsers)
	}
}

func TestNATSNodeConfigs(t *testing.T) {
	setPasswords(t)
	dir := filepath.Join(deployDir(t), "nats")
	var names []string
	for n := 1; n <= 3; n++ {
		file := filepath.Join(dir, fmt.Sprintf("nats-%d.conf", n))
		opts, err := server.ProcessConfigFile(file)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		names = append(names, opts.ServerName)
		if want := fmt.Sprintf("nats-%d", n); opts.ServerName != want {
			t.Errorf("%s: server_name %q, want %q", file, opts.ServerName, want)
		}
		if opts.Port != 4222 || opts.HTTPPort != 8222 {
			t.Errorf("%s: client port %d, monitoring port %d; want 4222 and 8222", file, opts.Port, opts.HTTPPort)
		}
		if !opts.JetStream || opts.StoreDir == "" {
			t.Errorf("%s: JetStream %v, store_dir %q; want JetStream on a volume", file, opts.JetStream, opts.StoreDir)
		}
		if opts.Cluster.Name != "tunejet" || opts.Cluster.Port != 6222 || !opts.Cluster.NoAdvertise {
			t.Errorf("%s: cluster %q port %d no_advertise %v", file, opts.Cluster.Name, opts.Cluster.Port, opts.Cluster.NoAdvertise)
		}
		var routes []string
		for _, r := range opts.Routes {
			routes = append(routes, r.Host)
		}
		if want := []string{"nats-1:6222", "nats-2:6222", "nats-3:6222"}; !slices.Equal(routes, want) {
			t.Errorf("%s: routes %v, want %v", file, routes, want)
		}
		if opts.LameDuckDuration <= 0 {
			t.Errorf("%s: no lame duck duration: a rolling restart would drop clients", file)
		}
		checkUsers(t, file, opts)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(names)))) != 3 {
		t.Errorf("server names %v are not unique", names)
	}
}

// checkUsers checks the accounts a configuration defines.
func checkUsers(t *testing.T, file string, opts *server.Options) {
	t.Helper()
	if opts.SystemAccount != "SYS" {
		t.Errorf("%s: system_account %q, want SYS", file, opts.SystemAccount)
	}
	var got []string
	for _, u := range opts.Users {
		got = append(got, u.Username)
		wantAccount := "TUNEJET"
		if u.Username == "sys" {
			wantAccount = "SYS"
		}
		if u.Account == nil || u.Account.Name != wantAccount {
			t.Errorf("%s: user %s is not in account %s", file, u.Username, wantAccount)
		}
		if u.Password != testPassword(u.Username) {
			t.Errorf("%s: user %s's password is not read from %s", file, u.Username, passwordEnvOf(u.Username))
		}
		limited := u.Username != "admin" && u.Username != "sys"
		if limited && (u.Permissions == nil || u.Permissions.Publish == nil || u.Permissions.Subscribe == nil) {
			t.Errorf("%s: user %s has no publish and subscribe permissions", file, u.Username)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, natsUsers) {
		t.Errorf("%s: users %v, want %v", file, got, natsUsers)
	}
}

func TestAccountsConfLoadsAlone(t *testing.T) {
	setPasswords(t)
	file := filepath.Join(deployDir(t), "nats", "accounts.conf")
	opts, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	checkUsers(t, file, opts)
}

// A node refuses to start without a password rather than run with an empty one.
func TestAccountsConfNeedsEveryPassword(t *testing.T) {
	file := filepath.Join(deployDir(t), "nats", "accounts.conf")
	for _, env := range accountsPasswordEnv(t) {
		t.Run(env, func(t *testing.T) {
			setPasswords(t)
			if err := os.Unsetenv(env); err != nil { // t.Setenv restores it
				t.Fatal(err)
			}
			_, err := server.ProcessConfigFile(file)
			if err == nil || !strings.Contains(err.Error(), env) {
				t.Fatalf("loading accounts.conf without %s: err = %v, want an error naming it", env, err)
			}
		})
	}
}
