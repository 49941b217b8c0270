import { render } from "preact";
import { act } from "preact/test-utils";
import { afterEach, describe, expect, it, vi } from "vitest";

import type { Cluster } from "./ClusterPage";
import { EtcdBackups, offersBackups } from "./EtcdBackups";
import { ACTIVATING, ACTIVE, FAILED, PROVISIONED } from "./recorded";
import { RotateCertificates } from "./RotateCertificates";

interface Sent {
  method: string;
  path: string;
  body: unknown;
}

// The API as recorded: the backups' collection, and each action's answer.
function answering(answers: Record<string, unknown>): Sent[] {
  const sent: Sent[] = [];
  vi.stubGlobal("fetch", (input: string, init: RequestInit) => {
    const path = new URL(input, "https://corral").pathname + new URL(input, "https://corral").search;
    sent.push({ method: init.method ?? "GET", path, body: init.body ? JSON.parse(init.body as string) : undefined });
    const key = Object.keys(answers).find((k) => path.startsWith(k));
    return Promise.resolve(new Response(JSON.stringify(key ? answers[key] : {}), { status: 200 }));
  });
  return sent;
}

let root: HTMLElement | null = null;

async function shown(page: preact.ComponentChild): Promise<HTMLElement> {
  root = document.createElement("div");
  document.body.append(root);
  await act(() => {
    render(page, root as HTMLElement);
  });
  return root;
}

async function settled(): Promise<void> {
  await act(async () => {
    await new Promise((resolve) => setTimeout(resolve, 0));
  });
}

function buttons(where: ParentNode): string[] {
  return [...where.querySelectorAll("button")].map((b) => b.getAttribute("aria-label") ?? b.textContent);
}

afterEach(() => {
  if (root) render(null, root);
  root?.remove();
  root = null;
  vi.unstubAllGlobals();
});

const BACKUPS = "/v3/etcdbackups";
const ACTION = "/v3/clusters/c-m-8sv65gwv?action=";

describe("a provisioned cluster's backups and rotation", () => {
  it("are offered only where the cluster's actions give them", () => {
    expect(offersBackups(PROVISIONED)).toBe(true);
    const member: Cluster = { ...PROVISIONED, actions: { generateKubeconfig: "x" } };
    expect(offersBackups(member)).toBe(false);
  });

  it("lists the backups with time, state and size, and restores a saved one once confirmed", async () => {
    const sent = answering({ [BACKUPS]: { data: [ACTIVE, ACTIVATING, FAILED] }, [ACTION]: PROVISIONED });
    const page = await shown(<EtcdBackups cluster={PROVISIONED} />);
    await settled();
    const rows = [...page.querySelectorAll("[data-backup]")];
    expect(rows.map((r) => r.getAttribute("data-backup"))).toEqual([ACTIVATING.id, FAILED.id, ACTIVE.id]);
    const active = page.querySelector(`[data-backup="${ACTIVE.id}"]`);
    expect(active?.textContent).toContain("2026-11-28T10:15:00Z");
    expect(active?.textContent).toContain("2.1 MiB");
    expect(page.querySelector(`[data-backup="${FAILED.id}"]`)?.textContent).toContain(FAILED.transitioningMessage);
    // Only the saved backup restores.
    expect(buttons(page)).toEqual(["Take a backup", `Restore ${ACTIVE.name ?? ""}`]);
    expect(sent[0]?.path).toBe(`${BACKUPS}?clusterId=c-m-8sv65gwv`);

    await act(() => {
      page.querySelector<HTMLButtonElement>(`[aria-label="Restore ${ACTIVE.name ?? ""}"]`)?.click();
    });
    const dialog = page.querySelector("dialog");
    expect(dialog?.textContent).toContain(`Restore rec-h27c from ${ACTIVE.name ?? ""}?`);
    expect(sent.filter((s) => s.method === "POST")).toEqual([]);
    await act(() => {
      dialog?.querySelector("form")?.dispatchEvent(new Event("submit", { cancelable: true }));
    });
    await settled();
    expect(sent.filter((s) => s.method === "POST")).toEqual([
      { method: "POST", path: `${ACTION}restoreFromEtcdBackup`, body: { etcdBackupId: ACTIVE.id, restoreRkeConfig: "" } },
    ]);
  });

  it("takes a backup through the cluster's action", async () => {
    const sent = answering({ [BACKUPS]: { data: [] }, [ACTION]: ACTIVATING });
    const page = await shown(<EtcdBackups cluster={PROVISIONED} />);
    await settled();
    expect(page.textContent).toContain("No backups yet.");
    await act(() => {
      page.querySelector("button")?.click();
    });
    await settled();
    expect(sent.filter((s) => s.method === "POST").map((s) => s.path)).toEqual([`${ACTION}backupEtcd`]);
  });

  it("rotates once confirmed and shows the Updated condition while it runs", async () => {
    const sent = answering({ [ACTION]: { type: "rotateCertificateOutput", message: "rotating certificates for all components" } });
    const running: Cluster = {
      ...PROVISIONED,
      status: { conditions: [{ type: "Updated", status: "False", reason: "RotatingCertificates", message: "waiting for kube-apiserver" }] },
    };
    const page = await shown(<RotateCertificates cluster={PROVISIONED} />);
    await act(() => {
      page.querySelector("button")?.click();
    });
    expect(sent).toEqual([]);
    await act(() => {
      page.querySelector("dialog form")?.dispatchEvent(new Event("submit", { cancelable: true }));
    });
    await settled();
    expect(sent).toEqual([{ method: "POST", path: `${ACTION}rotateCertificates`, body: { caCertificates: false } }]);
    expect(page.querySelector('[data-testid="rotation-progress"]')?.textContent).toBe(
      "rotating certificates for all components",
    );
    await act(() => {
      render(<RotateCertificates cluster={running} />, page);
    });
    expect(page.querySelector('[data-testid="rotation-progress"]')?.textContent).toBe(
      "Updated False (RotatingCertificates): waiting for kube-apiserver",
    );
  });

  it("offers no rotation to a caller without the action", async () => {
    const page = await shown(<RotateCertificates cluster={{ ...PROVISIONED, actions: {} }} />);
    expect(buttons(page)).toEqual([]);
  });
});
