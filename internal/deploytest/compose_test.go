package deploytest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// composeEnv returns a service's environment as a map (compose accepts a
// map or a list of NAME=value).
func composeEnv(t *testing.T, name string, svc map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	switch env := at(svc, "environment").(type) {
	case nil:
	case map[string]any:
		for k, v := range env {
			if v == nil {
				out[k] = ""
			} else {
				out[k] = fmt.Sprint(v)
			}
		}
	case []any:
		for _, item := range env {
			k, v, _ := strings.Cut(fmt.Sprint(item), "=")
			out[k] = v
		}
	default:
		t.Fatalf("service %s: environment is a %T", name, env)
	}
	return out
}

func TestComposeFile(t *testing.T) {
	dir := deployDir(t)
	doc := yamlDoc(t, filepath.Join(dir, "compose.yaml"))
	services := mapAt(doc, "services")

	var names []string
	for name := range services {
		names = append(names, name)
	}
	sort.Strings(names)
	want := []string{"controller-1", "controller-2", "nats-1", "nats-2", "nats-3", "restorer", "runner", "syncer"}
	if !slices.Equal(names, want) {
		t.Fatalf("services = %v, want %v", names, want)
	}

	passwords := accountsPasswordEnv(t)
	t.Run("nats", func(t *testing.T) {
		for n := 1; n <= 3; n++ {
			name := fmt.Sprintf("nats-%d", n)
			svc := mapAt(services, name)
			if img := str(svc, "image"); !strings.HasPrefix(img, "nats:") {
				t.Errorf("%s: image %q, want the official nats image", name, img)
			}
			conf := fmt.Sprintf("/etc/nats/nats-%d.conf", n)
			if cmd := stringList(at(svc, "command")); !slices.Contains(cmd, conf) {
				t.Errorf("%s: command %v does not load %s", name, cmd, conf)
			}
			if vols := stringList(at(svc, "volumes")); !slices.Contains(vols, "./nats:/etc/nats:ro") {
				t.Errorf("%s: volumes %v do not mount deploy/nats read-only", name, vols)
			}
			env := composeEnv(t, name, svc)
			for _, p := range passwords {
				if !strings.Contains(env[p], "${"+p) {
					t.Errorf("%s: %s = %q, want it from the environment (${%s...})", name, p, env[p], p)
				}
			}
		}
	})

	for _, name := range []string{"controller-1", "controller-2", "syncer", "restorer", "runner"} {
		t.Run(name, func(t *testing.T) {
			svc := mapAt(services, name)
			role, _, _ := strings.Cut(name, "-")
			if df := str(svc, "build", "dockerfile"); df != "deploy/Dockerfile" {
				t.Errorf("build.dockerfile = %q, want deploy/Dockerfile", df)
			}
			ctx := str(svc, "build", "context")
			if _, err := os.Stat(filepath.Join(dir, ctx, str(svc, "build", "dockerfile"))); err != nil {
				t.Errorf("build context %q does not hold the Dockerfile: %v", ctx, err)
			}
			if !strings.Contains(str(svc, "image"), "tunejet") {
				t.Errorf("image = %q, want the tunejet image", str(svc, "image"))
			}
			cmd := stringList(at(svc, "command"))
			if len(cmd) == 0 || cmd[0] != role {
				t.Errorf("command = %v, want `tunejet %s ...`", cmd, role)
			}
			if i := slices.Index(cmd, "--metrics-addr"); i < 0 || i+1 >= len(cmd) || cmd[i+1] != ":8080" {
				t.Errorf("command = %v, want --metrics-addr :8080", cmd)
			}

			env := composeEnv(t, name, svc)
			urls := strings.Split(env["NATS_URL"], ",")
			if len(urls) != 3 {
				t.Errorf("NATS_URL = %q, want the three nodes", env["NATS_URL"])
			}
			if env["NATS_USER"] != role {
				t.Errorf("NATS_USER = %q, want %q", env["NATS_USER"], role)
			}
			if want := "${" + passwordEnvOf(role); !strings.HasPrefix(env["NATS_PASSWORD"], want) {
				t.Errorf("NATS_PASSWORD = %q, want the %s user's password (%s...})", env["NATS_PASSWORD"], role, want)
			}
			if env["TUNEJET_LOG_FORMAT"] != "json" {
				t.Errorf("TUNEJET_LOG_FORMAT = %q, want json", env["TUNEJET_LOG_FORMAT"])
			}

			var creds []string
			for k := range env {
				if isStorageCredential(k) {
					creds = append(creds, k)
				}
			}
			holdsStorage := role == "syncer" || role == "restorer"
			if holdsStorage {
				for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"} {
					if _, ok := env[k]; !ok {
						t.Errorf("the %s needs %s: it holds the storage credentials", role, k)
					}
				}
			} else if len(creds) > 0 {
				sort.Strings(creds)
				t.Errorf("the %s gets storage credentials %v: only the syncer and the restorer may", role, creds)
			}
		})
	}

	t.Run("runner scales", func(t *testing.T) {
		if r, ok := at(services, "runner", "deploy", "replicas").(int); !ok || r < 1 {
			t.Errorf("runner deploy.replicas = %v, want a count", at(services, "runner", "deploy", "replicas"))
		}
	})
}

// TestComposeConfig runs `docker compose config` when the tool is here (the
// engine need not run).
func TestComposeConfig(t *testing.T) {
	file := filepath.Join(deployDir(t), "compose.yaml")
	var cmd *exec.Cmd
	if _, err := exec.LookPath("docker"); err == nil && exec.Command("docker", "compose", "version").Run() == nil {
		cmd = exec.Command("docker", "compose", "-f", file, "config", "--quiet")
	} else if _, err := exec.LookPath("docker-compose"); err == nil {
		cmd = exec.Command("docker-compose", "-f", file, "config", "--quiet")
	} else {
		t.Skip("neither `docker compose` nor docker-compose is installed")
	}
	// The file's defaults must be enough: no deploy/.env needed to validate.
	cmd.Env = append(os.Environ(), "COMPOSE_PROJECT_NAME=tunejet-deploytest")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
}
