"""Reconcilers of management objects, one module per kind: kopf handlers calling plain async
functions. They may start what runs for a downstream cluster (`corral.operator.downstream`);
the reverse never happens."""
