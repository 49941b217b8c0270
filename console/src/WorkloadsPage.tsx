import { useEffect, useState } from "preact/hooks";

import { ApiError, call, listing, pathOf } from "./api";
import { CreateWorkload } from "./CreateWorkload";
import { DeleteButton } from "./DeleteButton";
import { DeleteDialog } from "./DeleteDialog";
import { LiveBadge, useAction, useLive } from "./live";
import type { V3Project } from "./projects";
import { applyResourceEvent, byId, messageOf, type ResourceEvent } from "./resources";
import { RollbackDialog } from "./RollbackDialog";
import { hrefOf } from "./route";
import {
  SCALABLE,
  clusterOf,
  endpointUrls,
  imagesOf,
  pauseToggle,
  podsByWorkload,
  portsOf,
  readyText,
  restartsOf,
  type V3Namespace,
  type V3Pod,
  type V3Workload,
} from "./workloads";

interface Listed {
  workloads: ReadonlyMap<string, V3Workload>;
  pods: ReadonlyMap<string, V3Pod>;
  createUrl: string | null;
}

export function WorkloadsPage({ projectId }: { projectId: string }) {
  const clusterId = clusterOf(projectId);
  const project = encodeURIComponent(projectId);
  const [listed, setListed] = useState<Listed | null>(null);
  const [names, setNames] = useState({ project: projectId, cluster: clusterId });
  const [namespaces, setNamespaces] = useState<V3Namespace[]>([]);
  const [error, setError] = useState("");
  const [creating, setCreating] = useState(false);
  const [deleting, setDeleting] = useState<V3Workload | null>(null);
  const [rolling, setRolling] = useState<V3Workload | null>(null);
  const action = useAction();

  const load = async () => {
    try {
      const [workloads, pods] = await Promise.all([
        listing<V3Workload>(`/v3/projects/${project}/workloads`),
        listing<V3Pod>(`/v3/projects/${project}/pods`),
      ]);
      const createUrl = workloads.createTypes.workload;
      setListed({
        workloads: byId(workloads.data),
        pods: byId(pods.data),
        createUrl: createUrl ? pathOf(createUrl) : null,
      });
      setError("");
    } catch (failure) {
      if (failure instanceof ApiError && failure.sessionEnded) return;
      setError(messageOf(failure));
    }
  };
  // Reading the lists starts the API server's watch of the cluster's workloads and pods, whose
  // events this project's members get from then on: every change shows without a read.
  const inProject = (r: { projectId?: string }) => r.projectId === projectId;
  const onEvent = (event: ResourceEvent) => {
    setListed((now) => {
      if (now === null) return now;
      const workloads = applyResourceEvent(now.workloads, event, "workload", inProject);
      const pods = applyResourceEvent(now.pods, event, "pod", inProject);
      return workloads === now.workloads && pods === now.pods ? now : { ...now, workloads, pods };
    });
  };
  const link = useLive(["workload", "pod"], load, onEvent);

  // The namespaces the create form offers: read when it opens.
  const openCreate = async () => {
    setCreating(true);
    try {
      const cluster = encodeURIComponent(clusterId);
      const found = await listing<V3Namespace>(`/v3/clusters/${cluster}/namespaces?projectId=${project}`);
      setNamespaces(found.data.filter((n) => n.projectId === projectId));
    } catch (failure) {
      setError(messageOf(failure));
    }
  };
  // The names in the breadcrumb change seldom: read once.
  useEffect(() => {
    const named = async () => {
      const [found, cluster] = await Promise.all([
        call<V3Project>("GET", `/v3/projects/${project}`),
        call<{ name?: string }>("GET", `/v3/clusters/${encodeURIComponent(clusterId)}`),
      ]);
      setNames({ project: found.name || projectId, cluster: cluster.name || clusterId });
    };
    // On failure the list says what is wrong; the breadcrumb keeps the ids.
    named().catch(() => undefined);
  }, [projectId]);

  // What an action answers is the workload as it is now; its events follow.
  const act = (label: string, work: () => Promise<unknown>) => {
    void action.run(label, work);
  };

  const pods = podsByWorkload(listed?.pods.values() ?? []);
  const workloads = [...(listed?.workloads.values() ?? [])].sort((a, b) => a.id.localeCompare(b.id));
  return (
    <section class="page" aria-labelledby="workloads-title">
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href={hrefOf({ page: "clusters" })}>Clusters</a> /{" "}
        <a href={hrefOf({ page: "cluster", clusterId })}>{names.cluster}</a> /{" "}
        <a href={hrefOf({ page: "projects", clusterId })}>Projects</a> / <span>{names.project}</span>
      </nav>
      <header class="page-head">
        <h1 id="workloads-title">Workloads</h1>
        <LiveBadge link={link} />
        <span class="spacer-flex" />
        {listed?.createUrl && !creating && (
          <button type="button" onClick={() => void openCreate()}>
            Create workload
          </button>
        )}
      </header>
      {(error || action.error) && (
        <p class="error" role="alert">
          {error || action.error}
        </p>
      )}
      {creating && listed?.createUrl && (
        <CreateWorkload
          createUrl={listed.createUrl}
          namespaces={namespaces}
          onCreated={() => {
            setCreating(false);
          }}
          onCancel={() => {
            setCreating(false);
          }}
        />
      )}
      {listed === null ? (
        <p role="status">Loading…</p>
      ) : workloads.length === 0 ? (
        <p class="empty">No workloads in this project.</p>
      ) : (
        <table class="grid" data-testid="workloads">
          <thead>
            <tr>
              <th scope="col">Workload</th>
              <th scope="col">State</th>
              <th scope="col">Ready</th>
              <th scope="col">Image</th>
              <th scope="col">Ports</th>
              <th scope="col">Pods</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {workloads.map((w) => (
              <WorkloadRow
                key={w.id}
                workload={w}
                pods={pods.get(w.id) ?? []}
                projectId={projectId}
                pending={action.pending}
                act={act}
                onDelete={() => {
                  setDeleting(w);
                }}
                onRollback={() => {
                  setRolling(w);
                }}
              />
            ))}
          </tbody>
        </table>
      )}
      {deleting?.links?.remove !== undefined && (
        <DeleteDialog
          what="workload"
          name={deleting.name}
          remove={async () => {
            await call("DELETE", pathOf(deleting.links?.remove ?? ""));
          }}
          onClose={() => {
            setDeleting(null);
          }}
        />
      )}
      {rolling !== null && (
        <RollbackDialog
          workload={rolling}
          onClose={() => {
            setRolling(null);
          }}
        />
      )}
    </section>
  );
}

