import { useEffect, useState } from "preact/hooks";
import type { TargetedSubmitEvent } from "preact";

import { GLOBAL_ROLES, type V3GlobalRoleBinding, type V3User } from "./access";
import { ApiError, all, call, listing, pathOf } from "./api";
import { useAction } from "./live";
import { messageOf } from "./resources";

/** Global role bindings: administrators see and grant them all, anyone else sees their own.
 * Grant and Revoke are offered as the API offers them (`createTypes`, `links.remove`). Not
 * live: bindings of global roles are not among the subscription's families. */
export function GlobalRoleBindings() {
  const [bindings, setBindings] = useState<V3GlobalRoleBinding[] | null>(null);
  const [users, setUsers] = useState<ReadonlyMap<string, V3User>>(new Map());
  const [mayGrant, setMayGrant] = useState(false);
  const [error, setError] = useState("");
  const [userId, setUserId] = useState("");
  const [role, setRole] = useState<string>("user");
  const grant = useAction();
  const revoke = useAction();

  const load = async () => {
    try {
      const [listed, known] = await Promise.all([
        listing<V3GlobalRoleBinding>("/v3/globalrolebindings"),
        all<V3User>("/v3/users"),
      ]);
      setBindings(listed.data.sort((a, b) => (a.userId ?? "").localeCompare(b.userId ?? "")));
      setMayGrant(listed.createTypes.globalRoleBinding !== undefined);
      setUsers(new Map(known.map((u) => [u.id, u])));
      setError("");
    } catch (failure) {
      if (failure instanceof ApiError && failure.sessionEnded) return;
      setError(messageOf(failure));
    }
  };
  useEffect(() => {
    void load();
  }, []);

  const who = (id: string | undefined) => {
    const user = id ? users.get(id) : undefined;
    return user?.username ? `${user.username} (${user.id})` : id || "–";
  };
  const submit = async (event: TargetedSubmitEvent<HTMLFormElement>) => {
    event.preventDefault();
    const body = { type: "globalRoleBinding", globalRoleId: role, userId };
    if (await grant.run("grant", () => call("POST", "/v3/globalrolebindings", body))) {
      setUserId("");
      await load();
    }
  };
  const remove = async (binding: V3GlobalRoleBinding) => {
    const link = binding.links?.remove;
    if (link && (await revoke.run(binding.id, () => call("DELETE", pathOf(link))))) await load();
  };

  return (
    <>
      <p class="count">Global role bindings are not live: the list is read again after each change.</p>
      {(error || revoke.error) && (
        <p class="error" role="alert">
          {error || revoke.error}
        </p>
      )}
      {bindings === null ? (
        <p role="status">Loading…</p>
      ) : (
        <table class="grid" data-testid="globalrolebindings">
          <thead>
            <tr>
              <th scope="col">User</th>
              <th scope="col">Global role</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {bindings.map((b) => (
              <tr key={b.id} data-binding={b.id}>
                <th scope="row">{who(b.userId)}</th>
                <td>{b.globalRoleId}</td>
                <td class="actions">
                  {b.links?.remove !== undefined && (
                    <button type="button" class="ghost" disabled={revoke.pending === b.id}
                      aria-label={`Revoke ${b.globalRoleId ?? ""} from ${who(b.userId)}`}
                      onClick={() => void remove(b)}>
                      {revoke.pending === b.id ? "Revoking…" : "Revoke"}
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {mayGrant && (
        <form class="grant" aria-label="Grant a global role" onSubmit={(event) => void submit(event)}>
          <div class="field">
            <label for="grant-user">User</label>
            <select id="grant-user" value={userId} aria-invalid={grant.error !== ""}
              aria-describedby={grant.error ? "grant-error" : undefined}
              onChange={(e) => {
                setUserId(e.currentTarget.value);
                grant.clear();
              }}>
              <option value="">Choose a user</option>
              {[...users.values()].map((u) => (
                <option key={u.id} value={u.id}>
                  {u.username ? `${u.username} (${u.id})` : u.name ? `${u.name} (${u.id})` : u.id}
                </option>
              ))}
            </select>
            {grant.error && (
              <span class="error field-error" id="grant-error" role="alert">
                {grant.error}
              </span>
            )}
          </div>
          <div class="field">
            <label for="grant-global-role">Global role</label>
            <select id="grant-global-role" value={role} onChange={(e) => { setRole(e.currentTarget.value); }}>
              {GLOBAL_ROLES.map((r) => (
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
      )}
    </>
  );
}
