import { useState } from "preact/hooks";

import { call } from "./api";
import { FieldError, FormFailure, invalid, useSubmit } from "./FieldError";
import { FormButtons } from "./FormButtons";
import { TextField } from "./TextField";
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
  const { busy, failure, setFailure, submit } = useSubmit(async () => {
    await call("POST", createUrl, workloadBody(form));
    onCreated();
  }, workloadErrorInput);

  const text = (field: Exclude<Input, "namespaceId">, inputMode?: "numeric") => (
    <TextField id={INPUTS[field]} label={LABELS[field]} value={form[field]} inputMode={inputMode} failure={failure}
      onInput={(value) => { setForm({ ...form, [field]: value }); }} />
  );

  const setRow = (row: number, part: keyof EnvRow, value: string) => {
    setForm({ ...form, env: form.env.map((r, i) => (i === row ? { ...r, [part]: value } : r)) });
  };

  const envCell = (row: number, part: keyof EnvRow) => (
    <TextField id={envInput(row, part)} label={`Variable ${String(row + 1)} ${part}`} value={form.env[row]?.[part] ?? ""}
      failure={failure} onInput={(value) => { setRow(row, part, value); }} />
  );

  const namespace = INPUTS.namespaceId;
  return (
    <form class="panel" aria-labelledby="create-workload-title" onSubmit={(event) => void submit(event)} noValidate>
      <h2 id="create-workload-title">Create a workload</h2>
      <FormFailure failure={failure} />
      {text("name")}
      <div class="field">
        <label for={namespace}>{LABELS.namespaceId}</label>
        <select
          id={namespace}
          value={form.namespaceId}
          {...invalid(namespace, failure)}
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
        <FieldError id={namespace} failure={failure} />
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
      <FormButtons onCancel={onCancel} busy={busy} submit="Create" pending="Creating…" />
    </form>
  );
}
