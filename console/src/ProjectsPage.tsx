import { useState } from "preact/hooks";
import { Fragment } from "preact";

import { ApiError, all, call, pathOf } from "./api";
import type { V3Cluster } from "./clusters";
import { DeleteButton } from "./DeleteButton";
import { DeleteDialog } from "./DeleteDialog";
import { FormFailure, useSubmit } from "./FieldError";
import { FormButtons } from "./FormButtons";
import { LiveBadge, useLive } from "./live";
import { Members } from "./Members";
import {
  CONTAINER_RESOURCES,
  DESCRIPTION_FIELD,
  NAME_FIELD,
  QUOTA_LABELS,
  QUOTA_RESOURCES,
  containerField,
  errorInput,
  fieldId,
  namespaceQuotaField,
  projectBody,
  projectQuotaField,
  quotaText,
  type ProjectForm,
  type V3Project,
} from "./projects";
import { applyResourceEvent, byId, messageOf, type ResourceEvent } from "./resources";
import { hrefOf } from "./route";
import { TextField } from "./TextField";

export function ProjectsPage({ clusterId }: { clusterId: string }) {
  const [projects, setProjects] = useState<ReadonlyMap<string, V3Project> | null>(null);
  const [error, setError] = useState("");
  const [creating, setCreating] = useState(false);
  const [deleting, setDeleting] = useState<V3Project | null>(null);
  const [members, setMembers] = useState<string | null>(null);
  const [clusterName, setClusterName] = useState(clusterId);
  const ours = (p: V3Project) => p.clusterId === clusterId;

  const load = async () => {
    try {
      const id = encodeURIComponent(clusterId);
      const [cluster, found] = await Promise.all([
        call<V3Cluster>("GET", `/v3/clusters/${id}`),
        all<V3Project>(`/v3/projects?clusterId=${id}`),
      ]);
      setClusterName(cluster.name || clusterId);
      setProjects(byId(found.filter(ours)));
      setError("");
    } catch (failure) {
      if (failure instanceof ApiError && failure.sessionEnded) return;
      setError(messageOf(failure));
    }
  };
  const link = useLive(["project"], load, (event: ResourceEvent) => {
    setProjects((now) => (now ? applyResourceEvent(now, event, "project", ours) : now));
  });
  // A project made here is listed at once: its create event may reach its creator only with
  // its first change (docs/api.md, "Subscriptions"). An event may also come before the
  // answer to the POST, and then it is the newer of the two.
  const created = (project: V3Project) => {
    setProjects((now) => (now?.has(project.id) ? now : new Map(now ?? []).set(project.id, project)));
    setCreating(false);
  };

  const rows = [...(projects?.values() ?? [])].sort((a, b) =>
    (a.name ?? a.id).localeCompare(b.name ?? b.id),
  );
  return (
    <section class="page" aria-labelledby="projects-title">
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href={hrefOf({ page: "clusters" })}>Clusters</a> /{" "}
        <a href={hrefOf({ page: "cluster", clusterId })}>{clusterName}</a> / <span>Projects</span>
      </nav>
      <header class="page-head">
        <h1 id="projects-title">Projects</h1>
        <LiveBadge link={link} />
        <span class="spacer-flex" />
        {!creating && (
          <button type="button" onClick={() => { setCreating(true); }}>
            Create project
          </button>
        )}
      </header>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {creating && (
        <CreateProject clusterId={clusterId} onCreated={created} onCancel={() => { setCreating(false); }} />
      )}
      {projects === null ? (
        <p role="status">Loading…</p>
      ) : rows.length === 0 ? (
        <p class="empty">No projects you have a role in.</p>
      ) : (
        <table class="grid" data-testid="projects">
          <thead>
            <tr>
              <th scope="col">Project</th>
              <th scope="col">State</th>
              <th scope="col">Project quota</th>
              <th scope="col">Namespace default</th>
              <th scope="col">Container defaults</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map((p) => (
              <tr key={p.id} data-project={p.id}>
                <th scope="row">
                  <a href={hrefOf({ page: "project", projectId: p.id })}>{p.name || p.id}</a>
                  {p.description && <small class="muted">{p.description}</small>}
                </th>
                <td>
                  <span class={`state state-${p.state || "unknown"}`} title={p.transitioningMessage ?? ""}>
                    {p.state || "unknown"}
                  </span>
                </td>
                <td>{quotaText(p.resourceQuota?.limit)}</td>
                <td>{quotaText(p.namespaceDefaultResourceQuota?.limit)}</td>
                <td>{quotaText(p.containerDefaultResourceLimit)}</td>
                <td class="actions">
                  <a class="button" href={hrefOf({ page: "workloads", projectId: p.id })}
                    aria-label={`Workloads of ${p.name || p.id}`}>
                    Workloads
                  </a>
                  <button
                    type="button"
                    class="ghost"
                    aria-label={`Members of ${p.name || p.id}`}
                    aria-expanded={members === p.id}
                    onClick={() => { setMembers(members === p.id ? null : p.id); }}
                  >
                    Members
                  </button>
                  <DeleteButton of={p} label={`Delete ${p.name || p.id}`} onDelete={() => { setDeleting(p); }} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {members !== null && projects?.get(members) && (
        <Members
          key={members}
          project={projects.get(members) as V3Project}
          onClose={() => { setMembers(null); }}
        />
      )}
      {deleting?.links?.remove !== undefined && (
        <DeleteDialog
          what="project"
          name={deleting.name || deleting.id}
          remove={async () => {
            await call("DELETE", pathOf(deleting.links?.remove ?? ""));
          }}
          onClose={() => { setDeleting(null); }}
        />
      )}
    </section>
  );
}

interface CreateProps {
  clusterId: string;
  onCreated: (project: V3Project) => void;
  onCancel: () => void;
}

function CreateProject({ clusterId, onCreated, onCancel }: CreateProps) {
  const [form, setForm] = useState<ProjectForm>({});
  const { busy, failure, submit } = useSubmit(async () => {
    onCreated(await call<V3Project>("POST", "/v3/projects", projectBody(clusterId, form)));
  }, errorInput);

  const input = (field: string, label: string, inGrid = false) => {
    const id = fieldId(field);
    return (
      <TextField id={id} label={label} labelHidden={inGrid} value={form[id] ?? ""} failure={failure}
        onInput={(value) => { setForm({ ...form, [id]: value }); }} />
    );
  };

  return (
    <form class="panel" aria-labelledby="create-title" onSubmit={(event) => void submit(event)} noValidate>
      <h2 id="create-title">Create a project</h2>
      <FormFailure failure={failure} />
      {input(NAME_FIELD, "Name")}
      {input(DESCRIPTION_FIELD, "Description")}
      <fieldset>
        <legend>Quotas (Kubernetes quantities: 500m, 2, 256Mi, 10)</legend>
        <div class="quota-table">
          <span aria-hidden="true" />
          <span aria-hidden="true" class="quota-head">
            Project limit
          </span>
          <span aria-hidden="true" class="quota-head">
            Each namespace
          </span>
          {QUOTA_RESOURCES.map((resource) => {
            const label = QUOTA_LABELS[resource] ?? resource;
            return (
              <Fragment key={resource}>
                <span aria-hidden="true" class="quota-name">
                  {label}
                </span>
                {input(projectQuotaField(resource), `${label}: project`, true)}
                {input(namespaceQuotaField(resource), `${label}: each namespace`, true)}
              </Fragment>
            );
          })}
        </div>
      </fieldset>
      <fieldset>
        <legend>Container defaults</legend>
        <div class="quota-grid">
          {CONTAINER_RESOURCES.map((resource) => (
            <div key={resource}>{input(containerField(resource), `Default ${QUOTA_LABELS[resource]?.toLowerCase() ?? resource}`)}</div>
          ))}
        </div>
      </fieldset>
      <FormButtons onCancel={onCancel} busy={busy} submit="Create" pending="Creating…" />
    </form>
  );
}
