import { useRef, useState } from "preact/hooks";

import { providerOf, userBody, userErrorInput, type UserForm, type V3User } from "./access";
import { call, listing, pathOf } from "./api";
import { DeleteButton } from "./DeleteButton";
import { DeleteDialog } from "./DeleteDialog";
import { FormFailure, useSubmit } from "./FieldError";
import { FormButtons } from "./FormButtons";
import { ListToolbar } from "./ListToolbar";
import { useAction, useRead } from "./live";
import { TextField } from "./TextField";

/** Users: local ones created with a username and password, anyone enabled or disabled and
 * deleted where the API offers it (`links.update`, `links.remove`). Not live: users are not
 * among the subscription's families, so the list is read again after each change. */
export function Users() {
  const [users, setUsers] = useState<V3User[] | null>(null);
  const [mayCreate, setMayCreate] = useState(false);
  const [creating, setCreating] = useState(false);
  const [deleting, setDeleting] = useState<V3User | null>(null);
  const toggle = useAction();
  // Users deleted here: the API lists a user until the operator has removed what was theirs
  // (its finalizer), which is not the page's business once the DELETE is answered.
  const deleted = useRef(new Set<string>());

  const { error, load } = useRead(async () => {
    const listed = await listing<V3User>("/v3/users");
    const ids = new Set(listed.data.map((u) => u.id));
    for (const id of deleted.current) if (!ids.has(id)) deleted.current.delete(id);
    const shown = listed.data.filter((u) => !deleted.current.has(u.id));
    setUsers(shown.sort((a, b) => nameOf(a).localeCompare(nameOf(b))));
    setMayCreate(listed.createTypes.user !== undefined);
  });

  const setEnabled = async (user: V3User) => {
    const link = user.links?.update;
    const body = { enabled: user.enabled === false };
    if (link && (await toggle.run(user.id, () => call("PUT", pathOf(link), body)))) await load();
  };

  return (
    <>
      <ListToolbar note="Users are not live: the list is read again after each change."
        create={mayCreate && !creating ? "Create user" : null} onCreate={() => { setCreating(true); }} />
      {(error || toggle.error) && (
        <p class="error" role="alert">
          {error || toggle.error}
        </p>
      )}
      {creating && (
        <CreateUser
          onCreated={() => {
            setCreating(false);
            void load();
          }}
          onCancel={() => { setCreating(false); }}
        />
      )}
      {users === null ? (
        <p role="status">Loading…</p>
      ) : (
        <table class="grid" data-testid="users">
          <thead>
            <tr>
              <th scope="col">User</th>
              <th scope="col">Display name</th>
              <th scope="col">Signs in with</th>
              <th scope="col">State</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {users.map((u) => (
              <tr key={u.id} data-user={u.id}>
                <th scope="row">
                  {nameOf(u)}
                  <small class="muted">{u.me ? `${u.id} (you)` : u.id}</small>
                </th>
                <td>{u.name || "–"}</td>
                <td>{providerOf(u)}</td>
                <td>
                  <span class={u.enabled === false ? "state bad" : "state ok"}>
                    {u.enabled === false ? "disabled" : "enabled"}
                  </span>
                </td>
                <td class="actions">
                  {/* The update link also covers an admin's own name; disabling oneself is
                      refused whoever asks (docs/api.md, "Users"), so it is not offered. */}
                  {u.links?.update !== undefined && !u.me && (
                    <button type="button" class="ghost" disabled={toggle.pending === u.id}
                      aria-label={`${u.enabled === false ? "Enable" : "Disable"} ${nameOf(u)}`}
                      onClick={() => void setEnabled(u)}>
                      {toggle.pending === u.id ? "Saving…" : u.enabled === false ? "Enable" : "Disable"}
                    </button>
                  )}
                  <DeleteButton of={u} label={`Delete ${nameOf(u)}`} onDelete={() => { setDeleting(u); }} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {deleting?.links?.remove !== undefined && (
        <DeleteDialog
          what="user"
          name={nameOf(deleting)}
          remove={async () => {
            await call("DELETE", pathOf(deleting.links?.remove ?? ""));
            deleted.current.add(deleting.id);
            await load();
          }}
          onClose={() => { setDeleting(null); }}
        />
      )}
    </>
  );
}

function nameOf(user: V3User): string {
  return user.username || user.id;
}

function CreateUser({ onCreated, onCancel }: { onCreated: () => void; onCancel: () => void }) {
  const [form, setForm] = useState<UserForm>({ username: "", password: "", name: "" });
  const { busy, failure, submit } = useSubmit(async () => {
    await call("POST", "/v3/users", userBody(form));
    onCreated();
  }, userErrorInput);

  const input = (key: keyof UserForm, label: string, type: "text" | "password" = "text") => (
    <TextField id={`user-${key}`} label={label} type={type} value={form[key]} failure={failure}
      autoComplete={type === "password" ? "new-password" : "off"}
      onInput={(value) => { setForm({ ...form, [key]: value }); }} />
  );

  return (
    <form class="panel" aria-labelledby="create-user-title" onSubmit={(event) => void submit(event)} noValidate>
      <h2 id="create-user-title">Create a local user</h2>
      <FormFailure failure={failure} />
      {input("username", "Username")}
      {input("password", "Password (at least 12 characters)", "password")}
      {input("name", "Display name")}
      <FormButtons onCancel={onCancel} busy={busy} submit="Create" pending="Creating…" />
    </form>
  );
}
