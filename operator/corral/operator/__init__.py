"""corral's operator: kopf reconcilers for every corral resource, one module per kind."""
