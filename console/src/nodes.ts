// What a cluster's page shows of its nodes and node pools (/v3 resources), and the progress
// of a drain. Pure: the page and its tests share it.

import { healthy, type Condition } from "./clusters";
import type { Resource } from "./resources";

export const TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"] as const;

/** A taint as the node's `desiredNodeTaints` holds it (docs/api.md, "Nodes"). */
export interface V3Taint {
  key: string;
  value?: string;
  effect: string;
}

export interface V3Node extends Resource {
  name?: string;
  desiredNodeTaints?: V3Taint[] | null;
  displayName?: string;
  clusterId?: string;
  nodePoolId?: string;
  state?: string;
  unschedulable?: boolean;
  etcd?: boolean;
  controlPlane?: boolean;
  worker?: boolean;
  spec?: {
    desiredNodeUnschedulable?: string;
    nodeDrainInput?: { requestedAt?: string };
  };
  status?: {
    drainRequest?: string;
    conditions?: Condition[];
    nodeInfo?: { kubeletVersion?: string };
  };
}

export interface V3NodePool extends Resource {
  name?: string;
  displayName?: string;
  clusterId?: string;
  hostnamePrefix?: string;
  quantity?: number;
  ready?: number;
  failing?: number;
  state?: string;
  transitioningMessage?: string;
  lastError?: string;
}

export const DRAINED = "Drained";

export interface NodeRow {
  id: string;
  name: string;
  state: string;
  roles: string[];
  unschedulable: boolean;
  // A drain asked for and not answered yet.
  draining: boolean;
  // What the last drain came to (the Drained condition's words), when one was asked for.
  drain: { ok: boolean; text: string } | null;
  problems: Condition[];
  pool: string;
  // The node's action links (`cordon`, `uncordon`, `drain`) as the API gives them.
  actions: Record<string, string>;
  // The taints corral manages on it, and its update link (absent for who may not change it).
  taints: V3Taint[];
  update: string | null;
}

/** `key=value:Effect`, as kubectl writes a taint. */
export function taintText(taint: V3Taint): string {
  return `${taint.key}${taint.value ? `=${taint.value}` : ""}:${taint.effect}`;
}

/** The update body that adds a taint as typed (the API judges key, value and effect). */
export function addedTaint(taints: V3Taint[], added: V3Taint): { desiredNodeTaints: V3Taint[] } {
  const taint: V3Taint = { key: added.key.trim(), effect: added.effect };
  if (added.value?.trim()) taint.value = added.value.trim();
  return { desiredNodeTaints: [...taints, taint] };
}

/** The update body without the taint at `index`: `[]` when it was the last, which removes them. */
export function removedTaint(taints: V3Taint[], index: number): { desiredNodeTaints: V3Taint[] } {
  return { desiredNodeTaints: taints.filter((_, i) => i !== index) };
}

export function rolesOf(node: V3Node): string[] {
  const roles: string[] = [];
  if (node.controlPlane) roles.push("control plane");
  if (node.etcd) roles.push("etcd");
  if (node.worker) roles.push("worker");
  return roles;
}

/** Whether a drain is running: asked for (`desiredNodeUnschedulable: drain`, with its
 * `requestedAt`) and not yet answered by the operator (`status.drainRequest`). */
export function draining(node: V3Node): boolean {
  const asked = node.spec?.nodeDrainInput?.requestedAt;
  return (
    node.spec?.desiredNodeUnschedulable === "drain" &&
    asked !== undefined &&
    asked !== node.status?.drainRequest
  );
}

export function toNodeRow(node: V3Node): NodeRow {
  const conditions = node.status?.conditions ?? [];
  const drained = conditions.find((c) => c.type === DRAINED);
  const running = draining(node);
  return {
    id: node.id,
    name: node.displayName || node.name || node.id,
    state: running ? "draining" : (node.state ?? ""),
    roles: rolesOf(node),
    unschedulable: node.unschedulable ?? false,
    draining: running,
    drain:
      drained && !running && drained.reason !== "Uncordoned"
        ? { ok: drained.status === "True", text: drained.message || drained.reason || "" }
        : null,
    // The Drained condition is shown on its own; the rest say what is wrong with the node.
    problems: conditions.filter((c) => c.type !== DRAINED && !healthy(c)),
    pool: node.nodePoolId ?? "",
    actions: node.actions ?? {},
    taints: node.desiredNodeTaints ?? [],
    update: node.links?.update ?? null,
  };
}

export function nodeRows(nodes: ReadonlyMap<string, V3Node>): NodeRow[] {
  return [...nodes.values()].map(toNodeRow).sort((a, b) => a.name.localeCompare(b.name));
}

export interface PoolRow {
  id: string;
  name: string;
  quantity: number;
  ready: number;
  state: string;
  message: string;
  // The pool's update link; absent for who may not change it.
  update: string | null;
}

// The API takes a quantity from 0 to 1000 (docs/api.md, "Node pools").
export const MAX_QUANTITY = 1000;

export function toPoolRow(pool: V3NodePool): PoolRow {
  return {
    id: pool.id,
    name: pool.displayName || pool.name || pool.hostnamePrefix || pool.id,
    quantity: pool.quantity ?? 0,
    ready: pool.ready ?? 0,
    state: pool.state ?? "",
    message: pool.lastError || pool.transitioningMessage || "",
    update: pool.links?.update ?? null,
  };
}

export function poolRows(pools: ReadonlyMap<string, V3NodePool>): PoolRow[] {
  return [...pools.values()].map(toPoolRow).sort((a, b) => a.name.localeCompare(b.name));
}
