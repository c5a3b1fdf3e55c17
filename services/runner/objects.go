package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/restore"
)

// GetObject answers a command trainable's get_object: a local file holding
// the object's bytes (trainproto.ObjectGetter).
func (h handler) GetObject(ctx context.Context, name string) (string, error) {
	f, ok := h.s.(interface {
		ObjectFile(ctx context.Context, name string) (string, error)
	})
	if !ok {
		return "", errors.New("get_object: this runner serves no objects")
	}
	return f.ObjectFile(ctx, name)
}

// ObjectFile returns a local file holding the object stored under name,
// fetched once per runner and stored put: <work dir>/<experiment>/.objects/
// <name>.<the put's NUID>. A name stored again by a restore that puts new
// bytes under it has another NUID, so a trial never reads a stale copy.
// The file is written under a temporary name and renamed, so trials that
// ask at once never read half of it.
func (t *trialSession) ObjectFile(ctx context.Context, name string) (string, error) {
	return t.s.objectFile(ctx, t.exp, name)
}

// objectFile is ObjectFile for experiment exp.
func (s *Service) objectFile(ctx context.Context, exp, name string) (string, error) {
	obs, err := s.store(ctx, exp)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, ckpt.TransferTimeout)
	defer cancel()
	object := restore.ObjectName(name)
	info, err := obs.GetInfo(ctx, object)
	if err != nil {
		return "", restore.ErrRefGone(name, err)
	}
	dir := filepath.Join(s.cfg.WorkDir, exp, ".objects")
	path := filepath.Join(dir, name+"."+info.NUID)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("object %s: %w", name, err)
	}
	tmp, err := os.CreateTemp(dir, ".fetch-*")
	if err != nil {
		return "", fmt.Errorf("object %s: %w", name, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // a no-op once renamed
	r, err := obs.Get(ctx, object)
	if err != nil {
		_ = tmp.Close()
		return "", restore.ErrRefGone(name, err)
	}
	defer func() { _ = r.Close() }()
	if _, err := io.Copy(tmp, r); err != nil {
		_ = tmp.Close()
		return "", fmt.Errorf("fetch object %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("fetch object %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("fetch object %s: %w", name, err)
	}
	return path, nil
}
