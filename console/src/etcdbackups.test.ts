import { describe, expect, it } from "vitest";

import { anyActivating, backupRows, restoreBody, sizeText, updateProgress } from "./etcdbackups";
import { ACTIVE, ACTIVATING, FAILED } from "./recorded";

describe("etcd backups", () => {
  it("says sizes as a person reads them", () => {
    expect(sizeText(0)).toBe("0 B");
    expect(sizeText(512)).toBe("512 B");
    expect(sizeText(1536)).toBe("1.5 KiB");
    expect(sizeText(2_228_256)).toBe("2.1 MiB");
    expect(sizeText(-1)).toBe("");
    expect(sizeText(undefined)).toBe("");
  });

  it("lists one cluster's backups newest first; only a saved one restores", () => {
    const other = { ...ACTIVE, id: "c-m-other:c-m-other-20260101000000", clusterId: "c-m-other" };
    const rows = backupRows([ACTIVE, ACTIVATING, FAILED, other], ACTIVE.clusterId ?? "");
    expect(rows.map((r) => [r.name, r.state, r.restorable])).toEqual([
      [ACTIVATING.name, "activating", false],
      [FAILED.name, "failed", false],
      [ACTIVE.name, "active", true],
    ]);
    expect(rows[2]?.size).toBe("2.1 MiB");
    expect(rows[0]?.size).toBe("");
    expect(rows[1]?.message).toBe(FAILED.transitioningMessage);
    expect(anyActivating(rows)).toBe(true);
    expect(anyActivating(rows.slice(1))).toBe(false);
  });

  it("restores by the backup's id, in the mode chosen", () => {
    expect(restoreBody(ACTIVE.id, "kubernetesVersion")).toEqual({
      etcdBackupId: ACTIVE.id,
      restoreRkeConfig: "kubernetesVersion",
    });
  });

  it("reads a restore's or a rotation's progress from the Updated condition", () => {
    expect(updateProgress([{ type: "Updated", status: "False", reason: "RotatingCertificates", message: "waiting for etcd" }]))
      .toEqual({ running: true, text: "Updated False (RotatingCertificates): waiting for etcd" });
    expect(updateProgress([{ type: "Updated", status: "False", reason: "Restoring", message: "phase Restore" }])?.running).toBe(true);
    expect(updateProgress([{ type: "Updated", status: "True" }])).toEqual({ running: false, text: "Updated True" });
    expect(updateProgress([{ type: "Ready", status: "True" }])).toBeNull();
    expect(updateProgress(undefined)).toBeNull();
  });
});
