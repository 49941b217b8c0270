import { useState } from "preact/hooks";
import type { TargetedSubmitEvent } from "preact";

import { call, pathOf } from "./api";
import { FieldError, FormFailure, failureOf, invalid, type Failure } from "./FieldError";
import { TAINT_EFFECTS, addedTaint, removedTaint, taintText, type NodeRow } from "./nodes";

/** A node's taints in its row: each with **Remove**, and a small form to add one, both only
 * where the node's update link exists. The API's refusal (`fieldName: desiredNodeTaints`)
 * shows at the key; the row follows the node's event, so nothing is kept here after a write. */
export function NodeTaints({ row }: { row: NodeRow }) {
  const [key, setKey] = useState("");
  const [value, setValue] = useState("");
  const [effect, setEffect] = useState<string>(TAINT_EFFECTS[0]);
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<Failure | null>(null);
  // A node's id holds a colon, which a CSS selector of the id would read as a pseudo-class.
  const keyId = `taint-key-${row.id.replace(/[^\w-]/g, "-")}`;

  const write = async (body: object): Promise<boolean> => {
    if (!row.update) return false;
    setBusy(true);
    setFailure(null);
    try {
      await call("PUT", pathOf(row.update), body);
      return true;
    } catch (refused) {
      setFailure(failureOf(refused, (field) => (field.startsWith("desiredNodeTaints") ? keyId : null)));
      return false;
    } finally {
      setBusy(false);
    }
  };

  const add = async (event: TargetedSubmitEvent<HTMLFormElement>) => {
    event.preventDefault();
    if (await write(addedTaint(row.taints, { key, value, effect }))) {
      setKey("");
      setValue("");
    }
  };

  return (
    <div class="taints">
      {row.taints.length === 0 && !row.update && "–"}
      {row.taints.map((taint, index) => (
        <span class="taint" key={taintText(taint)}>
          <code>{taintText(taint)}</code>
          {row.update && (
            <button
              type="button"
              class="ghost"
              disabled={busy}
              aria-label={`Remove taint ${taintText(taint)} from ${row.name}`}
              onClick={() => void write(removedTaint(row.taints, index))}
            >
              ×
            </button>
          )}
        </span>
      ))}
      {row.update && (
        <form class="taint-form" aria-label={`Add a taint to ${row.name}`} onSubmit={(e) => void add(e)} noValidate>
          <FormFailure failure={failure} />
          <label class="visually-hidden" for={keyId}>{`Taint key for ${row.name}`}</label>
          <input id={keyId} placeholder="key" value={key} {...invalid(keyId, failure)} onInput={(e) => { setKey(e.currentTarget.value); }} />
          <label class="visually-hidden" for={`${keyId}-value`}>{`Taint value for ${row.name}`}</label>
          <input id={`${keyId}-value`} placeholder="value" value={value} onInput={(e) => { setValue(e.currentTarget.value); }} />
          <label class="visually-hidden" for={`${keyId}-effect`}>{`Taint effect for ${row.name}`}</label>
          <select id={`${keyId}-effect`} value={effect} onChange={(e) => { setEffect(e.currentTarget.value); }}>
            {TAINT_EFFECTS.map((e) => (
              <option key={e} value={e}>
                {e}
              </option>
            ))}
          </select>
          <button type="submit" class="ghost" disabled={busy} aria-label={`Add taint to ${row.name}`}>
            {busy ? "Saving…" : "Add taint"}
          </button>
          <FieldError id={keyId} failure={failure} />
        </form>
      )}
    </div>
  );
}
