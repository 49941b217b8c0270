import { useState } from "preact/hooks";

import type { V3Setting } from "./access";
import { call, listing, pathOf } from "./api";
import { FieldError, FormFailure, invalid, useSubmit } from "./FieldError";
import { FormButtons } from "./FormButtons";
import { useRead } from "./live";

/** corral's settings, readable by everyone; a value is edited where the API offers
 * `links.update` (administrators), and its refusal shown at the value. Not live: settings are
 * not among the subscription's families. */
export function Settings() {
  const [settings, setSettings] = useState<V3Setting[] | null>(null);
  const [editing, setEditing] = useState<string | null>(null);

  const { error, load } = useRead(async () => {
    const listed = await listing<V3Setting>("/v3/settings");
    setSettings(listed.data.sort((a, b) => a.id.localeCompare(b.id)));
  });

  return (
    <>
      <p class="count">Settings are not live: the list is read again after each change.</p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {settings === null ? (
        <p role="status">Loading…</p>
      ) : (
        <table class="grid" data-testid="settings">
          <thead>
            <tr>
              <th scope="col">Setting</th>
              <th scope="col">Value</th>
              <th scope="col">Default</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {settings.map((s) => (
              <tr key={s.id} data-setting={s.id}>
                <th scope="row">
                  {s.id}
                  {s.description && <small class="muted">{s.description}</small>}
                </th>
                <td>
                  {editing === s.id ? (
                    <EditValue
                      setting={s}
                      onDone={(saved) => {
                        setEditing(null);
                        if (saved) void load();
                      }}
                    />
                  ) : (
                    <Value text={s.value ?? ""} />
                  )}
                </td>
                <td>{s.customized ? <Value text={s.default ?? ""} /> : <span class="muted">the value</span>}</td>
                <td class="actions">
                  {s.links?.update !== undefined && editing !== s.id && (
                    <button type="button" class="ghost" aria-label={`Edit ${s.id}`}
                      onClick={() => { setEditing(s.id); }}>
                      Edit
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

// A value longer than this (the version catalog's JSON) is folded, so the table stays a list.
const FOLD_OVER = 120;

function Value({ text }: { text: string }) {
  if (text.length <= FOLD_OVER) return <code class="setting-value">{text || "–"}</code>;
  return (
    <details>
      <summary>{`${String(text.length)} characters`}</summary>
      <code class="setting-value">{text}</code>
    </details>
  );
}

function EditValue({ setting, onDone }: { setting: V3Setting; onDone: (saved: boolean) => void }) {
  const [value, setValue] = useState(setting.value ?? "");
  const id = `setting-${setting.id}`;
  // The value is the one input: what the API refuses is refused there.
  const { busy, failure, submit } = useSubmit(async () => {
    await call("PUT", pathOf(setting.links?.update ?? ""), { value });
    onDone(true);
  }, () => id);

  return (
    <form class="edit-value" aria-label={`Edit ${setting.id}`} onSubmit={(event) => void submit(event)} noValidate>
      <FormFailure failure={failure} />
      <label for={id} class="visually-hidden">{`Value of ${setting.id}`}</label>
      {(setting.value ?? "").length > FOLD_OVER ? (
        <textarea id={id} rows={12} value={value} {...invalid(id, failure)}
          onInput={(e) => { setValue(e.currentTarget.value); }} />
      ) : (
        <input id={id} value={value} {...invalid(id, failure)}
          onInput={(e) => { setValue(e.currentTarget.value); }} />
      )}
      <FieldError id={id} failure={failure} />
      <FormButtons onCancel={() => { onDone(false); }} busy={busy} submit="Save" pending="Saving…" />
    </form>
  );
}
