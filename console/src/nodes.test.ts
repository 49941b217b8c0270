import { describe, expect, it } from "vitest";

import { addedTaint, draining, nodeRows, removedTaint, taintText, toNodeRow, toPoolRow, type V3Node } from "./nodes";
import { byId } from "./resources";

const ready = { type: "Ready", status: "True" };

describe("nodes", () => {
  it("says a drain runs from its request until the operator answers that request", () => {
    const asked: V3Node = {
      id: "c-a:m-1",
      state: "cordoned",
      spec: { desiredNodeUnschedulable: "drain", nodeDrainInput: { requestedAt: "t2" } },
      status: { drainRequest: "t1", conditions: [ready, { type: "Drained", status: "True", message: "evicted 3 pod(s)" }] },
    };
    expect(draining(asked)).toBe(true);
    const row = toNodeRow(asked);
    expect(row.state).toBe("draining");
    // The earlier drain's outcome is not this one's.
    expect(row.drain).toBeNull();

    const answered = { ...asked, state: "drained", status: { ...asked.status, drainRequest: "t2" } };
    expect(draining(answered)).toBe(false);
    expect(toNodeRow(answered).drain).toEqual({ ok: true, text: "evicted 3 pod(s)" });
  });

  it("shows a refused drain's reason, and nothing once uncordoned", () => {
    const refused: V3Node = {
      id: "c-a:m-1",
      spec: { desiredNodeUnschedulable: "drain", nodeDrainInput: { requestedAt: "t1" } },
      status: { drainRequest: "t1", conditions: [{ type: "Drained", status: "False", reason: "DrainRefused", message: "pod web-1 has no controller" }] },
    };
    expect(toNodeRow(refused).drain).toEqual({ ok: false, text: "pod web-1 has no controller" });
    const uncordoned: V3Node = {
      id: "c-a:m-1",
      spec: { desiredNodeUnschedulable: "false" },
      status: { conditions: [{ type: "Drained", status: "False", reason: "Uncordoned" }] },
    };
    expect(toNodeRow(uncordoned).drain).toBeNull();
    expect(toNodeRow(uncordoned).problems).toEqual([]);
  });

  it("names roles and problems, sorts by name and keeps the API's action links", () => {
    const rows = nodeRows(byId<V3Node>([
      { id: "c-a:m-2", name: "worker-b", worker: true, status: { conditions: [{ type: "Ready", status: "Unknown", reason: "NodeStatusUnknown" }] } },
      { id: "c-a:m-1", name: "worker-a", displayName: "", worker: true, etcd: true, status: { conditions: [ready] },
        actions: { cordon: "https://corral/v3/clusters/c-a/nodes/m-1?action=cordon" } },
    ]));
    expect(rows.map((r) => r.name)).toEqual(["worker-a", "worker-b"]);
    expect(rows[0]?.roles).toEqual(["etcd", "worker"]);
    expect(rows[0]?.actions.cordon).toContain("action=cordon");
    expect(rows[1]?.problems.map((c) => c.type)).toEqual(["Ready"]);
    expect(rows[1]?.actions).toEqual({});
  });

  it("shows a node's taints and offers editing them only with its update link", () => {
    const taints = [{ key: "dedicated", value: "gpu", effect: "NoSchedule" }, { key: "spot", effect: "NoExecute" }];
    const row = toNodeRow({ id: "c-a:m-1", desiredNodeTaints: taints, links: { update: "https://corral/v3/clusters/c-a/nodes/m-1" } });
    expect(row.taints.map(taintText)).toEqual(["dedicated=gpu:NoSchedule", "spot:NoExecute"]);
    expect(row.update).toBe("https://corral/v3/clusters/c-a/nodes/m-1");
    expect(toNodeRow({ id: "c-a:m-2", desiredNodeTaints: null })).toMatchObject({ taints: [], update: null });
  });

  it("builds the update that adds or removes one taint, keeping the others", () => {
    const taints = [{ key: "dedicated", value: "gpu", effect: "NoSchedule" }];
    expect(addedTaint(taints, { key: " spot ", value: " ", effect: "NoExecute" })).toEqual({
      desiredNodeTaints: [...taints, { key: "spot", effect: "NoExecute" }],
    });
    expect(addedTaint([], { key: "a", value: "b", effect: "PreferNoSchedule" }).desiredNodeTaints).toEqual([
      { key: "a", value: "b", effect: "PreferNoSchedule" },
    ]);
    expect(removedTaint(taints, 0)).toEqual({ desiredNodeTaints: [] });
  });

  it("shows a pool's counts and whether it may be scaled", () => {
    const pool = toPoolRow({ id: "c-a:np-1", hostnamePrefix: "w-", quantity: 3, ready: 2, state: "provisioning",
      links: { update: "https://corral/v3/nodepools/c-a:np-1" } });
    expect(pool).toMatchObject({ name: "w-", quantity: 3, ready: 2, update: "https://corral/v3/nodepools/c-a:np-1" });
    expect(toPoolRow({ id: "c-a:np-2", lastError: "quota exceeded" })).toMatchObject({ quantity: 0, update: null, message: "quota exceeded" });
  });
});
