import { useState } from "preact/hooks";

import { all, call } from "./api";
import { PROJECT_ROLES, bindingBody, memberOf, type V3Project, type V3ProjectBinding } from "./projects";
import { useRead } from "./live";
import { BindingTable, GrantForm, type BindingRow } from "./RoleBindings";

/** A project's members: its role bindings, a role granted to a user or a provider's group,
 * and revoked. Read again after each change (bindings are not among the subscription's
 * families). */
export function Members({ project, onClose }: { project: V3Project; onClose: () => void }) {
  const [bindings, setBindings] = useState<V3ProjectBinding[] | null>(null);
  const name = project.name || project.id;

  const { error, load } = useRead(async () => {
    const path = `/v3/projectroletemplatebindings?projectId=${encodeURIComponent(project.id)}`;
    setBindings(await all<V3ProjectBinding>(path));
  }, [project.id]);

  const rows = bindings?.map(
    (b): BindingRow => ({ id: b.id, who: memberOf(b), role: b.roleTemplateId ?? "", remove: b.links?.remove }),
  );

  return (
    <section class="panel" aria-labelledby="members-title" data-testid="members">
      <header class="page-head">
        <h2 id="members-title">{`Members of ${name}`}</h2>
        <span class="spacer-flex" />
        <button type="button" class="ghost" onClick={onClose}>
          Close members
        </button>
      </header>
      <BindingTable rows={rows ?? null} error={error} heads={{ who: "User or group", role: "Role" }} onRevoked={load} />
      <GrantForm
        name="Grant a role"
        who={{ id: "grant-principal", label: "User id or group principal" }}
        whoInput={(value, set, attributes) => (
          <input placeholder="u-abc12 or oidc_group://admins" value={value} {...attributes}
            onInput={(e) => { set(e.currentTarget.value); }} />
        )}
        role={{ id: "grant-role", label: "Role", choices: PROJECT_ROLES, first: "read-only" }}
        send={(principal, role) =>
          call("POST", "/v3/projectroletemplatebindings", bindingBody(project.id, principal, role))}
        onGranted={load}
      />
    </section>
  );
}
