// Workloads and pods as /v3 takes and shows them (docs/api.md, "Workloads", "Pods"): the
// create form's body, where the API's field errors belong in it, and what a row shows.
// Pure: the pages and their tests share it.

import type { Resource } from "./resources";

export interface V3Container {
  name: string;
  image?: string;
  ports?: { containerPort?: number; protocol?: string; name?: string }[];
}

export interface V3Workload extends Resource {
  name: string;
  namespaceId: string;
  workloadType: string;
  projectId?: string;
  state?: string;
  scale?: number;
  paused?: boolean;
  containers?: V3Container[];
  status?: { replicas?: number; readyReplicas?: number; availableReplicas?: number };
  publicEndpoints?: { addresses?: string[]; port?: number; protocol?: string; hostname?: string; path?: string }[];
}

export interface V3PodContainer {
  name: string;
  image?: string;
  ready?: boolean;
  restartCount?: number;
  state?: string;
}

export interface V3Pod extends Resource {
  name: string;
  namespaceId: string;
  projectId?: string;
  workloadId?: string | null;
  nodeId?: string | null;
  state?: string;
  containers?: V3PodContainer[];
  podIp?: string | null;
}

export interface V3Namespace extends Resource {
  name: string;
  projectId?: string | null;
  state?: string;
}

// Only these two kinds have a `scale` (a DaemonSet runs one pod per node, a Job to the end).
export const SCALABLE = new Set(["deployment", "statefulSet"]);

/** One environment variable's row of the form, as typed. */
export interface EnvRow {
  name: string;
  value: string;
}

/** What the create form holds, as typed: one text per input, and the environment's rows. */
export interface WorkloadForm {
  name: string;
  namespaceId: string;
  image: string;
  scale: string;
  ports: string;
  cpuRequest: string;
  cpuLimit: string;
  memoryRequest: string;
  memoryLimit: string;
  env: EnvRow[];
}

export const EMPTY_FORM: WorkloadForm = {
  name: "",
  namespaceId: "",
  image: "",
  scale: "1",
  ports: "",
  cpuRequest: "",
  cpuLimit: "",
  memoryRequest: "",
  memoryLimit: "",
  env: [],
};

// The inputs of the form, by the body field they fill.
export const INPUTS = {
  name: "workload-name",
  namespaceId: "workload-namespace",
  image: "workload-image",
  scale: "workload-scale",
  ports: "workload-ports",
  cpuRequest: "workload-cpu-request",
  cpuLimit: "workload-cpu-limit",
  memoryRequest: "workload-memory-request",
  memoryLimit: "workload-memory-limit",
} as const;

// The resource inputs, by the part and resource of `containers[0].resources` they fill.
const RESOURCES = [
  ["requests", "cpu", "cpuRequest"],
  ["limits", "cpu", "cpuLimit"],
  ["requests", "memory", "memoryRequest"],
  ["limits", "memory", "memoryLimit"],
] as const;

/** The id of an environment row's input: `workload-env-0-name`. */
export function envInput(row: number, part: keyof EnvRow): string {
  return `workload-env-${String(row)}-${part}`;
}

/** `containers[0].resources` from the four quantity inputs, each as typed (the API judges the
 * grammar and that no request exceeds its limit); null when all are empty. */
export function resourcesBody(form: WorkloadForm): Record<string, Record<string, string>> | null {
  const resources: Record<string, Record<string, string>> = {};
  for (const [part, resource, field] of RESOURCES) {
    const amount = form[field].trim();
    if (!amount) continue;
    resources[part] = { ...resources[part], [resource]: amount };
  }
  return Object.keys(resources).length ? resources : null;
}

/** A whole number as a number; anything else as typed, so the API names what is wrong with it
 * rather than the page guessing. */
function numberOr(text: string): number | string {
  const trimmed = text.trim();
  return /^\d+$/.test(trimmed) ? Number(trimmed) : trimmed;
}

/** `8080, 53/udp` as container ports: each a port, and a protocol after a slash (TCP if none). */
export function parsePorts(text: string): { containerPort: number | string; protocol: string }[] {
  return text
    .split(/[\s,]+/)
    .filter(Boolean)
    .map((entry) => {
      const [port = "", protocol = "TCP"] = entry.split("/");
      return { containerPort: numberOr(port), protocol: protocol.toUpperCase() };
    });
}

/** The body of `POST /v3/projects/{id}/workloads`: a Deployment of one container named after
 * the workload. Every field goes as typed (an empty name too): the API judges them. */
export function workloadBody(form: WorkloadForm): Record<string, unknown> {
  const name = form.name.trim();
  const container: Record<string, unknown> = { name, image: form.image.trim() };
  const ports = parsePorts(form.ports);
  if (ports.length) container.ports = ports;
  // Every row goes, an empty one too, so the API's `env[i]` is the form's row i.
  if (form.env.length) container.env = form.env.map((row) => ({ name: row.name.trim(), value: row.value }));
  const resources = resourcesBody(form);
  if (resources) container.resources = resources;
  return {
    type: "workload",
    workloadType: "deployment",
    name,
    namespaceId: form.namespaceId,
    scale: numberOr(form.scale),
    containers: [container],
  };
}

