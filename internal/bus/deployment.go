package bus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DeploymentBucket is the KV bucket that holds the deployment's identity
// (key deploymentKey): one entry, created once by whichever client or
// service asks first, and kept as long as the JetStream store is.
const DeploymentBucket = "tunejet_deployment"

const deploymentKey = "id"

// Deployment is who a deployment is: every client and service connected
// to one JetStream store (an embedded store dir, or a server or cluster)
// reads the same ID, and a store deleted and made anew gets another.
type Deployment struct {
	// ID is random, made when the entry is created.
	ID string `json:"id"`
	// Store is how users reach it: "embedded store DIR" or the server's
	// URL, as the one that created the entry was connected.
	Store string `json:"store"`
	// Created is when the entry was created.
	Created time.Time `json:"created"`
}

// Deployment reads the deployment's identity, creating it on first use.
func (b *Bus) Deployment(ctx context.Context) (Deployment, error) {
	kv, err := b.bucket(ctx, jetstream.KeyValueConfig{
		Bucket: DeploymentBucket, Description: "tunejet deployment identity", History: 1, Replicas: b.replicas(),
	})
	if err != nil {
		return Deployment{}, fmt.Errorf("deployment bucket: %w", err)
	}
	if d, err := readDeployment(ctx, kv); !errors.Is(err, jetstream.ErrKeyNotFound) {
		return d, err
	}
	var r [8]byte
	_, _ = rand.Read(r[:])
	d := Deployment{ID: hex.EncodeToString(r[:]), Store: b.StoreName(), Created: time.Now().UTC()}
	data, err := json.Marshal(d)
	if err != nil {
		return Deployment{}, err
	}
	if _, err := kv.Create(ctx, deploymentKey, data); errors.Is(err, jetstream.ErrKeyExists) {
		return readDeployment(ctx, kv) // another created it first
	} else if err != nil {
		return Deployment{}, fmt.Errorf("deployment identity: %w", err)
	}
	return d, nil
}

func readDeployment(ctx context.Context, kv jetstream.KeyValue) (Deployment, error) {
	e, err := kv.Get(ctx, deploymentKey)
	if err != nil {
		return Deployment{}, err
	}
	var d Deployment
	if err := json.Unmarshal(e.Value(), &d); err != nil || d.ID == "" {
		return Deployment{}, fmt.Errorf("deployment identity in %s: not a deployment entry: %q", DeploymentBucket, e.Value())
	}
	return d, nil
}

// StoreName is how users reach this bus's deployment: "embedded store
// DIR" when EmbeddedStore is set, else the server URL it is connected to.
func (b *Bus) StoreName() string {
	if b.EmbeddedStore != "" {
		return "embedded store " + b.EmbeddedStore
	}
	return b.nc.ConnectedUrlRedacted()
}
