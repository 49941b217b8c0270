import { useEffect, useState } from "preact/hooks";
import type { TargetedSubmitEvent } from "preact";

import { all, call, pathOf } from "./api";
import { useAction } from "./live";
import { PROJECT_ROLES, bindingBody, memberOf, type V3Project, type V3ProjectBinding } from "./projects";
import { messageOf } from "./resources";

/** A project's members: its role bindings, a role granted to a user or a provider's group,
 * and revoked. Read again after each change (bindings are not among the subscription's
 * families). */
export function Members({ project, onClose }: { project: V3Project; onClose: () => void }) {
  const [bindings, setBindings] = useState<V3ProjectBinding[] | null>(null);
  const [error, setError] = useState("");
  const [principal, setPrincipal] = useState("");
  const [role, setRole] = useState<string>("read-only");
  const grant = useAction();
  const revoke = useAction();
  const name = project.name || project.id;

  const load = async () => {
    try {
      const path = `/v3/projectroletemplatebindings?projectId=${encodeURIComponent(project.id)}`;
      setBindings(await all<V3ProjectBinding>(path));
      setError("");
    } catch (failure) {
      setError(messageOf(failure));
    }
  };
  useEffect(() => {
    void load();
  }, [project.id]);

  const submit = async (event: TargetedSubmitEvent<HTMLFormElement>) => {
    event.preventDefault();
    const body = bindingBody(project.id, principal, role);
    if (await grant.run("grant", () => call("POST", "/v3/projectroletemplatebindings", body))) {
      setPrincipal("");
      await load();
    }
  };
  const remove = async (binding: V3ProjectBinding) => {
    const link = binding.links?.remove;
    if (link && (await revoke.run(binding.id, () => call("DELETE", pathOf(link))))) await load();
  };

  return (
    <section class="panel" aria-labelledby="members-title" data-testid="members">
      <header class="page-head">
        <h2 id="members-title">{`Members of ${name}`}</h2>
        <span class="spacer-flex" />
        <button type="button" class="ghost" onClick={onClose}>
          Close members
        </button>
      </header>
      {(error || revoke.error) && (
        <p class="error" role="alert">
          {error || revoke.error}
        </p>
      )}
      {bindings === null ? (
        <p role="status">Loading…</p>
      ) : (
        <table class="grid">
          <thead>
            <tr>
              <th scope="col">User or group</th>
              <th scope="col">Role</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {bindings.map((b) => (
              <tr key={b.id} data-binding={b.id}>
                <th scope="row">{memberOf(b)}</th>
                <td>{b.roleTemplateId}</td>
                <td class="actions">
                  {b.links?.remove !== undefined && (
                    <button
                      type="button"
                      class="ghost"
                      aria-label={`Revoke ${b.roleTemplateId ?? ""} from ${memberOf(b)}`}
                      disabled={revoke.pending === b.id}
                      onClick={() => void remove(b)}
                    >
                      {revoke.pending === b.id ? "Revoking…" : "Revoke"}
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <form class="grant" aria-label="Grant a role" onSubmit={(event) => void submit(event)}>
        <div class="field">
          <label for="grant-principal">User id or group principal</label>
          <input
            id="grant-principal"
            placeholder="u-abc12 or oidc_group://admins"
            value={principal}
            aria-invalid={grant.error !== ""}
            aria-describedby={grant.error ? "grant-error" : undefined}
            onInput={(e) => {
              setPrincipal(e.currentTarget.value);
              grant.clear();
            }}
          />
          {grant.error && (
            <span class="error field-error" id="grant-error" role="alert">
              {grant.error}
            </span>
          )}
        </div>
        <div class="field">
          <label for="grant-role">Role</label>
          <select
            id="grant-role"
            value={role}
            onChange={(e) => {
              setRole(e.currentTarget.value);
            }}
          >
            {PROJECT_ROLES.map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
        </div>
        <button type="submit" disabled={grant.pending !== null}>
          {grant.pending ? "Granting…" : "Grant"}
        </button>
      </form>
    </section>
  );
}
