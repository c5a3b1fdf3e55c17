package deploytest

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// manifest is one Kubernetes object read from deploy/k8s.
type manifest struct {
	file string
	obj  map[string]any
}

func (m manifest) kind() string { return str(m.obj, "kind") }
func (m manifest) name() string { return str(m.obj, "metadata", "name") }
func (m manifest) String() string {
	return fmt.Sprintf("%s %s (%s)", m.kind(), m.name(), m.file)
}

// k8sManifests reads every object of deploy/k8s/*.yaml except the
// kustomization. The Helm values under deploy/k8s/nats are not manifests.
func k8sManifests(t *testing.T) []manifest {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(deployDir(t), "k8s", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []manifest
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		docs := yamlDocs(t, f)
		if len(docs) == 0 {
			t.Errorf("%s holds no object", f)
		}
		for _, d := range docs {
			out = append(out, manifest{file: filepath.Base(f), obj: d})
		}
	}
	if len(out) == 0 {
		t.Fatal("no manifests under deploy/k8s")
	}
	return out
}

func TestKubernetesManifestsHaveTheirFields(t *testing.T) {
	for _, m := range k8sManifests(t) {
		if str(m.obj, "apiVersion") == "" || m.kind() == "" || m.name() == "" {
			t.Errorf("%s: needs apiVersion, kind and metadata.name", m)
		}
	}
}

func TestKustomizationListsTheManifests(t *testing.T) {
	dir := filepath.Join(deployDir(t), "k8s")
	k := yamlDoc(t, filepath.Join(dir, "kustomization.yaml"))
	if str(k, "kind") != "Kustomization" || str(k, "apiVersion") == "" {
		t.Fatalf("kustomization.yaml: kind %q apiVersion %q", str(k, "kind"), str(k, "apiVersion"))
	}
	listed := stringList(at(k, "resources"))
	for _, r := range listed {
		if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
			t.Errorf("kustomization lists %s: %v", r, err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		base := filepath.Base(f)
		if base == "kustomization.yaml" || strings.HasSuffix(base, ".example.yaml") {
			continue
		}
		if !slices.Contains(listed, base) {
			t.Errorf("%s is not in kustomization.yaml's resources", base)
		}
	}
	// The image override must name the image the Deployments use.
	var images []string
	for _, img := range listAt(k, "images") {
		images = append(images, str(img, "name"))
	}
	for _, m := range k8sManifests(t) {
		for _, c := range listAt(m.obj, "spec", "template", "spec", "containers") {
			if img := str(c, "image"); !slices.Contains(images, img) {
				t.Errorf("%s: image %q is not set by kustomization.yaml's images %v", m, img, images)
			}
		}
	}
}

func TestDeployments(t *testing.T) {
	deployments := map[string]manifest{}
	for _, m := range k8sManifests(t) {
		if m.kind() == "Deployment" {
			deployments[m.name()] = m
		}
	}
	names := slices.Sorted(maps.Keys(deployments))
	want := []string{"tunejet-controller", "tunejet-restorer", "tunejet-runner", "tunejet-syncer"}
	if !slices.Equal(names, want) {
		t.Fatalf("Deployments %v, want %v", names, want)
	}
	if r := at(deployments["tunejet-controller"].obj, "spec", "replicas"); r != 2 {
		t.Errorf("controller replicas = %v, want 2 (one active per experiment, one standby)", r)
	}
	if s := str(deployments["tunejet-syncer"].obj, "spec", "strategy", "type"); s != "Recreate" {
		t.Errorf("syncer strategy %q: two syncers must never run at once, want Recreate", s)
	}

	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			d := deployments[name].obj
			role := strings.TrimPrefix(name, "tunejet-")
			sel := mapAt(d, "spec", "selector", "matchLabels")
			labels := mapAt(d, "spec", "template", "metadata", "labels")
			if len(sel) == 0 {
				t.Error("spec.selector.matchLabels is empty")
			}
			for k, v := range sel {
				if labels[k] != v {
					t.Errorf("selector %s=%v does not match the pod labels %v", k, v, labels)
				}
			}
			ann := mapAt(d, "spec", "template", "metadata", "annotations")
			if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != "8080" || ann["prometheus.io/path"] != "/metrics" {
				t.Errorf("pod annotations %v: want Prometheus to scrape :8080/metrics", ann)
			}

			pod := mapAt(d, "spec", "template", "spec")
			containers := listAt(pod, "containers")
			if len(containers) != 1 {
				t.Fatalf("%d containers, want 1", len(containers))
			}
			c := containers[0]
			if str(c, "image") == "" {
				t.Error("container has no image")
			}
			args := stringList(at(c, "args"))
			if len(args) == 0 || args[0] != role {
				t.Errorf("args %v, want `tunejet %s ...`", args, role)
			}
			if !slices.Contains(args, "--metrics-addr=:8080") {
				t.Errorf("args %v, want --metrics-addr=:8080", args)
			}
			for _, probe := range []string{"livenessProbe", "readinessProbe"} {
				if p := str(c, probe, "httpGet", "path"); p != "/healthz" {
					t.Errorf("%s path %q, want /healthz", probe, p)
				}
				if port := containerPort(c, at(c, probe, "httpGet", "port")); port != 8080 {
					t.Errorf("%s port resolves to %d, want 8080", probe, port)
				}
			}
			for _, r := range []string{"cpu", "memory"} {
				if at(c, "resources", "requests", r) == nil {
					t.Errorf("no %s request", r)
				}
			}

			env := map[string]any{}
			for _, e := range listAt(c, "env") {
				env[str(e, "name")] = e
			}
			if v := str(env["NATS_USER"], "value"); v != role {
				t.Errorf("NATS_USER = %q, want %q", v, role)
			}
			ref := mapAt(env["NATS_PASSWORD"], "valueFrom", "secretKeyRef")
			if ref["name"] != "tunejet-nats" || ref["key"] != role {
				t.Errorf("NATS_PASSWORD from %v, want key %q of Secret tunejet-nats", ref, role)
			}
			for k := range env {
				if isStorageCredential(k) && role != "syncer" && role != "restorer" {
					t.Errorf("the %s gets storage credential %s", role, k)
				}
			}

			secrets := secretRefs(pod)
			holdsStorage := role == "syncer" || role == "restorer"
			if got := slices.Contains(secrets, "tunejet-storage"); got != holdsStorage {
				t.Errorf("references Secrets %v: the storage Secret belongs to the syncer and the restorer only", secrets)
			}
			for _, s := range secrets {
				if s != "tunejet-nats" && s != "tunejet-storage" {
					t.Errorf("references an unknown Secret %q", s)
				}
			}
		})
	}
}

