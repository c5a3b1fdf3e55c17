package trainproto

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// objectHandler serves objects from files named after them in dir.
type objectHandler struct {
	recordingHandler
	dir string
}

func (h *objectHandler) GetObject(_ context.Context, name string) (string, error) {
	path := filepath.Join(h.dir, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("object %s is not stored", name)
	}
	return path, nil
}

func TestGetObjectRoundTrip(t *testing.T) {
	h := &objectHandler{dir: t.TempDir()}
	if err := os.WriteFile(filepath.Join(h.dir, "data"), []byte("bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := dial(t, startServer(t, h).path)
	path, err := c.GetObject(t.Context(), "data")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "bytes" {
		t.Fatalf("GetObject(data) = %s holding %q, %v; want the object's bytes", path, b, err)
	}
	_, err = c.GetObject(t.Context(), "missing")
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "object missing is not stored") {
		t.Fatalf("GetObject(missing) = %v; want a rejection saying why", err)
	}
	// The connection stays usable after a rejected request.
	if _, err := c.GetObject(t.Context(), "data"); err != nil {
		t.Fatalf("GetObject after a rejection: %v", err)
	}
}
