import { useEffect, useState } from "preact/hooks";

import { ApiError, call } from "./api";
import { Events } from "./Events";
import { Namespaces } from "./Namespaces";
import type { V3Project } from "./projects";
import { messageOf } from "./resources";
import { hrefOf } from "./route";
import { Secrets } from "./Secrets";
import { clusterOf } from "./workloads";

/** A project: its namespaces, its secrets and its recent events, and a link to its workloads.
 * Each section reads its own collection and follows its own links, so a read-only member sees
 * every one of them with nothing to press. */
export function ProjectPage({ projectId }: { projectId: string }) {
  const clusterId = clusterOf(projectId);
  const [project, setProject] = useState<V3Project | null>(null);
  const [clusterName, setClusterName] = useState(clusterId);
  const [error, setError] = useState("");

  useEffect(() => {
    call<V3Project>("GET", `/v3/projects/${encodeURIComponent(projectId)}`)
      .then(setProject)
      .catch((failure: unknown) => {
        if (failure instanceof ApiError && failure.sessionEnded) return;
        setError(messageOf(failure));
      });
    // The breadcrumb keeps the id if the cluster's name cannot be read.
    call<{ name?: string }>("GET", `/v3/clusters/${encodeURIComponent(clusterId)}`)
      .then((cluster) => {
        setClusterName(cluster.name || clusterId);
      })
      .catch(() => undefined);
  }, [projectId]);

  const name = project?.name || projectId;
  return (
    <section class="page" aria-labelledby="project-title">
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href={hrefOf({ page: "clusters" })}>Clusters</a> /{" "}
        <a href={hrefOf({ page: "cluster", clusterId })}>{clusterName}</a> /{" "}
        <a href={hrefOf({ page: "projects", clusterId })}>Projects</a> / <span>{name}</span>
      </nav>
      <header class="page-head">
        <h1 id="project-title">{name}</h1>
        {project && <span class={`state state-${project.state || "unknown"}`}>{project.state || "unknown"}</span>}
        <span class="spacer-flex" />
        <a class="button" href={hrefOf({ page: "workloads", projectId })}>
          Workloads
        </a>
      </header>
      {error ? (
        <p class="error" role="alert">
          {error}
        </p>
      ) : project === null ? (
        <p role="status">Loading…</p>
      ) : (
        <>
          <Namespaces projectId={projectId} />
          <Secrets projectId={projectId} />
          <Events projectId={projectId} />
        </>
      )}
    </section>
  );
}
