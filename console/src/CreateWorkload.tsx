import { useState } from "preact/hooks";
import type { TargetedSubmitEvent } from "preact";

import { ApiError, call } from "./api";
import { messageOf } from "./resources";
import { EMPTY_FORM, INPUTS, workloadBody, workloadErrorInput, type V3Namespace, type WorkloadForm } from "./workloads";

interface Props {
  createUrl: string;
  namespaces: V3Namespace[];
  onCreated: () => void;
  onCancel: () => void;
}

const LABELS: Record<keyof WorkloadForm, string> = {
  name: "Name",
  namespaceId: "Namespace",
  image: "Image",
  scale: "Scale",
  ports: "Ports (8080, 53/UDP)",
};

/** A deployment of one container: name, namespace, image, scale and ports. The API judges
 * every value and its refusal shows at the input its `fieldName` names. */
export function CreateWorkload({ createUrl, namespaces, onCreated, onCancel }: Props) {
  const [form, setForm] = useState<WorkloadForm>(EMPTY_FORM);
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<{ input: string | null; message: string } | null>(null);

  const submit = async (event: TargetedSubmitEvent<HTMLFormElement>) => {
    event.preventDefault();
    setBusy(true);
    setFailure(null);
    try {
      await call("POST", createUrl, workloadBody(form));
      onCreated();
    } catch (refused) {
      const input = refused instanceof ApiError ? workloadErrorInput(refused.fieldName) : null;
      setFailure({ input, message: messageOf(refused) });
      if (input) document.getElementById(input)?.focus();
    } finally {
      setBusy(false);
    }
  };

  const described = (field: keyof WorkloadForm) => {
    const id = INPUTS[field];
    const wrong = failure?.input === id;
    return {
      id,
      wrong,
      attributes: { "aria-invalid": wrong, "aria-describedby": wrong ? `${id}-error` : undefined },
      error: wrong && (
        <span class="error field-error" id={`${id}-error`}>
          {failure.message}
        </span>
      ),
    };
  };

  const text = (field: Exclude<keyof WorkloadForm, "namespaceId">, inputMode?: "numeric") => {
    const { id, attributes, error } = described(field);
    return (
      <div class="field">
        <label for={id}>{LABELS[field]}</label>
        <input
          id={id}
          value={form[field]}
          inputMode={inputMode}
          {...attributes}
          onInput={(e) => {
            setForm({ ...form, [field]: e.currentTarget.value });
          }}
        />
        {error}
      </div>
    );
  };

  const namespace = described("namespaceId");
  return (
    <form class="panel" aria-labelledby="create-workload-title" onSubmit={(event) => void submit(event)} noValidate>
      <h2 id="create-workload-title">Create a workload</h2>
      {failure && failure.input === null && (
        <p class="error" role="alert">
          {failure.message}
        </p>
      )}
      {failure?.input && (
        <p class="visually-hidden" role="alert">
          {failure.message}
        </p>
      )}
      {text("name")}
      <div class="field">
        <label for={namespace.id}>{LABELS.namespaceId}</label>
        <select
          id={namespace.id}
          value={form.namespaceId}
          {...namespace.attributes}
          onChange={(e) => {
            setForm({ ...form, namespaceId: e.currentTarget.value });
          }}
        >
          <option value="">{namespaces.length ? "Choose a namespace" : "This project has no namespace"}</option>
          {namespaces.map((n) => (
            <option key={n.id} value={n.name}>
              {n.name}
            </option>
          ))}
        </select>
        {namespace.error}
      </div>
      {text("image")}
      {text("scale", "numeric")}
      {text("ports")}
      <div class="buttons">
        <button type="button" class="ghost" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" disabled={busy}>
          {busy ? "Creating…" : "Create"}
        </button>
      </div>
    </form>
  );
}
