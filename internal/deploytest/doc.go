// Package deploytest checks the deployment files under deploy/: it has no
// code of its own, only tests.
//
//   - The NATS configuration (deploy/nats): every node file and accounts.conf
//     load with the nats-server the project builds against, and the
//     permissions do what they claim. A real nats-server runs in-process from
//     accounts.conf; each service's user performs the JetStream operations its
//     service performs (through internal/bus and internal/ckpt, the code the
//     services use), and every user is refused the subjects of the other
//     writers — a runner cannot publish a controller event, and what a user
//     may not publish never reaches the event log.
//   - The compose file (deploy/compose.yaml): the services a deployment needs,
//     wired to the NATS users of accounts.conf, with storage credentials on
//     the syncer and the restorer only.
//   - The Kubernetes manifests (deploy/k8s): each parses, has the fields its
//     kind needs, probes /healthz and exposes /metrics; the kustomization
//     lists them; the NATS Helm values give the nodes every password that
//     accounts.conf reads.
package deploytest
