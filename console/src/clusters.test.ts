import { describe, expect, it } from "vitest";

import { applyEvent, healthy, shown, toRow, type V3Cluster } from "./clusters";

const demo: V3Cluster = {
  id: "c-abcde",
  name: "demo",
  state: "active",
  driver: "imported",
  status: {
    version: { gitVersion: "v1.36.3" },
    nodeCount: 3,
    capacity: { pods: "330", cpu: "12" },
    requested: { pods: "7" },
    conditions: [
      { type: "Ready", status: "True" },
      { type: "Pending", status: "False" },
      { type: "NoDiskPressure", status: "False", reason: "DiskPressure" },
    ],
  },
};

describe("toRow", () => {
  it("shows state, version, driver, node and pod counts", () => {
    const row = toRow(demo);
    expect([row.name, row.state, row.version, row.driver, row.nodes, row.pods, row.podCapacity]).toEqual(
      ["demo", "active", "v1.36.3", "imported", 3, 7, 330],
    );
  });
  it("lists as problems only the conditions a healthy cluster does not have", () => {
    expect(toRow(demo).problems.map((c) => c.type)).toEqual(["NoDiskPressure"]);
  });
  it("counts no pods for a cluster with capacity and nothing requested", () => {
    const row = toRow({ id: "c-idle", status: { capacity: { pods: "110" }, requested: {} } });
    expect([row.pods, row.podCapacity]).toEqual([0, 110]);
  });
  it("shows no counts a cluster has not reported", () => {
    const row = toRow({ id: "c-new" });
    expect([row.name, row.nodes, row.pods, row.version]).toEqual(["c-new", null, null, ""]);
  });
});

describe("healthy", () => {
  it("is True for most types and False for Pending", () => {
    expect(healthy({ type: "Ready", status: "True" })).toBe(true);
    expect(healthy({ type: "Ready", status: "Unknown" })).toBe(false);
    expect(healthy({ type: "Pending", status: "True" })).toBe(false);
    expect(healthy({ type: "Pending", status: "False" })).toBe(true);
  });
});

describe("applyEvent", () => {
  const rows = new Map([[demo.id, toRow(demo)]]);

  it("adds a created cluster and changes a changed one", () => {
    const created = applyEvent(rows, { name: "resource.create", resourceType: "cluster", data: { id: "c-new", name: "new" } });
    expect([...created.keys()]).toEqual(["c-abcde", "c-new"]);
    const changed = applyEvent(created, { name: "resource.change", resourceType: "cluster", data: { ...demo, state: "unavailable" } });
    expect(changed.get("c-abcde")?.state).toBe("unavailable");
    expect(rows.get("c-abcde")?.state).toBe("active");
  });
  it("removes a removed cluster", () => {
    expect(applyEvent(rows, { name: "resource.remove", resourceType: "cluster", data: { id: demo.id } }).size).toBe(0);
  });
  it("leaves the rows as they are for another type, a ping or an unknown id", () => {
    expect(applyEvent(rows, { name: "resource.change", resourceType: "project", data: { id: "c-abcde" } })).toBe(rows);
    expect(applyEvent(rows, { name: "ping" })).toBe(rows);
    expect(applyEvent(rows, { name: "resource.remove", resourceType: "cluster", data: { id: "c-gone" } })).toBe(rows);
  });
});

describe("shown", () => {
  it("filters by name, id, driver or state, and sorts by name", () => {
    const rows = new Map(
      [toRow(demo), toRow({ id: "c-2", name: "alpha", driver: "k3s", state: "pending" })].map((r) => [r.id, r]),
    );
    expect(shown(rows, "").map((r) => r.name)).toEqual(["alpha", "demo"]);
    expect(shown(rows, "K3S").map((r) => r.name)).toEqual(["alpha"]);
    expect(shown(rows, "abcde").map((r) => r.name)).toEqual(["demo"]);
    expect(shown(rows, "nothing")).toEqual([]);
  });
});
