// Where the console is: the part of the URL after `#`, so every page has an address to
// bookmark and share, and the server serves one file for all of them.

export type Route =
  | { page: "clusters" }
  | { page: "cluster"; clusterId: string }
  | { page: "projects"; clusterId: string };

// A cluster id as the API makes them (`c-xxxxx`, `local`): letters, digits and dashes.
const ID = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** The page a location's hash names; the clusters list for anything else. */
export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, "").split("/");
  const [root, id, sub] = parts.map(decodeURIComponent);
  if (root === "clusters" && id && ID.test(id)) {
    if (parts.length === 2) return { page: "cluster", clusterId: id };
    if (parts.length === 3 && sub === "projects") return { page: "projects", clusterId: id };
  }
  return { page: "clusters" };
}

export function hrefOf(route: Route): string {
  switch (route.page) {
    case "clusters":
      return "#/clusters";
    case "cluster":
      return `#/clusters/${encodeURIComponent(route.clusterId)}`;
    case "projects":
      return `#/clusters/${encodeURIComponent(route.clusterId)}/projects`;
  }
}