// containerPort resolves a probe's port (a number or a port name).
func containerPort(c any, port any) int {
	switch p := port.(type) {
	case int:
		return p
	case string:
		for _, cp := range listAt(c, "ports") {
			if str(cp, "name") == p {
				n, _ := at(cp, "containerPort").(int)
				return n
			}
		}
	}
	return 0
}

// secretRefs lists the Secrets a pod spec refers to, anywhere: envFrom,
// env valueFrom, volumes.
func secretRefs(v any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, child := range x {
				switch k {
				case "secretRef", "secretKeyRef":
					out = append(out, str(child, "name"))
				case "secret":
					if n := str(child, "secretName"); n != "" {
						out = append(out, n)
					}
				}
				walk(child)
			}
		case []any:
			for _, child := range x {
				walk(child)
			}
		}
	}
	walk(v)
	sort.Strings(out)
	return slices.Compact(out)
}

func TestMetricsService(t *testing.T) {
	var svc map[string]any
	var podLabels []map[string]any
	for _, m := range k8sManifests(t) {
		switch m.kind() {
		case "Service":
			svc = m.obj
		case "Deployment":
			podLabels = append(podLabels, mapAt(m.obj, "spec", "template", "metadata", "labels"))
		}
	}
	if svc == nil {
		t.Fatal("no Service")
	}
	ann := mapAt(svc, "metadata", "annotations")
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != "8080" || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("Service annotations %v: want Prometheus to scrape :8080/metrics", ann)
	}
	sel := mapAt(svc, "spec", "selector")
	if len(sel) == 0 {
		t.Fatal("Service selects nothing")
	}
	for _, labels := range podLabels {
		for k, v := range sel {
			if labels[k] != v {
				t.Errorf("Service selector %v does not select pods labelled %v", sel, labels)
			}
		}
	}
	ports := listAt(svc, "spec", "ports")
	if len(ports) != 1 || at(ports[0], "port") != 8080 {
		t.Errorf("Service ports %v, want 8080", ports)
	}
}

func TestNATSHelmValues(t *testing.T) {
	dir := deployDir(t)
	v := yamlDoc(t, filepath.Join(dir, "k8s", "nats", "values.yaml"))
	if at(v, "config", "cluster", "enabled") != true || at(v, "config", "cluster", "replicas") != 3 {
		t.Errorf("config.cluster = %v, want enabled with 3 replicas", at(v, "config", "cluster"))
	}
	js := mapAt(v, "config", "jetstream")
	if at(js, "enabled") != true || at(js, "fileStore", "enabled") != true || at(js, "fileStore", "pvc", "enabled") != true || str(js, "fileStore", "pvc", "size") == "" {
		t.Errorf("config.jetstream = %v, want file storage on a PVC", js)
	}
	if inc := str(v, "config", "merge", "$include"); inc != "accounts.conf" {
		t.Errorf("config.merge.$include = %q, want accounts.conf", inc)
	}

	// Every password accounts.conf reads comes from the tunejet-nats Secret,
	// under the key the example Secret has.
	var example map[string]any
	for _, d := range yamlDocs(t, filepath.Join(dir, "k8s", "secrets.example.yaml")) {
		if str(d, "metadata", "name") == "tunejet-nats" {
			example = mapAt(d, "stringData")
		}
	}
	env := mapAt(v, "container", "env")
	if got, want := slices.Sorted(maps.Keys(env)), accountsPasswordEnv(t); !slices.Equal(got, want) {
		t.Errorf("container.env %v, want the variables accounts.conf reads %v", got, want)
	}
	for name := range env {
		ref := mapAt(env[name], "valueFrom", "secretKeyRef")
		key, _ := ref["key"].(string)
		if ref["name"] != "tunejet-nats" || passwordEnvOf(key) != name {
			t.Errorf("%s from %v, want key %q of Secret tunejet-nats", name, ref, strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(name, "TUNEJET_"), "_PASSWORD")))
		}
		if _, ok := example[key]; !ok {
			t.Errorf("secrets.example.yaml: tunejet-nats has no key %q", key)
		}
	}
	for _, user := range serviceUsers {
		if _, ok := example[user]; !ok {
			t.Errorf("secrets.example.yaml: tunejet-nats has no key %q", user)
		}
	}
}
