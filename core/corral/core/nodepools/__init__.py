"""Node pools: a cluster kept at a quantity of machines made from one node template."""
