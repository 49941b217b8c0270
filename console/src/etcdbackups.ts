// A provisioned cluster's etcd backups and certificate rotation as /v3 shows them: the rows of
// the backups table, a restore's body, and what the cluster's Updated condition says while a
// restore or a rotation runs. Pure: the components and their tests share it.

import type { Condition } from "./clusters";
import type { Resource } from "./resources";

export interface V3EtcdBackup extends Resource {
  type?: string;
  name?: string;
  manual?: boolean;
  etcdVersion?: string;
  revision?: number;
  transitioning?: string;
  clusterId?: string;
  filename?: string;
  location?: string;
  createdAt?: string;
  kubernetesVersion?: string;
  size?: number;
  state?: string;
  transitioningMessage?: string;
}

export interface BackupRow {
  id: string;
  name: string;
  createdAt: string;
  state: string;
  size: string;
  version: string;
  location: string;
  message: string;
  restorable: boolean;
}

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

/** Bytes for a person: `0 B`, `512 B`, `1.5 MiB`; "" when the API gave none. */
export function sizeText(bytes: number | undefined): string {
  if (bytes === undefined || !Number.isFinite(bytes) || bytes < 0) return "";
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const shown = unit === 0 || value >= 100 ? Math.round(value).toString() : value.toFixed(1);
  return `${shown} ${UNITS[unit] ?? "B"}`;
}

/** The backups of one cluster, newest first; a backup is restorable once saved (`active`). */
export function backupRows(backups: Iterable<V3EtcdBackup>, clusterId: string): BackupRow[] {
  return [...backups]
    .filter((b) => b.clusterId === clusterId)
    .map((b) => {
      const state = b.state ?? "";
      return {
        id: b.id,
        name: b.name ?? b.id,
        createdAt: b.createdAt ?? "",
        state,
        // An activating backup's size is the 0 of a file not yet written, not a size.
        size: state === "active" ? sizeText(b.size) : "",
        version: b.kubernetesVersion ?? "",
        location: b.location ?? "",
        message: b.transitioningMessage ?? "",
        restorable: state === "active",
      };
    })
    .sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.name.localeCompare(a.name));
}

export function anyActivating(rows: BackupRow[]): boolean {
  return rows.some((r) => r.state === "activating");
}

// What a restore brings back besides etcd's data (docs/api.md, "A restore").
export const RESTORE_MODES = [
  { value: "", label: "etcd's data only" },
  { value: "kubernetesVersion", label: "etcd's data and the Kubernetes version of that time" },
  { value: "all", label: "etcd's data, the version and the cluster's configuration of that time" },
] as const;
export type RestoreMode = (typeof RESTORE_MODES)[number]["value"];

/** The body of `restoreFromEtcdBackup`: Rancher's `etcdBackupId`, the backup's full id. */
export function restoreBody(backupId: string, mode: RestoreMode): Record<string, string> {
  return { etcdBackupId: backupId, restoreRkeConfig: mode };
}

export interface Progress {
  // A restore or a rotation is under way: the condition says which and how far.
  running: boolean;
  text: string;
}

const RUNNING = new Set(["Restoring", "RotatingCertificates"]);

/** What the cluster's `Updated` condition says of a restore or a rotation; null without one. */
export function updateProgress(conditions: readonly Condition[] | undefined): Progress | null {
  const updated = conditions?.find((c) => c.type === "Updated");
  if (!updated) return null;
  const running = updated.status !== "True" && RUNNING.has(updated.reason ?? "");
  const reason = updated.reason ? ` (${updated.reason})` : "";
  const message = updated.message ? `: ${updated.message}` : "";
  return { running, text: `Updated ${updated.status}${reason}${message}` };
}
