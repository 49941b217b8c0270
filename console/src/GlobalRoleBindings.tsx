import { useState } from "preact/hooks";

import { GLOBAL_ROLES, type V3GlobalRoleBinding, type V3User } from "./access";
import { all, call, listing } from "./api";
import { useRead } from "./live";
import { BindingTable, GrantForm, type BindingRow } from "./RoleBindings";

/** Global role bindings: administrators see and grant them all, anyone else sees their own.
 * Grant and Revoke are offered as the API offers them (`createTypes`, `links.remove`). Not
 * live: bindings of global roles are not among the subscription's families. */
export function GlobalRoleBindings() {
  const [bindings, setBindings] = useState<V3GlobalRoleBinding[] | null>(null);
  const [users, setUsers] = useState<ReadonlyMap<string, V3User>>(new Map());
  const [mayGrant, setMayGrant] = useState(false);

  const { error, load } = useRead(async () => {
    const [listed, known] = await Promise.all([
      listing<V3GlobalRoleBinding>("/v3/globalrolebindings"),
      all<V3User>("/v3/users"),
    ]);
    setBindings(listed.data.sort((a, b) => (a.userId ?? "").localeCompare(b.userId ?? "")));
    setMayGrant(listed.createTypes.globalRoleBinding !== undefined);
    setUsers(new Map(known.map((u) => [u.id, u])));
  });

  const who = (id: string | undefined) => {
    const user = id ? users.get(id) : undefined;
    return user?.username ? `${user.username} (${user.id})` : id || "–";
  };
  const rows = bindings?.map(
    (b): BindingRow => ({ id: b.id, who: who(b.userId), role: b.globalRoleId ?? "", remove: b.links?.remove }),
  );

  return (
    <>
      <p class="count">Global role bindings are not live: the list is read again after each change.</p>
      <BindingTable rows={rows ?? null} error={error} heads={{ who: "User", role: "Global role" }}
        testId="globalrolebindings" onRevoked={load} />
      {mayGrant && (
        <GrantForm
          name="Grant a global role"
          who={{ id: "grant-user", label: "User" }}
          whoInput={(value, set, attributes) => (
            <select value={value} {...attributes} onChange={(e) => { set(e.currentTarget.value); }}>
              <option value="">Choose a user</option>
              {[...users.values()].map((u) => (
                <option key={u.id} value={u.id}>
                  {u.username ? `${u.username} (${u.id})` : u.name ? `${u.name} (${u.id})` : u.id}
                </option>
              ))}
            </select>
          )}
          role={{ id: "grant-global-role", label: "Global role", choices: GLOBAL_ROLES, first: "user" }}
          send={(userId, globalRoleId) =>
            call("POST", "/v3/globalrolebindings", { type: "globalRoleBinding", globalRoleId, userId })}
          onGranted={load}
        />
      )}
    </>
  );
}
