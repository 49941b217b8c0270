import type { TargetedSubmitEvent } from "preact";
import { useEffect, useState } from "preact/hooks";

import { ApiError, call, listing, pathOf } from "./api";
import { DeleteDialog } from "./DeleteDialog";
import { messageOf } from "./resources";
import { EMPTY_ENTRY, SECRET_INPUTS, secretBody, secretErrorInput, type Entry, type V3Secret } from "./secrets";

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
  const [error, setError] = useState("");
  const [creating, setCreating] = useState(false);
  const [deleting, setDeleting] = useState<V3Secret | null>(null);

  const load = async () => {
    try {
      const found = await listing<V3Secret>(`/v3/projects/${project}/secrets`);
      const createUrl = found.createTypes.secret;
      setListed({
        secrets: found.data.sort((a, b) => a.name.localeCompare(b.name)),
        createUrl: createUrl ? pathOf(createUrl) : null,
      });
      setError("");
    } catch (failure) {
      setError(messageOf(failure));
    }
  };
  useEffect(() => {
    void load();
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
                  {s.links?.remove !== undefined && (
                    <button
                      type="button"
                      class="ghost"
                      aria-label={`Delete secret ${s.name}`}
                      onClick={() => {
                        setDeleting(s);
                      }}
                    >
                      Delete
                    </button>
                  )}
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
  const [busy, setBusy] = useState(false);
  const [refusal, setRefusal] = useState<{ input: string | null; message: string } | null>(null);

  const edit = (index: number, change: Partial<Entry>) => {
    setEntries(entries.map((entry, i) => (i === index ? { ...entry, ...change } : entry)));
    setRefusal(null);
  };
  const submit = async (event: TargetedSubmitEvent<HTMLFormElement>) => {
    event.preventDefault();
    setBusy(true);
    setRefusal(null);
    try {
      await call("POST", createUrl, secretBody(name, entries));
      // The API has the values now: the form that held them goes, and nothing shows them again.
      onDone(true);
    } catch (refused) {
      const input = refused instanceof ApiError ? secretErrorInput(refused.fieldName) : null;
      setRefusal({ input, message: messageOf(refused) });
      if (input) document.getElementById(input)?.focus();
    } finally {
      setBusy(false);
    }
  };
  const fieldError = (input: string) =>
    refusal?.input === input ? (
      <span class="error field-error" id={`${input}-error`}>
        {refusal.message}
      </span>
    ) : null;

  return (
    <form class="panel" aria-label="Create a secret" onSubmit={(event) => void submit(event)}>
      {refusal && refusal.input === null && (
        <p class="error" role="alert">
          {refusal.message}
        </p>
      )}
      <div class="field">
        <label for={SECRET_INPUTS.name}>Secret name</label>
        <input
          id={SECRET_INPUTS.name}
          autoComplete="off"
          value={name}
          aria-invalid={refusal?.input === SECRET_INPUTS.name}
          aria-describedby={refusal?.input === SECRET_INPUTS.name ? `${SECRET_INPUTS.name}-error` : undefined}
          onInput={(e) => {
            setName(e.currentTarget.value);
            setRefusal(null);
          }}
        />
        {fieldError(SECRET_INPUTS.name)}
      </div>
      {entries.map((entry, i) => (
        <div class="field-row" key={i}>
          <div class="field">
            <label for={`secret-key-${String(i)}`}>{`Key ${String(i + 1)}`}</label>
            <input
              id={`secret-key-${String(i)}`}
              autoComplete="off"
              value={entry.key}
              aria-invalid={i === 0 && refusal?.input === SECRET_INPUTS.data}
              aria-describedby={i === 0 && refusal?.input === SECRET_INPUTS.data ? `${SECRET_INPUTS.data}-error` : undefined}
              onInput={(e) => {
                edit(i, { key: e.currentTarget.value });
              }}
            />
            {i === 0 && fieldError(SECRET_INPUTS.data)}
          </div>
          <div class="field">
            <label for={`secret-value-${String(i)}`}>{`Value ${String(i + 1)}`}</label>
            <input
              id={`secret-value-${String(i)}`}
              type="password"
              autoComplete="new-password"
              value={entry.value}
              onInput={(e) => {
                edit(i, { value: e.currentTarget.value });
              }}
            />
          </div>
        </div>
      ))}
      <div class="buttons">
        <button
          type="button"
          class="ghost"
          onClick={() => {
            setEntries([...entries, EMPTY_ENTRY]);
          }}
        >
          Add a key
        </button>
        <button
          type="button"
          class="ghost"
          onClick={() => {
            onDone(false);
          }}
        >
          Cancel
        </button>
        <button type="submit" disabled={busy}>
          {busy ? "Creating…" : "Create secret"}
        </button>
      </div>
    </form>
  );
}
