import { render } from "preact";
import { act } from "preact/test-utils";
import { afterEach, describe, expect, it } from "vitest";

import { ClusterActions, Nodes, Pools, type Cluster } from "./ClusterPage";
import { byId } from "./resources";

// What /v3 answers the cluster's owner and a member who may only read, for the same objects:
// the API leaves out the links and actions a caller's writes would be refused.
const SELF = "https://corral/v3/clusters/c-a";
const owners: Cluster = {
  id: "c-a",
  links: { self: SELF, update: SELF, remove: SELF },
  actions: { generateKubeconfig: `${SELF}?action=generateKubeconfig` },
};
const members: Cluster = {
  id: "c-a",
  links: { self: SELF },
  actions: { generateKubeconfig: `${SELF}?action=generateKubeconfig` },
};
const NODE = `${SELF}/nodes/m-1`;
const node = (offered: boolean) => ({
  id: "c-a:m-1",
  name: "worker-a",
  worker: true,
  desiredNodeTaints: [{ key: "spot", effect: "NoExecute" }],
  links: offered ? { self: NODE, update: NODE, remove: NODE } : { self: NODE },
  actions: offered
    ? { cordon: `${NODE}?action=cordon`, uncordon: `${NODE}?action=uncordon`, drain: `${NODE}?action=drain` }
    : {},
});
const POOL = "https://corral/v3/nodepools/c-a:np-1";
const pool = (offered: boolean) => ({
  id: "c-a:np-1",
  hostnamePrefix: "w-",
  quantity: 2,
  links: offered ? { self: POOL, update: POOL, remove: POOL } : { self: POOL },
});

let root: HTMLElement | null = null;

async function shown(page: preact.ComponentChild): Promise<string[]> {
  root = document.createElement("div");
  document.body.append(root);
  await act(() => {
    render(page, root as HTMLElement);
  });
  return [...root.querySelectorAll("button")].map((b) => b.getAttribute("aria-label") ?? b.textContent);
}

afterEach(() => {
  if (root) render(null, root);
  root?.remove();
  root = null;
});

describe("a cluster's page", () => {
  it("gives the owner Delete, taint editing, Cordon, Drain and scaling", async () => {
    const buttons = await shown(
      <>
        <ClusterActions cluster={owners} name="demo" />
        <Nodes loaded={{ items: byId([node(true)]), error: "" }} />
        <Pools loaded={{ items: byId([pool(true)]), error: "" }} />
      </>,
    );
    expect(buttons).toEqual([
      "Download kubeconfig",
      "Delete",
      "Remove taint spot:NoExecute from worker-a",
      "Add taint to worker-a",
      "Cordon worker-a",
      "Drain worker-a",
      "Scale w- down",
      "Scale w- up",
    ]);
  });

  it("gives a member who may only read no write button, and the kubeconfig still", async () => {
    const buttons = await shown(
      <>
        <ClusterActions cluster={members} name="demo" />
        <Nodes loaded={{ items: byId([node(false)]), error: "" }} />
        <Pools loaded={{ items: byId([pool(false)]), error: "" }} />
      </>,
    );
    expect(buttons).toEqual(["Download kubeconfig"]);
    expect(root?.querySelector('[data-node="c-a:m-1"]')?.textContent).toContain("worker-a");
    expect(root?.querySelector('[data-node="c-a:m-1"]')?.textContent).toContain("spot:NoExecute");
  });
});
