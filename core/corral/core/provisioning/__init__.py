"""Provisioned clusters (issue 14): a hosted control plane per cluster, decided here without
talking to Kubernetes (docs/design/provisioned-clusters.md)."""
