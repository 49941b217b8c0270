// Where the console is: the part of the URL after `#`, so every page has an address to
// bookmark and share, and the server serves one file for all of them.

export type Route =
  | { page: "clusters" }
  | { page: "create-cluster" }
  | { page: "cluster"; clusterId: string }
  | { page: "projects"; clusterId: string }
  | { page: "project"; projectId: string }
  | { page: "workloads"; projectId: string }
  | { page: "pod"; projectId: string; podId: string }
  | { page: "access"; section: AccessSection }
  | { page: "providers" };

// The Access area's pages, in the order its tabs show them.
export const ACCESS_SECTIONS = ["tokens", "users", "globalrolebindings", "settings"] as const;
export type AccessSection = (typeof ACCESS_SECTIONS)[number];

// A cluster id as the API makes them (`c-xxxxx`, `local`): letters, digits and dashes.
const ID = /^[a-z0-9][a-z0-9-]{0,62}$/;
// A project's id is `<cluster>:<project>`; a pod's `<namespace>:<name>` (a DNS subdomain).
const PROJECT_ID = /^[a-z0-9][a-z0-9-]{0,62}:[a-z0-9][a-z0-9-]{0,62}$/;
const POD_ID = /^[a-z0-9][a-z0-9-]{0,62}:[a-z0-9][a-z0-9.-]{0,252}$/;

/** The page a location's hash names; the clusters list for anything else. */
export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, "").split("/");
  let decoded: string[];
  try {
    decoded = parts.map(decodeURIComponent);
  } catch {
    return { page: "clusters" };
  }
  const [root, id, sub, leaf] = decoded;
  // Not a cluster id: those are `c-…` and `local`.
  if (root === "clusters" && id === "new" && parts.length === 2) return { page: "create-cluster" };
  if (root === "access" && id === "providers" && parts.length === 2) return { page: "providers" };
  if (root === "clusters" && id && ID.test(id)) {
    if (parts.length === 2) return { page: "cluster", clusterId: id };
    if (parts.length === 3 && sub === "projects") return { page: "projects", clusterId: id };
  }
  if (root === "projects" && id && PROJECT_ID.test(id)) {
    if (parts.length === 2) return { page: "project", projectId: id };
    if (parts.length === 3 && sub === "workloads") return { page: "workloads", projectId: id };
    if (parts.length === 4 && sub === "pods" && leaf && POD_ID.test(leaf)) {
      return { page: "pod", projectId: id, podId: leaf };
    }
  }
  if (root === "access" && parts.length <= 2) {
    const section = ACCESS_SECTIONS.find((known) => known === (id ?? "tokens"));
    if (section) return { page: "access", section };
  }
  return { page: "clusters" };
}

export function hrefOf(route: Route): string {
  switch (route.page) {
    case "clusters":
      return "#/clusters";
    case "create-cluster":
      return "#/clusters/new";
    case "cluster":
      return `#/clusters/${encodeURIComponent(route.clusterId)}`;
    case "projects":
      return `#/clusters/${encodeURIComponent(route.clusterId)}/projects`;
    case "project":
      return `#/projects/${encodeURIComponent(route.projectId)}`;
    case "workloads":
      return `#/projects/${encodeURIComponent(route.projectId)}/workloads`;
    case "pod":
      return `#/projects/${encodeURIComponent(route.projectId)}/pods/${encodeURIComponent(route.podId)}`;
    case "access":
      return `#/access/${route.section}`;
    case "providers":
      return "#/access/providers";
  }
}
