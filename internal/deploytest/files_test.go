package deploytest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// deployDir is the repository's deploy/ folder.
func deployDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "deploy")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// yamlDocs reads every document of a YAML file; empty documents are skipped.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []map[string]any
	for i := 1; ; i++ {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: document %d: %v", path, i, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

// yamlDoc reads a single-document YAML file.
func yamlDoc(t *testing.T, path string) map[string]any {
	t.Helper()
	docs := yamlDocs(t, path)
	if len(docs) != 1 {
		t.Fatalf("%s: %d documents, want 1", path, len(docs))
	}
	return docs[0]
}

// at follows a path of map keys through decoded YAML; nil when missing.
func at(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func str(v any, keys ...string) string {
	s, _ := at(v, keys...).(string)
	return s
}

func mapAt(v any, keys ...string) map[string]any {
	m, _ := at(v, keys...).(map[string]any)
	return m
}

func listAt(v any, keys ...string) []any {
	l, _ := at(v, keys...).([]any)
	return l
}

// stringList lists the items of a YAML sequence as strings.
func stringList(v any) []string {
	var out []string
	for _, item := range listAt(v) {
		out = append(out, fmt.Sprint(item))
	}
	return out
}

// passwordEnvRef finds the environment variables accounts.conf reads.
var passwordEnvRef = regexp.MustCompile(`\$(TUNEJET_[A-Z]+_PASSWORD)\b`)

// accountsPasswordEnv returns the password variables accounts.conf reads,
// sorted.
func accountsPasswordEnv(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(deployDir(t), "nats", "accounts.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range passwordEnvRef.FindAllStringSubmatch(string(data), -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		t.Fatal("accounts.conf reads no password variables")
	}
	return out
}

// passwordEnvOf is the variable holding a NATS user's password.
func passwordEnvOf(user string) string {
	return "TUNEJET_" + strings.ToUpper(user) + "_PASSWORD"
}

// The tunejet services and the NATS user each logs in as.
var serviceUsers = []string{"controller", "runner", "syncer", "restorer"}

// Environment variables that carry storage credentials.
func isStorageCredential(name string) bool {
	for _, p := range []string{"AWS_", "GOOGLE_", "AZURE_", "GCS_", "S3_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
