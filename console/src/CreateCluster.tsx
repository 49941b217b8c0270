import { useEffect, useState } from "preact/hooks";

import { ApiError, call, pathOf, type Collection } from "./api";
import type { V3Cluster } from "./clusters";
import {
  INPUT,
  importBody,
  importErrorInput,
  registerBody,
  registerErrorInput,
} from "./clustercreate";
import { CreatedCluster } from "./CreatedCluster";
import { FieldError, FormFailure, invalid, useSubmit } from "./FieldError";
import { ProvisionCluster } from "./ProvisionCluster";
import { messageOf } from "./resources";
import { hrefOf } from "./route";
import { TextField } from "./TextField";

type Way = "import" | "register" | "provision";
const WAYS: { way: Way; label: string }[] = [
  { way: "import", label: "Import" },
  { way: "register", label: "Register" },
  { way: "provision", label: "Provision" },
];

// Where the caller may create: `/v3/clusters` for an import or a registration, the `/v1`
// view for a provisioned cluster; each only when its collection's createTypes offers it.
interface Offered {
  v3: string | null;
  v1: string | null;
}

async function offered(): Promise<Offered> {
  const [v3, v1] = await Promise.allSettled([
    call<Collection<unknown>>("GET", "/v3/clusters?limit=1"),
    call<Collection<unknown>>("GET", "/v1/provisioning.svc.io.clusters?limit=1"),
  ]);
  const first = (read: PromiseSettledResult<Collection<unknown>>, type?: string) => {
    if (read.status !== "fulfilled") return null;
    const types = read.value.createTypes ?? {};
    const url = type ? types[type] : Object.values(types)[0];
    return url ? pathOf(url) : null;
  };
  return { v3: first(v3, "cluster"), v1: first(v1) };
}

export interface Made {
  clusterId: string;
  register: boolean;
}

/** Import a cluster by its kubeconfig, register one by its agent's manifest, or provision an
 * rke2 or k3s cluster: the ways the API offers the caller. */
export function CreateCluster() {
  const [ways, setWays] = useState<Offered | null>(null);
  const [error, setError] = useState("");
  const [way, setWay] = useState<Way>("import");
  const [made, setMade] = useState<Made | null>(null);

  useEffect(() => {
    offered().then(
      (found) => {
        setWays(found);
        if (!found.v3 && found.v1) setWay("provision");
      },
      (failure: unknown) => {
        if (!(failure instanceof ApiError && failure.sessionEnded)) setError(messageOf(failure));
      },
    );
  }, []);

  const shown = WAYS.filter(({ way: w }) => (w === "provision" ? ways?.v1 : ways?.v3));
  return (
    <section class="page" aria-labelledby="create-cluster-title">
      <nav aria-label="Breadcrumb" class="crumbs">
        <a href={hrefOf({ page: "clusters" })}>Clusters</a> / <span>Create</span>
      </nav>
      <header class="page-head">
        <h1 id="create-cluster-title">Create a cluster</h1>
      </header>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {made ? (
        <CreatedCluster clusterId={made.clusterId} register={made.register} />
      ) : ways === null ? (
        <p role="status">Loading…</p>
      ) : shown.length === 0 ? (
        <p class="empty">You may not create clusters.</p>
      ) : (
        <>
          <div role="tablist" aria-label="How to create it" class="tabs">
            {shown.map(({ way: w, label }) => (
              <button
                key={w}
                type="button"
                role="tab"
                id={`tab-${w}`}
                aria-selected={w === way}
                aria-controls={`panel-${w}`}
                class={w === way ? "tab tab-selected" : "tab"}
                onClick={() => {
                  setWay(w);
                }}
              >
                {label}
              </button>
            ))}
          </div>
          <div role="tabpanel" id={`panel-${way}`} aria-labelledby={`tab-${way}`}>
            {way === "import" && ways.v3 && <ImportForm url={ways.v3} onMade={setMade} />}
            {way === "register" && ways.v3 && <RegisterForm url={ways.v3} onMade={setMade} />}
            {way === "provision" && ways.v1 && <ProvisionCluster url={ways.v1} onMade={setMade} />}
          </div>
        </>
      )}
    </section>
  );
}

interface FormProps {
  url: string;
  onMade: (made: Made) => void;
}

function ImportForm({ url, onMade }: FormProps) {
  const [name, setName] = useState("");
  const [kubeconfig, setKubeconfig] = useState("");
  const { busy, failure, submit } = useSubmit(async () => {
    const made = await call<V3Cluster>("POST", url, importBody(name, kubeconfig));
    onMade({ clusterId: made.id, register: false });
  }, importErrorInput);
  const id = INPUT.kubeconfig;
  return (
    <form class="panel" aria-labelledby="import-title" onSubmit={(event) => void submit(event)} noValidate>
      <h2 id="import-title">Import a cluster corral can reach</h2>
      <p class="muted">
        corral uses the kubeconfig once to make its own service account in the cluster; the
        kubeconfig itself is neither kept nor shown again.
      </p>
      <FormFailure failure={failure} />
      <TextField id={INPUT.importName} label="Name" autoComplete="off" value={name} onInput={setName} failure={failure} />
      <div class="field">
        <label for={id}>Kubeconfig</label>
        <textarea
          id={id}
          rows={12}
          spellcheck={false}
          autoComplete="off"
          value={kubeconfig}
          {...invalid(id, failure)}
          onInput={(e) => {
            setKubeconfig(e.currentTarget.value);
          }}
        />
        <FieldError id={id} failure={failure} />
      </div>
      <div class="buttons">
        <a class="button ghost" href={hrefOf({ page: "clusters" })}>
          Cancel
        </a>
        <button type="submit" disabled={busy}>
          {busy ? "Importing…" : "Import"}
        </button>
      </div>
    </form>
  );
}

function RegisterForm({ url, onMade }: FormProps) {
  const [name, setName] = useState("");
  const { busy, failure, submit } = useSubmit(async () => {
    const made = await call<V3Cluster>("POST", url, registerBody(name));
    onMade({ clusterId: made.id, register: true });
  }, registerErrorInput);
  return (
    <form class="panel" aria-labelledby="register-title" onSubmit={(event) => void submit(event)} noValidate>
      <h2 id="register-title">Register a cluster corral cannot reach</h2>
      <p class="muted">
        corral makes the cluster and shows a command to run in it: the agent it starts dials out
        to corral, and the cluster turns active once it has.
      </p>
      <FormFailure failure={failure} />
      <TextField id={INPUT.registerName} label="Name" autoComplete="off" value={name} onInput={setName} failure={failure} />
      <div class="buttons">
        <a class="button ghost" href={hrefOf({ page: "clusters" })}>
          Cancel
        </a>
        <button type="submit" disabled={busy}>
          {busy ? "Creating…" : "Create and show the command"}
        </button>
      </div>
    </form>
  );
}
