// What the clusters list shows of a /v3 cluster, and how the subscription's events change it.
// Pure: the list's component and its tests share it.

import type { ResourceEvent } from "./resources";

export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

/** A cluster as /v3/clusters and /v3/subscribe show it: the fields the list reads. */
export interface V3Cluster {
  id: string;
  name?: string;
  state?: string;
  transitioning?: string;
  transitioningMessage?: string;
  driver?: string;
  status?: {
    version?: { gitVersion?: string };
    nodeCount?: number;
    capacity?: Record<string, string>;
    requested?: Record<string, string>;
    conditions?: Condition[];
  };
}

export interface ClusterRow {
  id: string;
  name: string;
  state: string;
  transitioning: string;
  message: string;
  version: string;
  driver: string;
  nodes: number | null;
  pods: number | null;
  podCapacity: number | null;
  conditions: Condition[];
  // The conditions that are not as a healthy cluster has them.
  problems: Condition[];
}

// Conditions whose True means "not there yet"; every other type is healthy when True.
const TRUE_IS_BAD = new Set(["Pending"]);

export function healthy(condition: Condition): boolean {
  const bad = TRUE_IS_BAD.has(condition.type);
  return bad ? condition.status === "False" : condition.status === "True";
}

function count(text: string | undefined): number | null {
  if (text === undefined || !/^\d+$/.test(text)) return null;
  return Number(text);
}

export function toRow(cluster: V3Cluster): ClusterRow {
  const status = cluster.status ?? {};
  const conditions = [...(status.conditions ?? [])].sort((a, b) => a.type.localeCompare(b.type));
  return {
    id: cluster.id,
    name: cluster.name || cluster.id,
    state: cluster.state ?? "",
    transitioning: cluster.transitioning ?? "no",
    message: cluster.transitioningMessage ?? "",
    version: status.version?.gitVersion ?? "",
    driver: cluster.driver ?? "",
    nodes: status.nodeCount ?? null,
    // A cluster with capacity but no pods requested has none running (requested sums them).
    pods: count(status.requested?.pods) ?? (status.capacity ? 0 : null),
    podCapacity: count(status.capacity?.pods),
    conditions,
    problems: conditions.filter((c) => !healthy(c)),
  };
}

/** The rows after `event`; the same map when the event does not concern clusters. */
export function applyEvent(
  rows: ReadonlyMap<string, ClusterRow>,
  event: ResourceEvent,
): ReadonlyMap<string, ClusterRow> {
  const id = event.data?.id;
  if (event.resourceType !== "cluster" || typeof id !== "string") return rows;
  const next = new Map(rows);
  if (event.name === "resource.remove") {
    if (!next.delete(id)) return rows;
  } else if (event.name === "resource.create" || event.name === "resource.change") {
    next.set(id, toRow(event.data as unknown as V3Cluster));
  } else {
    return rows;
  }
  return next;
}

/** The rows to show: those whose name, id, driver or state holds `filter`, by name. */
export function shown(rows: ReadonlyMap<string, ClusterRow>, filter: string): ClusterRow[] {
  const needle = filter.trim().toLowerCase();
  const kept = [...rows.values()].filter(
    (row) =>
      !needle ||
      [row.name, row.id, row.driver, row.state].some((text) => text.toLowerCase().includes(needle)),
  );
  return kept.sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id));
}
