package storage

import (
	"context"
	"errors"
	"io"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/gcerrors"
)

// View returns a new handle onto b, limited to keys under prefix ("" for
// all of b). Unlike blob.PrefixedBucket it leaves b open: the view does not
// own b, closing the view leaves b usable, and b must stay open while the
// view is used.
func View(b *blob.Bucket, prefix string) *blob.Bucket {
	d := DriverOf(b)
	if prefix != "" {
		d = driver.NewPrefixedBucket(d, prefix)
	}
	return blob.NewBucket(d)
}

// DriverOf returns a driver.Bucket that forwards every call to b through
// its portable API. It exists so that a wrapper can embed it and override
// one method (fault injection, counting) for any backend, and so that views
// of b can be built without closing b. Its Close does not close b.
func DriverOf(b *blob.Bucket) driver.Bucket { return &forwarder{b: b} }

type forwarder struct{ b *blob.Bucket }

// codedError carries the code of an error that b already wrapped, so the
// outer bucket does not wrap the same message twice.
type codedError struct {
	code gcerrors.ErrorCode
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// unwrapBlob strips b's own wrapping from err, keeping its code; the outer
// bucket wraps it again with the key the caller used.
func unwrapBlob(err error) error {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	cause := err
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		if errs := u.Unwrap(); len(errs) > 0 && errs[0] != nil {
			cause = errs[0]
		}
	}
	return &codedError{code: gcerrors.Code(err), err: cause}
}

func (f *forwarder) ErrorCode(err error) gcerrors.ErrorCode {
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	return gcerrors.Code(err)
}

func (f *forwarder) As(i any) bool { return f.b.As(i) }

func (f *forwarder) ErrorAs(err error, i any) (ok bool) {
	defer func() {
		if recover() != nil { // errors.As panics on targets drivers would refuse
			ok = false
		}
	}()
	return errors.As(err, i)
}

func (f *forwarder) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	a, err := f.b.Attributes(ctx, key)
	if err != nil {
		return nil, unwrapBlob(err)
	}
	return &driver.Attributes{
		CacheControl:       a.CacheControl,
		ContentDisposition: a.ContentDisposition,
		ContentEncoding:    a.ContentEncoding,
		ContentLanguage:    a.ContentLanguage,
		ContentType:        a.ContentType,
		Metadata:           a.Metadata,
		CreateTime:         a.CreateTime,
		ModTime:            a.ModTime,
		Size:               a.Size,
		MD5:                a.MD5,
		ETag:               a.ETag,
		AsFunc:             a.As,
	}, nil
}

func (f *forwarder) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	token := opts.PageToken
	if len(token) == 0 {
		token = blob.FirstPageToken
	}
	size := opts.PageSize
	if size <= 0 {
		size = 1000
	}
	objs, next, err := f.b.ListPage(ctx, token, size, &blob.ListOptions{
		Prefix: opts.Prefix, Delimiter: opts.Delimiter, BeforeList: opts.BeforeList,
	})
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, unwrapBlob(err)
	}
	page := &driver.ListPage{NextPageToken: next}
	for _, o := range objs {
		page.Objects = append(page.Objects, &driver.ListObject{
			Key: o.Key, ModTime: o.ModTime, Size: o.Size, MD5: o.MD5, IsDir: o.IsDir, AsFunc: o.As,
		})
	}
	return page, nil
}

func (f *forwarder) NewRangeReader(ctx context.Context, key string, offset, length int64, opts *driver.ReaderOptions) (driver.Reader, error) {
	r, err := f.b.NewRangeReader(ctx, key, offset, length, &blob.ReaderOptions{BeforeRead: opts.BeforeRead})
	if err != nil {
		return nil, unwrapBlob(err)
	}
	return &forwardReader{r: r}, nil
}

type forwardReader struct{ r *blob.Reader }

func (r *forwardReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	return n, unwrapBlob(err)
}
func (r *forwardReader) Close() error  { return unwrapBlob(r.r.Close()) }
func (r *forwardReader) As(i any) bool { return r.r.As(i) }
func (r *forwardReader) Attributes() *driver.ReaderAttributes {
	return &driver.ReaderAttributes{ContentType: r.r.ContentType(), ModTime: r.r.ModTime(), Size: r.r.Size()}
}

func (f *forwarder) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	w, err := f.b.NewWriter(ctx, key, &blob.WriterOptions{
		BufferSize:                  opts.BufferSize,
		MaxConcurrency:              opts.MaxConcurrency,
		CacheControl:                opts.CacheControl,
		ContentDisposition:          opts.ContentDisposition,
		ContentEncoding:             opts.ContentEncoding,
		ContentLanguage:             opts.ContentLanguage,
		ContentType:                 contentType,
		DisableContentTypeDetection: true,
		ContentMD5:                  opts.ContentMD5,
		Metadata:                    opts.Metadata,
		BeforeWrite:                 opts.BeforeWrite,
		IfNotExist:                  opts.IfNotExist,
	})
	if err != nil {
		return nil, unwrapBlob(err)
	}
	return &forwardWriter{w: w}, nil
}

type forwardWriter struct{ w *blob.Writer }

func (w *forwardWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	return n, unwrapBlob(err)
}
func (w *forwardWriter) Close() error { return unwrapBlob(w.w.Close()) }

func (f *forwarder) Copy(ctx context.Context, dstKey, srcKey string, opts *driver.CopyOptions) error {
	return unwrapBlob(f.b.Copy(ctx, dstKey, srcKey, &blob.CopyOptions{BeforeCopy: opts.BeforeCopy}))
}

func (f *forwarder) Delete(ctx context.Context, key string, opts *driver.DeleteOptions) error {
	return unwrapBlob(f.b.DeleteWithOptions(ctx, key, &blob.DeleteOptions{BeforeDelete: opts.BeforeDelete}))
}

func (f *forwarder) SignedURL(ctx context.Context, key string, opts *driver.SignedURLOptions) (string, error) {
	u, err := f.b.SignedURL(ctx, key, &blob.SignedURLOptions{
		Expiry:                   opts.Expiry,
		Method:                   opts.Method,
		ContentType:              opts.ContentType,
		EnforceAbsentContentType: opts.EnforceAbsentContentType,
		BeforeSign:               opts.BeforeSign,
	})
	return u, unwrapBlob(err)
}

// Close does nothing: the forwarder does not own b.
func (f *forwarder) Close() error { return nil }
