"""corral's /v3 API server: translates the Rancher-style REST surface into CRD reads and writes."""
