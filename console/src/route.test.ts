import { describe, expect, it } from "vitest";

import { hrefOf, parseRoute, type Route } from "./route";

describe("routes", () => {
  it("reads each page back from the address it gives", () => {
    const routes: Route[] = [
      { page: "clusters" },
      { page: "cluster", clusterId: "c-abcde" },
      { page: "projects", clusterId: "local" },
    ];
    for (const route of routes) expect(parseRoute(hrefOf(route))).toEqual(route);
  });

  it("sends anything else to the clusters list", () => {
    for (const hash of ["", "#", "#/nowhere", "#/clusters/C-UPPER", "#/clusters/c-a/nodes",
      "#/clusters/c-a/projects/x", "#/clusters/..%2Fv3", "#/clusters/"]) {
      expect(parseRoute(hash)).toEqual({ page: "clusters" });
    }
  });
});
