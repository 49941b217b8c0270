"""Workloads: the flat `/v3` workload over Kubernetes' five controller kinds (pure rules)."""
