import { describe, expect, it } from "vitest";

import { applyEvent, toRow, type ClusterRow, type V3Cluster } from "./clusters";
import { replayingDuringLoads } from "./live";
import type { ResourceEvent } from "./resources";

const removing: V3Cluster = { id: "c-gone", name: "gone", state: "removing" };
const other: V3Cluster = { id: "c-kept", name: "kept", state: "active" };

/** A list page as ClusterList keeps it: rows once the first read has set them, events applied
 * to the rows it has (none before that read). */
function page() {
  let rows: ReadonlyMap<string, ClusterRow> | null = null;
  let answer: (clusters: V3Cluster[]) => void = () => undefined;
  const load = () =>
    new Promise<void>((resolve) => {
      answer = (clusters) => {
        rows = new Map(clusters.map((c) => [c.id, toRow(c)]));
        resolve();
      };
    });
  const live = replayingDuringLoads(load, (event) => {
    rows = rows ? applyEvent(rows, event) : rows;
  });
  return { live, answer: (clusters: V3Cluster[]) => { answer(clusters); }, rows: () => rows };
}

const event = (name: string, data: V3Cluster): ResourceEvent => ({
  name,
  resourceType: "cluster",
  data: { ...data },
});

describe("replayingDuringLoads", () => {
  it("removes what a read answered before its removal and delivered after it", async () => {
    const { live, answer, rows } = page();
    const read = live.onOpen();
    live.onEvent(event("resource.remove", removing));
    answer([removing, other]);
    await read;
    expect([...(rows()?.keys() ?? [])]).toEqual(["c-kept"]);
  });

  it("keeps the latest of the changes that came during the read", async () => {
    const { live, answer, rows } = page();
    const read = live.onOpen();
    live.onEvent(event("resource.change", { ...other, state: "updating" }));
    live.onEvent(event("resource.change", { ...other, state: "active", name: "renamed" }));
    answer([{ ...other, state: "updating" }]);
    await read;
    expect(rows()?.get("c-kept")?.name).toBe("renamed");
  });

  it("applies each event once when no read is in flight", async () => {
    const applied: string[] = [];
    const live = replayingDuringLoads(() => Promise.resolve(), (e) => applied.push(e.name));
    await live.onOpen();
    live.onEvent(event("resource.create", removing));
    expect(applied).toEqual(["resource.create"]);
  });
});