interface RowProps {
  workload: V3Workload;
  pods: V3Pod[];
  projectId: string;
  pending: string | null;
  act: (label: string, work: () => Promise<unknown>) => void;
  onDelete: () => void;
  onRollback: () => void;
}

// What a pending action of a row is called while it runs, by its label's first word.
const PROGRESS: Record<string, string> = {
  scale: "Scaling…",
  redeploy: "Redeploying…",
  pause: "Pausing…",
  resume: "Resuming…",
};

function WorkloadRow({ workload: w, pods, projectId, pending, act, onDelete, onRollback }: RowProps) {
  const update = w.links?.update;
  const redeploy = w.actions?.redeploy;
  const toggle = pauseToggle(w);
  const scale = w.scale ?? 0;
  const busy = pending?.endsWith(` ${w.id}`) ?? false;
  const setScale = (to: number) => {
    if (update) act(`scale ${w.id}`, () => call("PUT", pathOf(update), { scale: to }));
  };
  const endpoints = endpointUrls(w);
  return (
    <tr data-workload={w.id}>
      <th scope="row">
        {w.name}
        <small class="muted">{`${w.workloadType} in ${w.namespaceId}`}</small>
      </th>
      <td>
        <span class={`state state-${w.state || "unknown"}`}>{w.state || "unknown"}</span>
      </td>
      <td class="num">{readyText(w)}</td>
      <td>{imagesOf(w)}</td>
      <td>
        {portsOf(w).join(", ") || "–"}
        {endpoints.map((url) => (
          <small key={url}>
            <a href={url} target="_blank" rel="noreferrer">
              {url}
            </a>
          </small>
        ))}
      </td>
      <td>
        {pods.length === 0 ? (
          <span class="muted">none</span>
        ) : (
          <ul class="pods">
            {pods.map((pod) => (
              <li key={pod.id} data-pod={pod.id}>
                <a href={hrefOf({ page: "pod", projectId, podId: pod.id })}>{pod.name}</a>{" "}
                <span class={`state state-${pod.state ?? "unknown"}`}>{pod.state ?? "unknown"}</span>
                {restartsOf(pod) > 0 && <span class="muted">{` ${String(restartsOf(pod))} restarts`}</span>}
              </li>
            ))}
          </ul>
        )}
      </td>
      <td class="actions">
        {update !== undefined && SCALABLE.has(w.workloadType) && (
          <>
            <button
              type="button"
              class="ghost"
              aria-label={`Scale ${w.name} down`}
              disabled={busy || scale <= 0}
              onClick={() => {
                setScale(scale - 1);
              }}
            >
              −
            </button>
            <button
              type="button"
              class="ghost"
              aria-label={`Scale ${w.name} up`}
              disabled={busy}
              onClick={() => {
                setScale(scale + 1);
              }}
            >
              +
            </button>
          </>
        )}
        {redeploy !== undefined && (
          <button
            type="button"
            class="ghost"
            aria-label={`Redeploy ${w.name}`}
            disabled={busy}
            onClick={() => {
              act(`redeploy ${w.id}`, () => call("POST", pathOf(redeploy)));
            }}
          >
            Redeploy
          </button>
        )}
        {toggle !== null && (
          <button
            type="button"
            class="ghost"
            aria-label={`${toggle.label} ${w.name}`}
            disabled={busy}
            onClick={() => {
              act(`${toggle.action} ${w.id}`, () => call("POST", pathOf(toggle.url)));
            }}
          >
            {toggle.label}
          </button>
        )}
        {w.actions?.rollback !== undefined && w.links?.revisions !== undefined && (
          <button type="button" class="ghost" aria-label={`Roll back ${w.name}`} disabled={busy} onClick={onRollback}>
            Roll back…
          </button>
        )}
        <DeleteButton of={w} label={`Delete ${w.name}`} onDelete={onDelete} />
        {busy && <span role="status">{PROGRESS[pending?.split(" ")[0] ?? ""] ?? "Working…"}</span>}
      </td>
    </tr>
  );
}
