import { render } from "preact";
import { act } from "preact/test-utils";
import { afterEach, describe, expect, it, vi } from "vitest";

import { Namespaces } from "./Namespaces";
import type { V3Namespace } from "./workloads";

const PROJECT = "c-a:p-b";
const LISTED = `/v3/clusters/c-a/namespaces?projectId=${encodeURIComponent(PROJECT)}`;
const NS = "https://corral/v3/clusters/c-a/namespaces";
// As /v3 shows them to a project member: `web` they may delete (its remove link), `ops` not.
const web: V3Namespace = { id: "web", name: "web", projectId: PROJECT, state: "active", links: { self: `${NS}/web`, remove: `${NS}/web` } };
const ops: V3Namespace = { id: "ops", name: "ops", projectId: PROJECT, state: "active", links: { self: `${NS}/ops` } };

interface Sent {
  method: string;
  path: string;
}

// The API: the two reads of the panel, and `deleted` as the answer to a DELETE.
function answering(deleted: Response): Sent[] {
  const sent: Sent[] = [];
  vi.stubGlobal("fetch", (input: string, init: RequestInit) => {
    const url = new URL(input, "https://corral");
    const method = init.method ?? "GET";
    sent.push({ method, path: url.pathname + url.search });
    if (method === "DELETE") return Promise.resolve(deleted);
    const data = url.pathname.endsWith("/namespaces") ? [ops, web] : [];
    return Promise.resolve(new Response(JSON.stringify({ data }), { status: 200 }));
  });
  return sent;
}

let root: HTMLElement | null = null;

async function shown(): Promise<HTMLElement> {
  root = document.createElement("div");
  document.body.append(root);
  await act(() => {
    render(<Namespaces projectId={PROJECT} />, root as HTMLElement);
  });
  await settled();
  return root;
}

async function settled(): Promise<void> {
  await act(async () => {
    await new Promise((resolve) => setTimeout(resolve, 0));
  });
}

// The dialog as a user drives it: Delete on the row, the name typed, the dialog's Delete.
async function deleteWeb(page: HTMLElement): Promise<HTMLDialogElement | null> {
  await act(() => {
    page.querySelector<HTMLButtonElement>('[aria-label="Delete namespace web"]')?.click();
  });
  const dialog = page.querySelector("dialog");
  const typed = dialog?.querySelector<HTMLInputElement>("#delete-confirm");
  await act(() => {
    if (typed) typed.value = "web";
    typed?.dispatchEvent(new Event("input", { bubbles: true }));
  });
  const confirm = [...(dialog?.querySelectorAll("button") ?? [])].find((b) => b.textContent === "Delete namespace");
  expect(confirm?.disabled).toBe(false);
  await act(() => {
    confirm?.click();
  });
  await settled();
  return dialog;
}

function rows(page: HTMLElement): (string | null)[] {
  return [...page.querySelectorAll("[data-namespace]")].map((r) => r.getAttribute("data-namespace"));
}

afterEach(() => {
  if (root) render(null, root);
  root?.remove();
  root = null;
  vi.unstubAllGlobals();
});

describe("a project's namespaces", () => {
  it("offers Delete only where the namespace's links allow it, and deletes once its name is typed", async () => {
    const sent = answering(new Response(null, { status: 204 }));
    const page = await shown();
    expect(sent.map((s) => s.path)).toContain(LISTED);
    expect(rows(page)).toEqual(["ops", "web"]);
    expect([...page.querySelectorAll("button")].map((b) => b.getAttribute("aria-label"))).toEqual([
      "Delete namespace web",
    ]);
    await act(() => {
      page.querySelector<HTMLButtonElement>('[aria-label="Delete namespace web"]')?.click();
    });
    // The dialog names the namespace; nothing is sent until it is confirmed.
    expect(page.querySelector("dialog h2")?.textContent).toBe("Delete namespace web?");
    expect(sent.filter((s) => s.method === "DELETE")).toEqual([]);
    await act(() => {
      page.querySelector("dialog")?.close();
    });

    await deleteWeb(page);
    expect(sent.filter((s) => s.method === "DELETE")).toEqual([{ method: "DELETE", path: "/v3/clusters/c-a/namespaces/web" }]);
    // Gone from the list on the API's answer, and the dialog with it.
    expect(rows(page)).toEqual(["ops"]);
    expect(page.querySelector("dialog")).toBeNull();
  });

  it("shows the API's refusal in the dialog and keeps the row", async () => {
    const refusal = { type: "error", status: 403, code: "Forbidden", message: "you may not delete namespace web" };
    answering(new Response(JSON.stringify(refusal), { status: 403 }));
    const page = await shown();
    const dialog = await deleteWeb(page);
    expect(dialog?.querySelector('[role="alert"]')?.textContent).toBe("you may not delete namespace web");
    expect(page.querySelector("dialog")).not.toBeNull();
    expect(rows(page)).toEqual(["ops", "web"]);
  });
});
