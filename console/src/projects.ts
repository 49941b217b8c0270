// Projects as /v3 takes and shows them: the create form's body, where the API's field errors
// belong in the form, and a project's quotas in a line. Pure: the page and its tests share it.

import type { Condition } from "./clusters";
import type { Resource } from "./resources";

// The resources a project's quotas name (docs/api.md, "Projects", "Quotas").
export const QUOTA_RESOURCES = [
  "limitsCpu",
  "limitsMemory",
  "requestsCpu",
  "requestsMemory",
  "pods",
  "services",
  "persistentVolumeClaims",
] as const;
export const CONTAINER_RESOURCES = ["limitsCpu", "limitsMemory", "requestsCpu", "requestsMemory"] as const;

export const QUOTA_LABELS: Record<string, string> = {
  limitsCpu: "CPU limit",
  limitsMemory: "Memory limit",
  requestsCpu: "CPU request",
  requestsMemory: "Memory request",
  pods: "Pods",
  services: "Services",
  persistentVolumeClaims: "Volume claims",
};

export type Limits = Partial<Record<string, string>>;

export interface V3Project extends Resource {
  name?: string;
  description?: string;
  clusterId?: string;
  state?: string;
  transitioningMessage?: string;
  resourceQuota?: { limit?: Limits } | null;
  namespaceDefaultResourceQuota?: { limit?: Limits } | null;
  containerDefaultResourceLimit?: Limits | null;
  status?: { conditions?: Condition[] };
}

/** What the create form holds: text as typed, keyed by the input's id (`fieldId`). */
export type ProjectForm = Record<string, string>;

/** The input a field of the body is typed in. */
export function fieldId(field: string): string {
  return `project-${field.replace(/\./g, "-")}`;
}

export const NAME_FIELD = "name";
export const DESCRIPTION_FIELD = "description";
export function projectQuotaField(resource: string): string {
  return `resourceQuota.limit.${resource}`;
}
export function namespaceQuotaField(resource: string): string {
  return `namespaceDefaultResourceQuota.limit.${resource}`;
}
export function containerField(resource: string): string {
  return `containerDefaultResourceLimit.${resource}`;
}

function filled(form: ProjectForm, fields: [string, string][]): Limits | null {
  const limits: Limits = {};
  for (const [resource, field] of fields) {
    const value = (form[fieldId(field)] ?? "").trim();
    if (value) limits[resource] = value;
  }
  return Object.keys(limits).length ? limits : null;
}

/** The body of `POST /v3/projects`: only what was typed, so the API judges every value
 * itself (an empty name included) and says which field is wrong. */
export function projectBody(clusterId: string, form: ProjectForm): Record<string, unknown> {
  const body: Record<string, unknown> = {
    type: "project",
    clusterId,
    name: (form[fieldId(NAME_FIELD)] ?? "").trim(),
  };
  const description = (form[fieldId(DESCRIPTION_FIELD)] ?? "").trim();
  if (description) body.description = description;
  const project = filled(form, QUOTA_RESOURCES.map((r) => [r, projectQuotaField(r)]));
  const namespace = filled(form, QUOTA_RESOURCES.map((r) => [r, namespaceQuotaField(r)]));
  if (project) body.resourceQuota = { limit: project };
  if (namespace) body.namespaceDefaultResourceQuota = { limit: namespace };
  const container = filled(form, CONTAINER_RESOURCES.map((r) => [r, containerField(r)]));
  if (container) body.containerDefaultResourceLimit = container;
  return body;
}

/** The input an error of the API names (`fieldName`), or null when the form has none for it
 * (the message then shows above the form). `displayName` is the name's other spelling. A
 * field naming a whole quota (`namespaceDefaultResourceQuota.limit`: a default the project
 * cannot hold) goes to the input of the resource its message names first, else the first. */
export function errorInput(fieldName: string, message = ""): string | null {
  if (!fieldName) return null;
  if (fieldName === "displayName" || fieldName === NAME_FIELD) return fieldId(NAME_FIELD);
  if (fieldName === DESCRIPTION_FIELD) return fieldId(DESCRIPTION_FIELD);
  const [part, ...rest] = fieldName.split(".");
  const named = rest[rest.length - 1] ?? "";
  const pick = (known: readonly string[]) => {
    if (known.includes(named)) return named;
    const mentioned = known
      .map((resource) => ({ resource, at: message.search(new RegExp(`\\b${resource}\\b`)) }))
      .filter(({ at }) => at >= 0)
      .sort((a, b) => a.at - b.at);
    return mentioned[0]?.resource ?? known[0] ?? "";
  };
  switch (part) {
    case "resourceQuota":
      return fieldId(projectQuotaField(pick(QUOTA_RESOURCES)));
    case "namespaceDefaultResourceQuota":
      return fieldId(namespaceQuotaField(pick(QUOTA_RESOURCES)));
    case "containerDefaultResourceLimit":
      return fieldId(containerField(pick(CONTAINER_RESOURCES)));
    default:
      return null;
  }
}

/** A quota in a line: `CPU limit 2, Pods 10`; "–" for none. */
export function quotaText(limits: Limits | null | undefined): string {
  const parts = Object.entries(limits ?? {})
    .filter(([, value]) => value)
    .map(([resource, value]) => `${QUOTA_LABELS[resource] ?? resource} ${value ?? ""}`);
  return parts.join(", ") || "–";
}

// The roles a project grants (docs/api.md, "Who may do what").
export const PROJECT_ROLES = ["project-owner", "project-member", "read-only"] as const;

export interface V3ProjectBinding extends Resource {
  projectId?: string;
  userId?: string;
  groupPrincipalId?: string;
  roleTemplateId?: string;
}

/** The body of `POST /v3/projectroletemplatebindings`: a provider's group principal
 * (`oidc_group://admins`, anything with `://`) or else a user's id, with the role. */
export function bindingBody(projectId: string, principal: string, role: string): Record<string, string> {
  const who = principal.trim();
  const target = who.includes("://") ? { groupPrincipalId: who } : { userId: who };
  return { type: "projectRoleTemplateBinding", projectId, roleTemplateId: role, ...target };
}

/** Who a binding is for, as the members list shows it. */
export function memberOf(binding: V3ProjectBinding): string {
  return binding.userId || binding.groupPrincipalId || "–";
}
