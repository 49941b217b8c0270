import { useEffect, useState } from "preact/hooks";

import { ApiError, all, call } from "./api";
import {
  FLAVOURS,
  INPUT,
  MAX_POOLS,
  ROLES,
  ROLE_LABELS,
  catalogVersions,
  newPool,
  poolInput,
  provisionBody,
  provisionErrorInput,
  type Flavour,
  type PoolForm,
  type ProvisionForm,
} from "./clustercreate";
import type { Made } from "./CreateCluster";
import { FieldError, FormFailure, invalid, useSubmit, type Failure } from "./FieldError";
import { messageOf, type Resource } from "./resources";
import { hrefOf } from "./route";
import { TextField } from "./TextField";

const CATALOG = "/v3/settings/kubernetes-version-catalog";

interface Template extends Resource {
  name?: string;
  driver?: string;
}

interface V1Cluster {
  status?: { clusterName?: string };
}

/** An rke2 or k3s cluster with a hosted control plane: a version the catalog offers and the
 * machine pools its workers come from, each made from one of the caller's node templates. */
export function ProvisionCluster({ url, onMade }: { url: string; onMade: (made: Made) => void }) {
  const [versions, setVersions] = useState<string[] | null>(null);
  const [templates, setTemplates] = useState<Template[]>([]);
  const [loadError, setLoadError] = useState("");
  const [form, setForm] = useState<ProvisionForm>({ name: "", flavour: "rke2", version: "", pools: [newPool(0)] });
  const { busy, failure, submit } = useSubmit(async () => {
    const made = await call<V1Cluster>("POST", url, provisionBody(form));
    const clusterId = made.status?.clusterName ?? "";
    if (!clusterId) throw new Error("The answer named no cluster.");
    onMade({ clusterId, register: false });
  }, provisionErrorInput);

  useEffect(() => {
    Promise.all([call<{ value?: string }>("GET", CATALOG), all<Template>("/v3/nodetemplates")]).then(
      ([catalog, found]) => {
        const offered = catalogVersions(catalog.value ?? "");
        setVersions(offered);
        setTemplates(found);
        setForm((now) => ({
          ...now,
          version: now.version || (offered[0] ?? ""),
          pools: now.pools.map((p) => ({ ...p, template: p.template || (found[0]?.id ?? "") })),
        }));
      },
      (failure: unknown) => {
        if (!(failure instanceof ApiError && failure.sessionEnded)) setLoadError(messageOf(failure));
      },
    );
  }, []);

  const setPool = (index: number, change: Partial<PoolForm>) => {
    setForm({ ...form, pools: form.pools.map((p, i) => (i === index ? { ...p, ...change } : p)) });
  };

  if (loadError) {
    return (
      <p class="error" role="alert">
        {loadError}
      </p>
    );
  }
  if (versions === null) return <p role="status">Loading the version catalog…</p>;
  return (
    <form class="panel" aria-labelledby="provision-title" onSubmit={(event) => void submit(event)} noValidate>
      <h2 id="provision-title">Provision an rke2 or k3s cluster</h2>
      <p class="muted">
        Its control plane runs in the management cluster; its workers are machines of the pools
        below, each made from a node template.
      </p>
      <FormFailure failure={failure} />
      <TextField id={INPUT.provisionName} label="Name" autoComplete="off" value={form.name} failure={failure}
        onInput={(name) => { setForm({ ...form, name }); }} />
      <div class="field">
        <label for={INPUT.flavour}>Distribution</label>
        <select
          id={INPUT.flavour}
          value={form.flavour}
          onChange={(e) => {
            setForm({ ...form, flavour: e.currentTarget.value as Flavour });
          }}
        >
          {FLAVOURS.map((f) => (
            <option key={f} value={f}>
              {f}
            </option>
          ))}
        </select>
      </div>
      <div class="field">
        <label for={INPUT.version}>Kubernetes version</label>
        <select
          id={INPUT.version}
          value={form.version}
          {...invalid(INPUT.version, failure)}
          onChange={(e) => {
            setForm({ ...form, version: e.currentTarget.value });
          }}
        >
          {versions.length === 0 && <option value="">The catalog offers no version</option>}
          {versions.map((v) => (
            <option key={v} value={v}>
              {v}
            </option>
          ))}
        </select>
        <FieldError id={INPUT.version} failure={failure} />
      </div>
      {form.pools.map((pool, index) => (
        <PoolFields
          key={index}
          index={index}
          pool={pool}
          templates={templates}
          failure={failure}
          onChange={(change) => {
            setPool(index, change);
          }}
          onRemove={
            form.pools.length > 1
              ? () => {
                  setForm({ ...form, pools: form.pools.filter((_, i) => i !== index) });
                }
              : null
          }
        />
      ))}
      {templates.length === 0 && (
        <p class="empty">You have no node template: a pool needs one (`/v3/nodetemplates`).</p>
      )}
      <div class="buttons">
        <button
          type="button"
          class="ghost"
          disabled={form.pools.length >= MAX_POOLS}
          onClick={() => {
            setForm({ ...form, pools: [...form.pools, newPool(form.pools.length, templates[0]?.id ?? "")] });
          }}
        >
          Add a pool
        </button>
        <span class="spacer-flex" />
        <a class="button ghost" href={hrefOf({ page: "clusters" })}>
          Cancel
        </a>
        <button type="submit" disabled={busy}>
          {busy ? "Provisioning…" : "Provision"}
        </button>
      </div>
    </form>
  );
}

