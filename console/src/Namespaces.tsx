import type { TargetedSubmitEvent } from "preact";
import { useEffect, useState } from "preact/hooks";

import { all, call, listing, pathOf } from "./api";
import { DeleteButton } from "./DeleteButton";
import { DeleteDialog } from "./DeleteDialog";
import { useAction } from "./live";
import { moveTargets, namespaceBody, namespacesOf, withoutNamespace } from "./namespaces";
import type { V3Project } from "./projects";
import { messageOf } from "./resources";
import type { V3Namespace } from "./workloads";

interface Listed {
  namespaces: V3Namespace[];
  createUrl: string | null;
  targets: V3Project[];
}

/** A project's namespaces: listed, one created in the project (the collection's createTypes
 * says whether the caller may), one moved to another project of the cluster (its update
 * link says whether they may), and one deleted once its name is typed (its remove link).
 * Read again after a create or move: namespaces are not among the subscription's families. */
export function Namespaces({ projectId }: { projectId: string }) {
  const cluster = encodeURIComponent(projectId.split(":")[0] ?? "");
  const [listed, setListed] = useState<Listed | null>(null);
  const [error, setError] = useState("");
  const [name, setName] = useState("");
  const create = useAction();
  const move = useAction();
  const [deleting, setDeleting] = useState<V3Namespace | null>(null);

  const load = async () => {
    try {
      const [found, projects] = await Promise.all([
        listing<V3Namespace>(`/v3/clusters/${cluster}/namespaces?projectId=${encodeURIComponent(projectId)}`),
        all<V3Project>(`/v3/projects?clusterId=${cluster}`),
      ]);
      const createUrl = found.createTypes.namespace;
      setListed({
        namespaces: namespacesOf(found.data, projectId),
        createUrl: createUrl ? pathOf(createUrl) : null,
        targets: moveTargets(projects, projectId),
      });
      setError("");
    } catch (failure) {
      setError(messageOf(failure));
    }
  };
  useEffect(() => {
    void load();
  }, [projectId]);

  const submit = async (event: TargetedSubmitEvent<HTMLFormElement>) => {
    event.preventDefault();
    const url = listed?.createUrl;
    if (!url) return;
    if (await create.run("create", () => call("POST", url, namespaceBody(name, projectId)))) {
      setName("");
      await load();
    }
  };
  const moveTo = async (namespace: V3Namespace, target: string) => {
    const update = namespace.links?.update;
    if (!update || !target) return;
    if (await move.run(namespace.id, () => call("PUT", pathOf(update), { projectId: target }))) await load();
  };

  return (
    <section class="panel" aria-labelledby="namespaces-title" data-testid="namespaces">
      <h2 id="namespaces-title">Namespaces</h2>
      {(error || move.error) && (
        <p class="error" role="alert">
          {error || move.error}
        </p>
      )}
      {listed === null ? (
        !error && <p role="status">Loading…</p>
      ) : listed.namespaces.length === 0 ? (
        <p class="empty">No namespaces in this project.</p>
      ) : (
        <table class="grid">
          <thead>
            <tr>
              <th scope="col">Namespace</th>
              <th scope="col">State</th>
              <th scope="col">Move to project</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {listed.namespaces.map((n) => (
              <tr key={n.id} data-namespace={n.name}>
                <th scope="row">{n.name}</th>
                <td>
                  <span class={`state state-${n.state || "unknown"}`}>{n.state || "unknown"}</span>
                </td>
                <td class="actions">
                  {n.links?.update !== undefined && listed.targets.length > 0 && (
                    <select
                      aria-label={`Move ${n.name} to project`}
                      value=""
                      disabled={move.pending === n.id}
                      onChange={(e) => void moveTo(n, e.currentTarget.value)}
                    >
                      <option value="">Choose a project…</option>
                      {listed.targets.map((p) => (
                        <option key={p.id} value={p.id}>
                          {p.name || p.id}
                        </option>
                      ))}
                    </select>
                  )}
                  {move.pending === n.id && <span role="status">Moving…</span>}
                </td>
                <td class="actions">
                  <DeleteButton of={n} label={`Delete namespace ${n.name}`} onDelete={() => { setDeleting(n); }} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {deleting?.links?.remove !== undefined && (
        <DeleteDialog
          what="namespace"
          name={deleting.name}
          remove={async () => {
            await call("DELETE", pathOf(deleting.links?.remove ?? ""));
            // Gone on the API's answer: the cluster finishes the deletion after it (the
            // namespace's objects go first), and a read now would still list it, removing.
            setListed((current) => current && { ...current, namespaces: withoutNamespace(current.namespaces, deleting.id) });
          }}
          onClose={() => {
            setDeleting(null);
          }}
        />
      )}
      {listed?.createUrl && (
        <form class="grant" aria-label="Create a namespace" onSubmit={(event) => void submit(event)}>
          <div class="field">
            <label for="namespace-name">Namespace name</label>
            <input
              id="namespace-name"
              autoComplete="off"
              value={name}
              aria-invalid={create.error !== ""}
              aria-describedby={create.error ? "namespace-error" : undefined}
              onInput={(e) => {
                setName(e.currentTarget.value);
                create.clear();
              }}
            />
            {create.error && (
              <span class="error field-error" id="namespace-error" role="alert">
                {create.error}
              </span>
            )}
          </div>
          <button type="submit" disabled={create.pending !== null}>
            {create.pending ? "Creating…" : "Create namespace"}
          </button>
        </form>
      )}
    </section>
  );
}
