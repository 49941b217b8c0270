import { describe, expect, it } from "vitest";

import { applyResourceEvent, byId, type Resource } from "./resources";

interface Node extends Resource {
  clusterId: string;
  state: string;
}

describe("applyResourceEvent", () => {
  const ours = (n: Node) => n.clusterId === "c-a";
  const start = byId<Node>([{ id: "c-a:m-1", clusterId: "c-a", state: "active" }]);

  it("adds, changes and removes the family's resources that belong", () => {
    const created = applyResourceEvent(start, { name: "resource.create", resourceType: "node",
      data: { id: "c-a:m-2", clusterId: "c-a", state: "active" } }, "node", ours);
    expect([...created.keys()]).toEqual(["c-a:m-1", "c-a:m-2"]);
    const changed = applyResourceEvent(created, { name: "resource.change", resourceType: "node",
      data: { id: "c-a:m-1", clusterId: "c-a", state: "cordoned" } }, "node", ours);
    expect(changed.get("c-a:m-1")?.state).toBe("cordoned");
    const removed = applyResourceEvent(changed, { name: "resource.remove", resourceType: "node",
      data: { id: "c-a:m-2", clusterId: "c-a" } }, "node", ours);
    expect([...removed.keys()]).toEqual(["c-a:m-1"]);
  });

  it("leaves the map as it is for other families, other clusters and pings", () => {
    const other = { id: "c-b:m-1", clusterId: "c-b", state: "active" };
    expect(applyResourceEvent(start, { name: "resource.create", resourceType: "node", data: other }, "node", ours)).toBe(start);
    expect(applyResourceEvent(start, { name: "resource.change", resourceType: "nodePool",
      data: { id: "c-a:m-1", clusterId: "c-a" } }, "node", ours)).toBe(start);
    expect(applyResourceEvent(start, { name: "ping" }, "node", ours)).toBe(start);
    expect(applyResourceEvent(start, { name: "resource.remove", resourceType: "node",
      data: { id: "c-a:m-9", clusterId: "c-a" } }, "node", ours)).toBe(start);
  });
});
