import { useRef, useState } from "preact/hooks";

import { ApiError, all, call, pathOf } from "./api";
import type { Cluster } from "./ClusterPage";
import { ConfirmDialog } from "./ConfirmDialog";
import {
  RESTORE_MODES,
  anyActivating,
  backupRows,
  restoreBody,
  updateProgress,
  type BackupRow,
  type RestoreMode,
  type V3EtcdBackup,
} from "./etcdbackups";
import { useAction, usePolled } from "./live";
import { messageOf } from "./resources";

// Backups are not among /v3/subscribe's families: read again while one is being taken.
const ACTIVATING_POLL_MS = 3_000;
const IDLE_POLL_MS = 30_000;

/** Whether the API offers this caller the cluster's backups: its owners, on a cluster corral
 * provisioned. */
export function offersBackups(cluster: Cluster): boolean {
  return cluster.actions?.backupEtcd !== undefined || cluster.actions?.restoreFromEtcdBackup !== undefined;
}

/** A provisioned cluster's etcd backups: when each was taken, its state and size; **Take a
 * backup** and **Restore** where the cluster's actions offer them. */
export function EtcdBackups({ cluster }: { cluster: Cluster }) {
  const [backups, setBackups] = useState<V3EtcdBackup[] | null>(null);
  const [error, setError] = useState("");
  const [restoring, setRestoring] = useState<BackupRow | null>(null);
  const [asked, setAsked] = useState("");
  const take = useAction();
  const opener = useRef<HTMLElement | null>(null);
  const backup = cluster.actions?.backupEtcd;
  const restore = cluster.actions?.restoreFromEtcdBackup;

  const rows = backups === null ? null : backupRows(backups, cluster.id);
  const load = async () => {
    try {
      setBackups(await all<V3EtcdBackup>(`/v3/etcdbackups?clusterId=${encodeURIComponent(cluster.id)}`));
      setError("");
    } catch (failure) {
      if (!(failure instanceof ApiError && failure.sessionEnded)) setError(messageOf(failure));
    }
  };
  const readNow = usePolled(load, rows && anyActivating(rows) ? ACTIVATING_POLL_MS : IDLE_POLL_MS);

  const takeOne = () => {
    if (backup === undefined) return;
    void take.run("backup", async () => {
      await call("POST", pathOf(backup), {});
      readNow();
    });
  };
  const progress = updateProgress(cluster.status?.conditions);

  return (
    <section aria-labelledby="backups-title">
      <div class="section-head">
        <h2 id="backups-title">etcd backups</h2>
        {backup !== undefined && (
          <button type="button" onClick={takeOne} disabled={take.pending !== null}>
            {take.pending ? "Taking a backup…" : "Take a backup"}
          </button>
        )}
      </div>
      {take.error && (
        <p class="error" role="alert">
          {take.error}
        </p>
      )}
      {asked && (
        <p role="status" data-testid="restore-progress">
          {progress?.running ? progress.text : asked}
        </p>
      )}
      {error ? (
        <p class="error">{error}</p>
      ) : rows === null ? (
        <p role="status">Loading…</p>
      ) : rows.length === 0 ? (
        <p class="empty">No backups yet.</p>
      ) : (
        <table class="grid" data-testid="backups">
          <thead>
            <tr>
              <th scope="col">Backup</th>
              <th scope="col">Taken</th>
              <th scope="col">State</th>
              <th scope="col">Size</th>
              <th scope="col">Version</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map((row) => (
              <tr key={row.id} data-backup={row.id}>
                <th scope="row">
                  {row.name}
                  {row.location && <small class="muted">{row.location}</small>}
                </th>
                <td>{row.createdAt ? <time dateTime={row.createdAt}>{row.createdAt}</time> : "–"}</td>
                <td>
                  <span class={`state state-${row.state || "unknown"}`} title={row.message}>
                    {row.state || "unknown"}
                  </span>
                  {row.message && <small class="muted">{row.message}</small>}
                </td>
                <td class="num">{row.size || "–"}</td>
                <td>{row.version || "–"}</td>
                <td class="actions">
                  {restore !== undefined && row.restorable && (
                    <button
                      type="button"
                      class="ghost"
                      aria-label={`Restore ${row.name}`}
                      onClick={(e) => {
                        opener.current = e.currentTarget;
                        setRestoring(row);
                      }}
                    >
                      Restore
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {restoring && restore !== undefined && (
        <RestoreDialog
          cluster={cluster}
          row={restoring}
          url={pathOf(restore)}
          onRestored={() => {
            setAsked(`Restore from ${restoring.name} asked for.`);
          }}
          onClose={() => {
            setRestoring(null);
            opener.current?.focus();
          }}
        />
      )}
    </section>
  );
}

interface RestoreProps {
  cluster: Cluster;
  row: BackupRow;
  url: string;
  onRestored: () => void;
  onClose: () => void;
}

function RestoreDialog({ cluster, row, url, onRestored, onClose }: RestoreProps) {
  const [mode, setMode] = useState<RestoreMode>("");
  return (
    <ConfirmDialog
      title={`Restore ${cluster.name || cluster.id} from ${row.name}?`}
      confirm="Restore"
      pending="Restoring…"
      run={async () => {
        await call("POST", url, restoreBody(row.id, mode));
        onRestored();
      }}
      onClose={onClose}
    >
      <p>
        {`Everything written to the cluster since ${row.createdAt || "the backup"} is lost: its `}
        control plane stops, etcd is replaced by the backup, and it starts again.
      </p>
      <label for="restore-mode">What to restore</label>
      <select
        id="restore-mode"
        value={mode}
        onChange={(e) => {
          setMode(e.currentTarget.value as RestoreMode);
        }}
      >
        {RESTORE_MODES.map((m) => (
          <option key={m.value} value={m.value}>
            {m.label}
          </option>
        ))}
      </select>
    </ConfirmDialog>
  );
}
