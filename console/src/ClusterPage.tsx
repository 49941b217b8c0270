import { useRef, useState } from "preact/hooks";
import type { ComponentChildren } from "preact";

import { ApiError, all, call, pathOf } from "./api";
import { healthy, type Condition, type V3Cluster } from "./clusters";
import { DeleteDialog } from "./DeleteDialog";
import { EtcdBackups, offersBackups } from "./EtcdBackups";
import { download, generateKubeconfig, kubeconfigFileName } from "./kubeconfig";
import { LiveBadge, useAction, useLive } from "./live";
import { NodeTaints } from "./NodeTaints";
import {
  MAX_QUANTITY,
  nodeRows,
  poolRows,
  type NodeRow,
  type PoolRow,
  type V3Node,
  type V3NodePool,
} from "./nodes";
import { applyResourceEvent, byId, messageOf, type ResourceEvent } from "./resources";
import { RotateCertificates } from "./RotateCertificates";
import { hrefOf } from "./route";

export interface Cluster extends V3Cluster {
  description?: string;
  links?: Record<string, string>;
  actions?: Record<string, string>;
  status?: V3Cluster["status"] & {
    conditions?: (Condition & { lastUpdateTime?: string })[];
  };
}

// A collection of the page: null until read, or with the API's refusal to list it.
export interface Loaded<T> {
  items: ReadonlyMap<string, T> | null;
  error: string;
}

function loadedOf<T extends { id: string }>(read: PromiseSettledResult<T[]>): Loaded<T> {
  return read.status === "fulfilled"
    ? { items: byId(read.value), error: "" }
    : { items: null, error: messageOf(read.reason) };
}

function applied<T extends { id: string; clusterId?: string }>(
  loaded: Loaded<T>,
  event: ResourceEvent,
  resourceType: string,
  clusterId: string,
): Loaded<T> {
  if (loaded.items === null) return loaded;
  const items = applyResourceEvent(loaded.items, event, resourceType, (r) => r.clusterId === clusterId);
  return items === loaded.items ? loaded : { items, error: "" };
}

export function ClusterPage({ clusterId }: { clusterId: string }) {
  const [cluster, setCluster] = useState<Cluster | null>(null);
  const [gone, setGone] = useState("");
  const [nodes, setNodes] = useState<Loaded<V3Node>>({ items: null, error: "" });
  const [pools, setPools] = useState<Loaded<V3NodePool>>({ items: null, error: "" });
  const id = encodeURIComponent(clusterId);

  const load = async () => {
    try {
      setCluster(await call<Cluster>("GET", `/v3/clusters/${id}`));
      setGone("");
    } catch (failure) {
      if (failure instanceof ApiError && failure.sessionEnded) return;
      setGone(messageOf(failure));
      return;
    }
    // A user who sees the cluster through a project only may not see its nodes: the API's
    // 403 says so where the nodes would be.
    const [found, made] = await Promise.allSettled([
      all<V3Node>(`/v3/clusters/${id}/nodes`),
      all<V3NodePool>(`/v3/nodepools?clusterId=${id}`),
    ]);
    setNodes(loadedOf(found));
    setPools(loadedOf(made));
  };

  const onEvent = (event: ResourceEvent) => {
    if (event.resourceType === "cluster" && event.data?.id === clusterId) {
      if (event.name === "resource.remove") setGone(`Cluster ${clusterId} has been deleted.`);
      else setCluster(event.data as unknown as Cluster);
    }
    setNodes((now) => applied(now, event, "node", clusterId));
    setPools((now) => applied(now, event, "nodePool", clusterId));
  };

  const link = useLive(["cluster", "node", "nodePool"], load, onEvent);

  if (gone) {
    return (
      <section class="page" aria-labelledby="cluster-title">
        <h1 id="cluster-title">Cluster {clusterId}</h1>
        <p class="error" role="alert">
          {gone}
        </p>
        <a href={hrefOf({ page: "clusters" })}>Back to the clusters</a>
      </section>
    );
  }
  if (cluster === null) {
    return (
      <p class="loading" role="status">
        Loading…
      </p>
    );
  }
  const name = cluster.name || cluster.id;
  return (
    <section class="page" aria-labelledby="cluster-title">
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href={hrefOf({ page: "clusters" })}>Clusters</a> / <span>{name}</span>
      </nav>
      <header class="page-head">
        <h1 id="cluster-title">{name}</h1>
        <span class={`state state-${cluster.state || "unknown"}`} title={cluster.transitioningMessage ?? ""}>
          {cluster.state || "unknown"}
        </span>
        <LiveBadge link={link} />
        <span class="spacer-flex" />
        <a class="button ghost" href={hrefOf({ page: "projects", clusterId })}>
          Projects
        </a>
        <RotateCertificates cluster={cluster} />
        <ClusterActions cluster={cluster} name={name} />
      </header>
      <dl class="facts">
        <dt>Id</dt>
        <dd>{cluster.id}</dd>
        <dt>Driver</dt>
        <dd>{cluster.driver || "–"}</dd>
        <dt>Version</dt>
        <dd>{cluster.status?.version?.gitVersion || "–"}</dd>
        {cluster.transitioningMessage && (
          <>
            <dt>Message</dt>
            <dd>{cluster.transitioningMessage}</dd>
          </>
        )}
      </dl>
      <Conditions conditions={cluster.status?.conditions ?? []} />
      <Nodes loaded={nodes} />
      <Pools loaded={pools} />
      {offersBackups(cluster) && <EtcdBackups cluster={cluster} />}
    </section>
  );
}

