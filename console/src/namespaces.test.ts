import { describe, expect, it } from "vitest";

import { moveTargets, namespaceBody, namespacesOf, withoutNamespace } from "./namespaces";
import type { V3Project } from "./projects";
import type { V3Namespace } from "./workloads";

describe("namespaces", () => {
  it("creates one in the project with the name as typed, trimmed", () => {
    expect(namespaceBody(" shop ", "c-a:p-b")).toEqual({ name: "shop", projectId: "c-a:p-b" });
    expect(namespaceBody("", "c-a:p-b")).toEqual({ name: "", projectId: "c-a:p-b" });
  });

  it("lists only the project's, by name", () => {
    const spaces: V3Namespace[] = [
      { id: "web", name: "web", projectId: "c-a:p-b" },
      { id: "db", name: "db", projectId: "c-a:p-b" },
      { id: "other", name: "other", projectId: "c-a:p-c" },
      { id: "loose", name: "loose", projectId: null },
    ];
    expect(namespacesOf(spaces, "c-a:p-b").map((n) => n.name)).toEqual(["db", "web"]);
  });

  it("moves only to the cluster's other projects", () => {
    const projects: V3Project[] = [
      { id: "c-a:p-b", name: "shop" },
      { id: "c-a:p-d", name: "Default" },
      { id: "c-z:p-e", name: "elsewhere" },
      { id: "c-a:p-c", name: "billing" },
    ];
    expect(moveTargets(projects, "c-a:p-b").map((p) => p.id)).toEqual(["c-a:p-c", "c-a:p-d"]);
  });

  it("drops a namespace the API has answered the deletion of, and only that one", () => {
    const spaces: V3Namespace[] = [
      { id: "web", name: "web", projectId: "c-a:p-b" },
      { id: "db", name: "db", projectId: "c-a:p-b" },
    ];
    expect(withoutNamespace(spaces, "web").map((n) => n.id)).toEqual(["db"]);
    expect(withoutNamespace(spaces, "gone")).toEqual(spaces);
  });
});
