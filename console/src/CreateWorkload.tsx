import { useState } from "preact/hooks";
import type { TargetedSubmitEvent } from "preact";

import { ApiError, call } from "./api";
import { messageOf } from "./resources";
import {
  EMPTY_FORM,
  INPUTS,
  envInput,
  workloadBody,
  workloadErrorInput,
  type EnvRow,
  type V3Namespace,
  type WorkloadForm,
} from "./workloads";

interface Props {
  createUrl: string;
  namespaces: V3Namespace[];
  onCreated: () => void;
  onCancel: () => void;
}

type Input = keyof typeof INPUTS;

const LABELS: Record<Input, string> = {
  name: "Name",
  namespaceId: "Namespace",
  image: "Image",
  scale: "Scale",
  ports: "Ports (8080, 53/UDP)",
  cpuRequest: "CPU request (250m)",
  cpuLimit: "CPU limit (1)",
  memoryRequest: "Memory request (64Mi)",
  memoryLimit: "Memory limit (128Mi)",
};

/** A deployment of one container: name, namespace, image, scale, ports, environment variables
 * and CPU and memory requests and limits. The API judges every value and its refusal shows at
 * the input its `fieldName` names. */
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

  const describedId = (id: string) => {
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

  const described = (field: Input) => describedId(INPUTS[field]);

  const text = (field: Exclude<Input, "namespaceId">, inputMode?: "numeric") => {
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

  const setRow = (row: number, part: keyof EnvRow, value: string) => {
    setForm({ ...form, env: form.env.map((r, i) => (i === row ? { ...r, [part]: value } : r)) });
  };

  const envCell = (row: number, part: keyof EnvRow) => {
    const { id, attributes, error } = describedId(envInput(row, part));
    return (
      <div class="field">
        <label for={id}>{part === "name" ? `Variable ${String(row + 1)} name` : `Variable ${String(row + 1)} value`}</label>
        <input
          id={id}
          value={form.env[row]?.[part] ?? ""}
          {...attributes}
          onInput={(e) => {
            setRow(row, part, e.currentTarget.value);
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
      <fieldset>
        <legend>Environment variables</legend>
        {form.env.map((_, row) => (
          <div class="env-row" key={row}>
            {envCell(row, "name")}
            {envCell(row, "value")}
            <button
              type="button"
              class="ghost"
              aria-label={`Remove variable ${String(row + 1)}`}
              onClick={() => {
                setForm({ ...form, env: form.env.filter((__, i) => i !== row) });
                setFailure(null);
              }}
            >
              Remove
            </button>
          </div>
        ))}
        <button
          type="button"
          class="ghost"
          onClick={() => {
            setForm({ ...form, env: [...form.env, { name: "", value: "" }] });
          }}
        >
          Add variable
        </button>
      </fieldset>
      <fieldset>
        <legend>Resources (Kubernetes quantities; empty for none)</legend>
        {text("cpuRequest")}
        {text("cpuLimit")}
        {text("memoryRequest")}
        {text("memoryLimit")}
      </fieldset>
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
