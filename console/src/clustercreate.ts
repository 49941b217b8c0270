// Creating a cluster as the API takes it: an import's and a registration's body for
// `POST /v3/clusters`, a provisioned cluster's object for `/v1/provisioning.svc.io.clusters`
// with its machine pools, the versions the catalog setting offers, and the input each of the
// API's field errors belongs to. Pure: the page and its tests share it.

export type Flavour = "rke2" | "k3s";
export const FLAVOURS: readonly Flavour[] = ["rke2", "k3s"];
export const ROLES = ["workerRole", "etcdRole", "controlPlaneRole"] as const;
export type Role = (typeof ROLES)[number];
export const ROLE_LABELS: Record<Role, string> = {
  workerRole: "Worker",
  etcdRole: "etcd",
  controlPlaneRole: "Control plane",
};
// The namespace of Rancher's (and corral's) view for clusters made without one.
export const V1_NAMESPACE = "fleet-default";
export const V1_TYPE = "provisioning.svc.io.cluster";
// At most this many pools in one cluster (docs/api.md, "Machine pools").
export const MAX_POOLS = 100;

/** A kubeconfig's text as `importedConfig.kubeConfig` takes it: base64 of its UTF-8 bytes. */
export function base64Of(text: string): string {
  let binary = "";
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary);
}

/** The body of an import: the name and the kubeconfig as typed (the API judges both; an
 * empty kubeconfig is sent as such, so its refusal names the field). */
export function importBody(name: string, kubeconfig: string): Record<string, unknown> {
  return { type: "cluster", name: name.trim(), importedConfig: { kubeConfig: base64Of(kubeconfig) } };
}

/** The body of a registration: a cluster with no configuration, which waits for its agent. */
export function registerBody(name: string): Record<string, unknown> {
  return { type: "cluster", name: name.trim() };
}

/** The versions of the catalog setting's value, newest first; none when it does not parse
 * (the API refuses such a value, so it is only ever a value stored around it). */
export function catalogVersions(value: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return [];
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return [];
  return Object.keys(parsed).sort(newerFirst);
}

function parts(version: string): number[] {
  return version.replace(/^v/, "").split(/[.+-]/).slice(0, 3).map((p) => Number.parseInt(p, 10) || 0);
}

function newerFirst(a: string, b: string): number {
  const [x, y] = [parts(a), parts(b)];
  for (let i = 0; i < 3; i++) {
    const d = (y[i] ?? 0) - (x[i] ?? 0);
    if (d !== 0) return d;
  }
  return a.localeCompare(b);
}

/** A machine pool as the form holds it: text as typed. */
export interface PoolForm {
  name: string;
  template: string;
  quantity: string;
  roles: Record<Role, boolean>;
}

export function newPool(index: number, template = ""): PoolForm {
  return {
    name: index === 0 ? "workers" : `pool${String(index + 1)}`,
    template,
    quantity: "1",
    roles: { workerRole: true, etcdRole: false, controlPlaneRole: false },
  };
}

export interface ProvisionForm {
  name: string;
  flavour: Flavour;
  version: string;
  pools: PoolForm[];
}

/** A whole number as typed goes as a number; anything else as the text, so the API's own
 * refusal names the field. Empty is left out: the API's default (1). */
function quantityOf(text: string): number | string | undefined {
  const trimmed = text.trim();
  if (trimmed === "") return undefined;
  return /^\d{1,9}$/.test(trimmed) ? Number(trimmed) : trimmed;
}

/** The object `POST /v1/provisioning.svc.io.clusters` takes: the flavour's configuration
 * with the version, and each pool with its template as `machineConfigRef`. */
export function provisionBody(form: ProvisionForm): Record<string, unknown> {
  const version = form.version.trim();
  const config: Record<string, unknown> = version ? { kubernetesVersion: version } : {};
  const spec: Record<string, unknown> = {
    [`${form.flavour}Config`]: config,
    rkeConfig: {
      machinePools: form.pools.map((pool) => {
        const made: Record<string, unknown> = { name: pool.name.trim(), ...pool.roles };
        const quantity = quantityOf(pool.quantity);
        if (quantity !== undefined) made.quantity = quantity;
        if (pool.template) made.machineConfigRef = { kind: "NodeTemplate", name: pool.template };
        return made;
      }),
    },
  };
  if (version) spec.kubernetesVersion = version;
  return {
    type: V1_TYPE,
    metadata: { name: form.name.trim(), namespace: V1_NAMESPACE },
    spec,
  };
}

// The inputs of the forms, by id: the page renders them with these ids, so an error lands
// on the input a person reads it next to.
export const INPUT = {
  importName: "import-name",
  kubeconfig: "import-kubeconfig",
  registerName: "register-name",
  provisionName: "provision-name",
  version: "provision-version",
  flavour: "provision-flavour",
} as const;

export function poolInput(index: number, field: "name" | "template" | "quantity" | "roles"): string {
  return `pool-${String(index)}-${field}`;
}

/** The input of the import form an error's `fieldName` names, or null (shown above). */
export function importErrorInput(fieldName: string): string | null {
  if (fieldName === "name" || fieldName === "displayName") return INPUT.importName;
  if (fieldName === "importedConfig" || fieldName === "importedConfig.kubeConfig" || fieldName === "kubeConfig") {
    return INPUT.kubeconfig;
  }
  return null;
}

export function registerErrorInput(fieldName: string): string | null {
  return fieldName === "name" || fieldName === "displayName" ? INPUT.registerName : null;
}

const POOL_FIELD = /^(?:spec\.rkeConfig\.)?machinePools\[(\d+)\]\.(\w+)/;

/** The input of the provisioning form a `/v1` error's `fieldName` names, or null. */
export function provisionErrorInput(fieldName: string): string | null {
  if (fieldName === "metadata.name") return INPUT.provisionName;
  if (/^spec\.(?:(?:rke2|k3s)Config\.)?kubernetesVersion$/.test(fieldName)) return INPUT.version;
  const pool = POOL_FIELD.exec(fieldName);
  if (pool) {
    const index = Number(pool[1]);
    switch (pool[2]) {
      case "name":
        return poolInput(index, "name");
      case "quantity":
      case "autoscalingMinSize":
      case "autoscalingMaxSize":
        return poolInput(index, "quantity");
      case "machineConfigRef":
        return poolInput(index, "template");
      case "workerRole":
      case "etcdRole":
      case "controlPlaneRole":
        return poolInput(index, "roles");
    }
  }
  return null;
}

/** The registration commands a token shows, in the order a person tries them: the manifest
 * applied with kubectl, then the same for a server whose certificate kubectl does not trust.
 * A provisioned cluster's token has no manifest; its machines join with the node command. */
export interface V3RegistrationToken {
  id: string;
  clusterId?: string;
  command?: string;
  insecureCommand?: string;
  nodeCommand?: string;
  insecureNodeCommand?: string;
  manifestUrl?: string;
  state?: string;
}

export interface Command {
  label: string;
  text: string;
}

export function registrationCommands(token: V3RegistrationToken): Command[] {
  const found: Command[] = [];
  const add = (label: string, text: string | undefined) => {
    if (text && !found.some((c) => c.text === text)) found.push({ label, text });
  };
  if (token.manifestUrl) {
    add("Run in the cluster (kubectl)", token.command);
    add("If kubectl does not trust corral's certificate", token.insecureCommand);
  } else {
    add("Run on a machine to join it", token.nodeCommand);
    add("If the machine does not trust corral's certificate", token.insecureNodeCommand);
  }
  return found;
}