export function ClusterActions({ cluster, name }: { cluster: Cluster; name: string }) {
  const kubeconfig = useAction();
  const [deleting, setDeleting] = useState(false);
  const opener = useRef<HTMLButtonElement>(null);
  const save = () =>
    kubeconfig.run("kubeconfig", async () => {
      download(await generateKubeconfig(cluster.id), kubeconfigFileName(name, cluster.id));
    });
  const remove = cluster.links?.remove;
  return (
    <>
      {cluster.actions?.generateKubeconfig !== undefined && (
        <button type="button" class="ghost" onClick={() => void save()} disabled={kubeconfig.pending !== null}>
          {kubeconfig.pending ? "Generating kubeconfig…" : "Download kubeconfig"}
        </button>
      )}
      {remove !== undefined && (
        <button type="button" class="danger" ref={opener} onClick={() => { setDeleting(true); }}>
          Delete
        </button>
      )}
      {kubeconfig.error && (
        <p class="error" role="alert">
          {kubeconfig.error}
        </p>
      )}
      {deleting && remove !== undefined && (
        <DeleteDialog
          what="cluster"
          name={name}
          remove={async () => {
            await call("DELETE", pathOf(remove));
            window.location.hash = hrefOf({ page: "clusters" });
          }}
          onClose={() => {
            setDeleting(false);
            opener.current?.focus();
          }}
        />
      )}
    </>
  );
}

