// A project's namespaces as /v3 takes and shows them (docs/api.md, "Namespaces"): the create
// and move bodies, and where a namespace may move to. Pure: the page and its tests share it.

import type { V3Project } from "./projects";
import type { V3Namespace } from "./workloads";

/** The body of `POST /v3/clusters/{id}/namespaces`: the name as typed (an empty one too: the
 * API judges it), in this project. */
export function namespaceBody(name: string, projectId: string): Record<string, string> {
  return { name: name.trim(), projectId };
}

/** The namespaces of the project, by name (a cluster member's listing holds others too). */
export function namespacesOf(namespaces: V3Namespace[], projectId: string): V3Namespace[] {
  return namespaces.filter((n) => n.projectId === projectId).sort((a, b) => a.name.localeCompare(b.name));
}

/** The list once the API has answered a namespace's deletion: without it. */
export function withoutNamespace(namespaces: V3Namespace[], id: string): V3Namespace[] {
  return namespaces.filter((n) => n.id !== id);
}

/** The projects a namespace of `projectId` may move to: the others of its cluster, by name. */
export function moveTargets(projects: V3Project[], projectId: string): V3Project[] {
  const cluster = projectId.split(":")[0];
  return projects
    .filter((p) => p.id !== projectId && p.id.split(":")[0] === cluster)
    .sort((a, b) => (a.name ?? a.id).localeCompare(b.name ?? b.id));
}