interface PoolProps {
  index: number;
  pool: PoolForm;
  templates: Template[];
  failure: Failure | null;
  onChange: (change: Partial<PoolForm>) => void;
  onRemove: (() => void) | null;
}

function PoolFields({ index, pool, templates, failure, onChange, onRemove }: PoolProps) {
  const ids = {
    name: poolInput(index, "name"),
    template: poolInput(index, "template"),
    quantity: poolInput(index, "quantity"),
    roles: poolInput(index, "roles"),
  };
  const title = `Pool ${String(index + 1)}`;
  return (
    <fieldset class="pool" data-pool-form={index}>
      <legend>{title}</legend>
      <div class="pool-grid">
        <TextField id={ids.name} label="Pool name" autoComplete="off" value={pool.name} failure={failure}
          onInput={(name) => { onChange({ name }); }} />
        <div class="field">
          <label for={ids.template}>Node template</label>
          <select
            id={ids.template}
            value={pool.template}
            {...invalid(ids.template, failure)}
            onChange={(e) => {
              onChange({ template: e.currentTarget.value });
            }}
          >
            <option value="">Choose a template</option>
            {templates.map((t) => (
              <option key={t.id} value={t.id}>
                {`${t.name || t.id} (${t.driver ?? "?"})`}
              </option>
            ))}
          </select>
          <FieldError id={ids.template} failure={failure} />
        </div>
        <TextField id={ids.quantity} label="Machines" inputMode="numeric" value={pool.quantity} failure={failure}
          onInput={(quantity) => { onChange({ quantity }); }} />
      </div>
      <fieldset class="roles" id={ids.roles} tabIndex={-1} {...invalid(ids.roles, failure)}>
        <legend>Roles</legend>
        {ROLES.map((role) => (
          <label key={role} class="check">
            <input
              type="checkbox"
              checked={pool.roles[role]}
              onChange={(e) => {
                onChange({ roles: { ...pool.roles, [role]: e.currentTarget.checked } });
              }}
            />
            {ROLE_LABELS[role]}
          </label>
        ))}
        <FieldError id={ids.roles} failure={failure} />
      </fieldset>
      {onRemove && (
        <button type="button" class="ghost" aria-label={`Remove ${title}`} onClick={onRemove}>
          Remove
        </button>
      )}
    </fieldset>
  );
}
