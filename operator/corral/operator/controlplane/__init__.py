"""Hosted control planes of provisioned (rke2, k3s) clusters: the runtime that runs them and
the provisioner that drives each cluster's through it (docs/provisioning.md)."""