/** The input an error of the API names (`fieldName`), or null when the form has none for it
 * (the message then shows above the form). */
export function workloadErrorInput(fieldName: string): string | null {
  if (fieldName === "name" || fieldName === "namespaceId" || fieldName === "scale") return INPUTS[fieldName];
  const container = /^containers(?:\[0\])?(?:\.(\w+))?/.exec(fieldName);
  if (!container) return null;
  // The container's name is the workload's, so a refusal of it is the name's.
  if (container[1] === "name") return INPUTS.name;
  if (container[1] === "ports") return INPUTS.ports;
  if (container[1] === "env") {
    const row = /^containers(?:\[0\])?\.env\[(\d+)\](?:\.(\w+))?/.exec(fieldName);
    // The list as a whole, or a source the form cannot give (`valueFrom`), has no input of its own.
    if (!row) return null;
    return envInput(Number(row[1]), row[2] === "value" ? "value" : "name");
  }
  if (container[1] === "resources") {
    const amount = /\.resources\.(requests|limits)(?:\.(cpu|memory))?/.exec(fieldName);
    const match = RESOURCES.find(([part, resource]) => part === amount?.[1] && resource === (amount[2] ?? "cpu"));
    return INPUTS[match?.[2] ?? "cpuRequest"];
  }
  return INPUTS.image;
}

/** Ready against wanted pods: `2 / 3`. */
export function readyText(workload: V3Workload): string {
  const ready = workload.status?.readyReplicas ?? 0;
  const wanted = SCALABLE.has(workload.workloadType) ? (workload.scale ?? 0) : (workload.status?.replicas ?? 0);
  return `${String(ready)} / ${String(wanted)}`;
}

/** The images a workload runs, in a line. */
export function imagesOf(workload: V3Workload): string {
  return (workload.containers ?? []).map((c) => c.image ?? "").filter(Boolean).join(", ");
}

/** Its ports as `8080/TCP`, one per container port. */
export function portsOf(workload: V3Workload): string[] {
  return (workload.containers ?? []).flatMap((c) =>
    (c.ports ?? []).map((p) => `${String(p.containerPort ?? "")}/${p.protocol ?? "TCP"}`),
  );
}

/** Where a public endpoint answers: `http://10.0.0.1:30080`, or its Ingress host and path. */
export function endpointUrls(workload: V3Workload): string[] {
  return (workload.publicEndpoints ?? []).flatMap((e) => {
    // A browser can open only what speaks over TCP.
    if (e.protocol === "UDP" || e.protocol === "SCTP") return [];
    const scheme = e.protocol === "HTTPS" || e.port === 443 ? "https" : "http";
    const port = e.port !== undefined && e.port !== 80 && e.port !== 443 ? `:${String(e.port)}` : "";
    if (e.hostname) return [`${scheme}://${e.hostname}${port}${e.path ?? ""}`];
    return (e.addresses ?? []).map((a) => `${scheme}://${a.includes(":") ? `[${a}]` : a}${port}`);
  });
}

/** The pods of each workload, by its id; sorted by name. */
export function podsByWorkload(pods: Iterable<V3Pod>): Map<string, V3Pod[]> {
  const grouped = new Map<string, V3Pod[]>();
  for (const pod of pods) {
    if (!pod.workloadId) continue;
    const list = grouped.get(pod.workloadId) ?? [];
    list.push(pod);
    grouped.set(pod.workloadId, list);
  }
  for (const list of grouped.values()) list.sort((a, b) => a.name.localeCompare(b.name));
  return grouped;
}

/** The cluster of a project id (`c-abc:p-xyz`). */
export function clusterOf(projectId: string): string {
  return projectId.split(":")[0] ?? "";
}

/** Restarts of all a pod's containers. */
export function restartsOf(pod: V3Pod): number {
  return (pod.containers ?? []).reduce((sum, c) => sum + (c.restartCount ?? 0), 0);
}

/** The pause or resume button a deployment's row offers: Pause while it rolls out, Resume while
 * it is paused; only when its actions carry that one (read-only members get none). */
export function pauseToggle(
  workload: V3Workload,
): { action: "pause" | "resume"; label: string; url: string } | null {
  const action = workload.paused ? "resume" : "pause";
  const url = workload.actions?.[action];
  if (url === undefined) return null;
  return { action, label: action === "pause" ? "Pause" : "Resume", url };
}

/** One revision of a deployment as `GET …/workloads/{id}/revisions` shows it. */
export interface V3Revision {
  id: string;
  name: string;
  revision: number;
  current?: boolean;
  created?: string;
  scale?: number;
  containers?: { name: string; image?: string }[];
}

/** The revisions a rollback may go to, newest first: every one but the current. */
export function rollbackChoices(revisions: V3Revision[]): V3Revision[] {
  return revisions.filter((r) => !r.current).sort((a, b) => b.revision - a.revision);
}
