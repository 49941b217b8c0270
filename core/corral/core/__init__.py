"""corral's shared kernel: what the operator and the API server both need."""
