package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// etcd-s3 copies an etcd snapshot to or from an S3-compatible target, for the Jobs of corral's
// backups and restores:
//
//	etcd-s3 upload   --endpoint=host[:port] --bucket=b --key=folder/file --file=/backups/file
//	etcd-s3 download ... --file=/restore/file --sha256=<hex>
//	etcd-s3 delete   ... (no --file)
//
// The access and secret keys are read from <--credentials>/accessKey and secretKey (a Secret
// volume), never from argv or the environment, so that no pod spec and no log holds them.
// upload prints one JSON line {"size", "sha256", "etag"}; download fails when the object's
// SHA-256 is not the one the backup recorded.
func runS3() {
	if err := s3Main(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "etcd-s3: %v\n", err)
		os.Exit(1)
	}
}

type s3Options struct {
	endpoint, bucket, key, region, file, credentials, ca, sha256 string
	skipVerify                                                   bool
	timeout                                                      time.Duration
}

func s3Main(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: etcd-s3 {upload|download|delete} [flags]")
	}
	op := args[0]
	var o s3Options
	fs := flag.NewFlagSet("etcd-s3 "+op, flag.ContinueOnError)
	fs.StringVar(&o.endpoint, "endpoint", "", "host[:port] of the S3-compatible service (HTTPS)")
	fs.StringVar(&o.bucket, "bucket", "", "bucket")
	fs.StringVar(&o.key, "key", "", "object key")
	fs.StringVar(&o.region, "region", "", "region (empty: the service's default)")
	fs.StringVar(&o.file, "file", "", "local file")
	fs.StringVar(&o.credentials, "credentials", "", "folder holding accessKey and secretKey")
	fs.StringVar(&o.ca, "ca", "", "PEM file of CAs to trust besides the system's")
	fs.StringVar(&o.sha256, "sha256", "", "download: the SHA-256 the object must have")
	fs.BoolVar(&o.skipVerify, "skip-ssl-verify", false, "do not verify the service's certificate")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if o.endpoint == "" || o.bucket == "" || o.key == "" || o.credentials == "" {
		return errors.New("--endpoint, --bucket, --key and --credentials are required")
	}
	client, err := s3Client(o)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	where := "s3://" + path.Join(o.bucket, o.key)
	switch op {
	case "upload":
		return s3Upload(ctx, client, o, where)
	case "download":
		return s3Download(ctx, client, o, where)
	case "delete":
		if err := client.RemoveObject(ctx, o.bucket, o.key, minio.RemoveObjectOptions{}); err != nil {
			return fmt.Errorf("deleting %s: %w", where, err)
		}
		return nil
	}
	return fmt.Errorf("unknown operation %q: upload, download or delete", op)
}

func s3Client(o s3Options) (*minio.Client, error) {
	access, err := os.ReadFile(path.Join(o.credentials, "accessKey"))
	if err != nil {
		return nil, err
	}
	secret, err := os.ReadFile(path.Join(o.credentials, "secretKey"))
	if err != nil {
		return nil, err
	}
	transport, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, errors.New("unexpected default transport")
	}
	transport = transport.Clone()
	transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.skipVerify} //nolint:gosec // the cluster's skipSSLVerify
	if o.ca != "" {
		pem, err := os.ReadFile(o.ca)
		if err != nil {
			return nil, err
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", o.ca)
		}
		transport.TLSClientConfig.RootCAs = pool
	}
	return minio.New(o.endpoint, &minio.Options{
		Creds: credentials.NewStaticV4(
			strings.TrimSpace(string(access)), strings.TrimSpace(string(secret)), ""),
		Secure:    true,
		Region:    o.region,
		Transport: transport,
	})
}

func s3Upload(ctx context.Context, client *minio.Client, o s3Options, where string) error {
	digest, size, err := fileDigest(o.file)
	if err != nil {
		return err
	}
	info, err := client.FPutObject(ctx, o.bucket, o.key, o.file, minio.PutObjectOptions{
		ContentType:  "application/octet-stream",
		UserMetadata: map[string]string{"sha256": digest},
	})
	if err != nil {
		return fmt.Errorf("uploading to %s: %w", where, err)
	}
	if info.Size != size {
		return fmt.Errorf("uploading to %s: sent %d bytes of %d", where, info.Size, size)
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"size": size, "sha256": digest, "etag": info.ETag,
	})
}

func s3Download(ctx context.Context, client *minio.Client, o s3Options, where string) error {
	if o.file == "" {
		return errors.New("--file is required")
	}
	if err := client.FGetObject(ctx, o.bucket, o.key, o.file, minio.GetObjectOptions{}); err != nil {
		return fmt.Errorf("downloading %s: %w", where, err)
	}
	digest, size, err := fileDigest(o.file)
	if err != nil {
		return err
	}
	if o.sha256 != "" && digest != o.sha256 {
		return fmt.Errorf("%s has SHA-256 %s, the backup recorded %s", where, digest, o.sha256)
	}
	fmt.Printf("downloaded %s: %d bytes\n", where, size)
	return nil
}

func fileDigest(name string) (string, int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), size, nil
}