function Conditions({ conditions }: { conditions: (Condition & { lastUpdateTime?: string })[] }) {
  const sorted = [...conditions].sort((a, b) => a.type.localeCompare(b.type));
  return (
    <section aria-labelledby="conditions-title">
      <h2 id="conditions-title">Conditions</h2>
      {sorted.length === 0 ? (
        <p class="empty">No conditions reported yet.</p>
      ) : (
        <table class="grid" data-testid="conditions">
          <thead>
            <tr>
              <th scope="col">Condition</th>
              <th scope="col">Status</th>
              <th scope="col">Reason</th>
              <th scope="col">Message</th>
              <th scope="col">Updated</th>
            </tr>
          </thead>
          <tbody>
            {sorted.map((c) => (
              <tr key={c.type} data-condition={c.type}>
                <th scope="row">{c.type}</th>
                <td class={healthy(c) ? "ok" : "bad"}>{c.status}</td>
                <td>{c.reason ?? ""}</td>
                <td>{c.message ?? ""}</td>
                <td>{c.lastUpdateTime ?? ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

interface SectionProps<T> {
  id: string;
  title: string;
  loaded: Loaded<T>;
  actionError: string; // the refusal of what a row's button asked
  children: (items: ReadonlyMap<string, T>) => ComponentChildren;
}

/** A section of the page showing one of its live collections, once read: until then
 * Loading…, or the API's refusal to list it. */
function CollectionSection<T>({ id, title, loaded, actionError, children }: SectionProps<T>) {
  return (
    <section aria-labelledby={id}>
      <h2 id={id}>{title}</h2>
      {actionError && (
        <p class="error" role="alert">
          {actionError}
        </p>
      )}
      {loaded.error ? (
        <p class="error">{loaded.error}</p>
      ) : loaded.items === null ? (
        <p role="status">Loading…</p>
      ) : (
        children(loaded.items)
      )}
    </section>
  );
}

export function Nodes({ loaded }: { loaded: Loaded<V3Node> }) {
  const action = useAction();
  const act = (row: NodeRow, name: "cordon" | "uncordon" | "drain") => {
    const link = row.actions[name];
    if (link) void action.run(`${name} ${row.id}`, () => call("POST", pathOf(link), {}));
  };
  return (
    <CollectionSection id="nodes-title" title="Nodes" loaded={loaded} actionError={action.error}>
      {(items) => items.size === 0 ? (
        <p class="empty">No nodes.</p>
      ) : (
        <table class="grid" data-testid="nodes">
          <thead>
            <tr>
              <th scope="col">Node</th>
              <th scope="col">State</th>
              <th scope="col">Roles</th>
              <th scope="col">Drain</th>
              <th scope="col">Problems</th>
              <th scope="col">Taints</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {nodeRows(items).map((row) => {
              const busy = action.pending?.endsWith(` ${row.id}`) ?? false;
              return (
                <tr key={row.id} data-node={row.id}>
                  <th scope="row">{row.name}</th>
                  <td>
                    <span class={`state state-${row.state || "unknown"}`} aria-busy={row.draining}>
                      {row.draining ? "draining…" : row.state || "unknown"}
                    </span>
                  </td>
                  <td>{row.roles.join(", ") || "–"}</td>
                  <td>{row.drain ? <span class={row.drain.ok ? "ok" : "bad"}>{row.drain.text}</span> : "–"}</td>
                  <td>
                    {row.problems.map((c) => (
                      <span class="problem" key={c.type} title={c.message ?? ""}>
                        {`${c.type}: ${c.status}${c.reason ? ` (${c.reason})` : ""}`}
                      </span>
                    ))}
                  </td>
                  <td>
                    <NodeTaints row={row} />
                  </td>
                  <td class="actions">
                    {row.actions.cordon !== undefined && (
                      <>
                        <button
                          type="button"
                          class="ghost"
                          disabled={busy}
                          aria-label={`${row.unschedulable ? "Uncordon" : "Cordon"} ${row.name}`}
                          onClick={() => {
                            act(row, row.unschedulable ? "uncordon" : "cordon");
                          }}
                        >
                          {row.unschedulable ? "Uncordon" : "Cordon"}
                        </button>
                        <button
                          type="button"
                          class="ghost"
                          disabled={busy || row.draining}
                          aria-label={`Drain ${row.name}`}
                          onClick={() => {
                            act(row, "drain");
                          }}
                        >
                          {busy && action.pending?.startsWith("drain") ? "Asking…" : "Drain"}
                        </button>
                      </>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </CollectionSection>
  );
}

export function Pools({ loaded }: { loaded: Loaded<V3NodePool> }) {
  const action = useAction();
  const scale = (row: PoolRow, quantity: number) => {
    const link = row.update;
    if (link) void action.run(row.id, () => call("PUT", pathOf(link), { quantity }));
  };
  if (loaded.items !== null && loaded.items.size === 0) return null;
  return (
    <CollectionSection id="pools-title" title="Node pools" loaded={loaded} actionError={action.error}>
      {(items) => (
        <table class="grid" data-testid="pools">
          <thead>
            <tr>
              <th scope="col">Pool</th>
              <th scope="col">State</th>
              <th scope="col">Ready / wanted</th>
              <th scope="col">Message</th>
              <th scope="col">Scale</th>
            </tr>
          </thead>
          <tbody>
            {poolRows(items).map((row) => (
              <tr key={row.id} data-pool={row.id}>
                <th scope="row">{row.name}</th>
                <td>
                  <span class={`state state-${row.state || "unknown"}`}>{row.state || "unknown"}</span>
                </td>
                <td class="num">{`${row.ready} / ${row.quantity}`}</td>
                <td>{row.message}</td>
                <td class="actions">
                  {row.update !== null && (
                    <>
                      <button
                        type="button"
                        class="ghost"
                        aria-label={`Scale ${row.name} down`}
                        disabled={action.pending === row.id || row.quantity <= 0}
                        onClick={() => {
                          scale(row, row.quantity - 1);
                        }}
                      >
                        −
                      </button>
                      <button
                        type="button"
                        class="ghost"
                        aria-label={`Scale ${row.name} up`}
                        disabled={action.pending === row.id || row.quantity >= MAX_QUANTITY}
                        onClick={() => {
                          scale(row, row.quantity + 1);
                        }}
                      >
                        +
                      </button>
                      {action.pending === row.id && <span role="status">Scaling…</span>}
                    </>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </CollectionSection>
  );
}
