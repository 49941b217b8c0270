import { useState } from "preact/hooks";

import { call, listing, pathOf } from "./api";
import { DeleteButton } from "./DeleteButton";
import { DeleteDialog } from "./DeleteDialog";
import { FormFailure, useSubmit } from "./FieldError";
import { FormButtons } from "./FormButtons";
import { useRead } from "./live";
import { EMPTY_ENTRY, SECRET_INPUTS, secretBody, secretErrorInput, type Entry, type V3Secret } from "./secrets";
import { TextField } from "./TextField";

interface Listed {
  secrets: V3Secret[];
  createUrl: string | null;
}

/** A project's secrets (copied into each of its namespaces): their names, kinds and keys, never
 * their values; an opaque one created from keys and values, which the form forgets once the
 * API has them; one deleted behind the dialog. */
export function Secrets({ projectId }: { projectId: string }) {
  const project = encodeURIComponent(projectId);
  const [listed, setListed] = useState<Listed | null>(null);
  const [creating, setCreating] = useState(false);
  const [deleting, setDeleting] = useState<V3Secret | null>(null);

  const { error, load } = useRead(async () => {
    const found = await listing<V3Secret>(`/v3/projects/${project}/secrets`);
    const createUrl = found.createTypes.secret;
    setListed({
      secrets: found.data.sort((a, b) => a.name.localeCompare(b.name)),
      createUrl: createUrl ? pathOf(createUrl) : null,
    });
  }, [projectId]);

  return (
    <section class="panel" aria-labelledby="secrets-title" data-testid="secrets">
      <header class="page-head">
        <h2 id="secrets-title">Secrets</h2>
        <span class="spacer-flex" />
        {listed?.createUrl && !creating && (
          <button
            type="button"
            onClick={() => {
              setCreating(true);
            }}
          >
            Create secret
          </button>
        )}
      </header>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {creating && listed?.createUrl && (
        <CreateSecret
          createUrl={listed.createUrl}
          onDone={(made) => {
            setCreating(false);
            if (made) void load();
          }}
        />
      )}
      {listed === null ? (
        !error && <p role="status">Loading…</p>
      ) : listed.secrets.length === 0 ? (
        <p class="empty">No secrets in this project.</p>
      ) : (
        <table class="grid">
          <thead>
            <tr>
              <th scope="col">Secret</th>
              <th scope="col">Type</th>
              <th scope="col">Keys</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {listed.secrets.map((s) => (
              <tr key={s.id} data-secret={s.name}>
                <th scope="row">{s.name}</th>
                <td>{s.kind ?? "Opaque"}</td>
                <td>{(s.keys ?? []).join(", ") || "–"}</td>
                <td class="actions">
                  <DeleteButton of={s} label={`Delete secret ${s.name}`} onDelete={() => { setDeleting(s); }} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {deleting?.links?.remove !== undefined && (
        <DeleteDialog
          what="secret"
          name={deleting.name}
          remove={async () => {
            await call("DELETE", pathOf(deleting.links?.remove ?? ""));
            await load();
          }}
          onClose={() => {
            setDeleting(null);
          }}
        />
      )}
    </section>
  );
}

function CreateSecret({ createUrl, onDone }: { createUrl: string; onDone: (made: boolean) => void }) {
  const [name, setName] = useState("");
  const [entries, setEntries] = useState<Entry[]>([EMPTY_ENTRY]);
  const { busy, failure, setFailure, submit } = useSubmit(async () => {
    await call("POST", createUrl, secretBody(name, entries));
    // The API has the values now: the form that held them goes, and nothing shows them again.
    onDone(true);
  }, secretErrorInput);

  const edit = (index: number, change: Partial<Entry>) => {
    setEntries(entries.map((entry, i) => (i === index ? { ...entry, ...change } : entry)));
    setFailure(null);
  };

  return (
    <form class="panel" aria-label="Create a secret" onSubmit={(event) => void submit(event)}>
      <FormFailure failure={failure} />
      <TextField id={SECRET_INPUTS.name} label="Secret name" autoComplete="off" value={name} failure={failure}
        onInput={(value) => {
          setName(value);
          setFailure(null);
        }} />
      {entries.map((entry, i) => (
        // The first key's id is where a refusal of the data goes (SECRET_INPUTS.data).
        <div class="field-row" key={i}>
          <TextField id={`secret-key-${String(i)}`} label={`Key ${String(i + 1)}`} autoComplete="off" value={entry.key}
            failure={failure} onInput={(key) => { edit(i, { key }); }} />
          <TextField id={`secret-value-${String(i)}`} label={`Value ${String(i + 1)}`} type="password"
            autoComplete="new-password" value={entry.value} failure={failure}
            onInput={(value) => { edit(i, { value }); }} />
        </div>
      ))}
      <FormButtons onCancel={() => { onDone(false); }} busy={busy} submit="Create secret" pending="Creating…">
        <button
          type="button"
          class="ghost"
          onClick={() => {
            setEntries([...entries, EMPTY_ENTRY]);
          }}
        >
          Add a key
        </button>
      </FormButtons>
    </form>
  );
}
