import { describe, expect, it } from "vitest";

import { hrefOf, parseRoute, type Route } from "./route";

describe("routes", () => {
  it("reads each page back from the address it gives", () => {
    const routes: Route[] = [
      { page: "clusters" },
      { page: "create-cluster" },
      { page: "cluster", clusterId: "c-abcde" },
      { page: "projects", clusterId: "local" },
      { page: "project", projectId: "c-abcde:p-xyz12" },
      { page: "workloads", projectId: "c-abcde:p-xyz12" },
      { page: "pod", projectId: "local:p-xyz12", podId: "shop:web-7d9f8b6c5-x2x4z" },
      { page: "pod", projectId: "local:p-xyz12", podId: "shop:db-0.sts" },
      { page: "access", section: "tokens" },
      { page: "access", section: "users" },
      { page: "access", section: "globalrolebindings" },
      { page: "access", section: "settings" },
      { page: "providers" },
    ];
    for (const route of routes) expect(parseRoute(hrefOf(route))).toEqual(route);
  });

  it("sends anything else to the clusters list", () => {
    for (const hash of ["", "#", "#/nowhere", "#/clusters/C-UPPER", "#/clusters/c-a/nodes",
      "#/clusters/c-a/projects/x", "#/clusters/new/x", "#/clusters/..%2Fv3", "#/clusters/", "#/projects/p-x/workloads",
      "#/projects/c-a", "#/projects/c-a%3AP-B", "#/projects/c-a%3Ap-b/pods/web", "#/projects/c-a%3Ap-b/pods/shop%3A..%2Fx",
      "#/projects/c-a%3Ap-b/workloads/x", "#/projects/%E0%A4%A",
      "#/access/secrets", "#/access/tokens/x", "#/access/Users",
      "#/access/providers/x"]) {
      expect(parseRoute(hash)).toEqual({ page: "clusters" });
    }
  });

  it("opens the Access area at its tokens", () => {
    expect(parseRoute("#/access")).toEqual({ page: "access", section: "tokens" });
  });
});
