import type { FunctionComponent } from "preact";
import { useEffect, useState } from "preact/hooks";

import { ApiError, call, pathOf } from "./api";
import { LiveBadge, useLive } from "./live";
import { PodLog } from "./PodLog";
import type { TerminalTarget } from "./PodTerminal";
import { messageOf, type ResourceEvent } from "./resources";
import { hrefOf } from "./route";
import { clusterOf, restartsOf, type V3Pod } from "./workloads";

type TerminalModule = FunctionComponent<{ target: TerminalTarget }>;

/** A pod: its state and containers, a container's log, and a terminal in it for those who may
 * run commands there (the pod's `execute` action says so). */
export function PodPage({ projectId, podId }: { projectId: string; podId: string }) {
  const [pod, setPod] = useState<V3Pod | null>(null);
  const [error, setError] = useState("");
  const [container, setContainer] = useState("");
  const [terminal, setTerminal] = useState(false);

  const load = async () => {
    try {
      const found = await call<V3Pod>(
        "GET",
        `/v3/projects/${encodeURIComponent(projectId)}/pods/${encodeURIComponent(podId)}`,
      );
      setPod(found);
      setContainer((now) => now || (found.containers?.[0]?.name ?? ""));
      setError("");
    } catch (failure) {
      if (failure instanceof ApiError && failure.sessionEnded) return;
      setError(messageOf(failure));
    }
  };
  // The pod's state and restarts as they change: its events, after one read on each (re)connect.
  const onEvent = (event: ResourceEvent) => {
    if (event.resourceType !== "pod" || event.data?.id !== podId) return;
    if ((event.data as { projectId?: string }).projectId !== projectId) return;
    if (event.name === "resource.remove") setError(`Pod ${podId} has been deleted.`);
    else setPod(event.data as unknown as V3Pod);
  };
  const link = useLive(["pod"], load, onEvent);

  const logs = pod?.links?.logs;
  return (
    <section class="page" aria-labelledby="pod-title">
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href={hrefOf({ page: "clusters" })}>Clusters</a> /{" "}
        <a href={hrefOf({ page: "workloads", projectId })}>Workloads</a> / <span>Pods</span>
      </nav>
      <header class="page-head">
        <h1 id="pod-title">{pod?.name ?? podId}</h1>
        {pod && <span class={`state state-${pod.state ?? "unknown"}`}>{pod.state ?? "unknown"}</span>}
        <LiveBadge link={link} />
      </header>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {pod === null ? (
        !error && <p role="status">Loading…</p>
      ) : (
        <>
          <dl class="facts">
            <dt>Namespace</dt>
            <dd>{pod.namespaceId}</dd>
            <dt>Node</dt>
            <dd>{pod.nodeId ?? "–"}</dd>
            <dt>Pod IP</dt>
            <dd>{pod.podIp ?? "–"}</dd>
            <dt>Restarts</dt>
            <dd>{restartsOf(pod)}</dd>
          </dl>
          <h2>Containers</h2>
          <table class="grid" data-testid="containers">
            <thead>
              <tr>
                <th scope="col">Container</th>
                <th scope="col">Image</th>
                <th scope="col">State</th>
                <th scope="col">Ready</th>
                <th scope="col">Restarts</th>
              </tr>
            </thead>
            <tbody>
              {(pod.containers ?? []).map((c) => (
                <tr key={c.name}>
                  <th scope="row">{c.name}</th>
                  <td>{c.image}</td>
                  <td>{c.state}</td>
                  <td>{c.ready ? "yes" : "no"}</td>
                  <td class="num">{c.restartCount ?? 0}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {(pod.containers?.length ?? 0) > 1 && (
            <div class="field">
              <label for="pod-container">Container</label>
              <select
                id="pod-container"
                value={container}
                onChange={(e) => {
                  setContainer(e.currentTarget.value);
                }}
              >
                {(pod.containers ?? []).map((c) => (
                  <option key={c.name} value={c.name}>
                    {c.name}
                  </option>
                ))}
              </select>
            </div>
          )}
          {logs && container && <PodLog logsUrl={pathOf(logs)} container={container} />}
          {pod.actions?.execute !== undefined && container && (
            <section aria-labelledby="terminal-title">
              <div class="page-head">
                <h2 id="terminal-title">Terminal</h2>
                <span class="spacer-flex" />
                <button
                  type="button"
                  class={terminal ? "ghost" : undefined}
                  onClick={() => {
                    setTerminal(!terminal);
                  }}
                >
                  {terminal ? "Close terminal" : "Open terminal"}
                </button>
              </div>
              {terminal && (
                <LazyTerminal
                  key={container}
                  target={{ clusterId: clusterOf(projectId), namespace: pod.namespaceId, pod: pod.name, container }}
                />
              )}
            </section>
          )}
        </>
      )}
    </section>
  );
}

/** xterm.js is fetched the first time a terminal opens: most visits never open one. */
function LazyTerminal({ target }: { target: TerminalTarget }) {
  const [loaded, setLoaded] = useState<{ Terminal: TerminalModule } | null>(null);
  const [error, setError] = useState("");
  useEffect(() => {
    import("./PodTerminal")
      .then((module) => {
        setLoaded({ Terminal: module.default });
      })
      .catch((failure: unknown) => {
        setError(messageOf(failure));
      });
  }, []);
  if (error) {
    return (
      <p class="error" role="alert">
        {error}
      </p>
    );
  }
  if (!loaded) return <p role="status">Loading the terminal…</p>;
  return <loaded.Terminal target={target} />;
}
