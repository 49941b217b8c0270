import { render } from "preact";
import { act } from "preact/test-utils";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { ClusterTable } from "./ClusterList";
import { toRow } from "./clusters";

describe("ClusterTable", () => {
  // happy-dom lays nothing out: the list's scroller is given the height a browser would.
  const height = Object.getOwnPropertyDescriptor(HTMLElement.prototype, "clientHeight");
  beforeAll(() => {
    Object.defineProperty(HTMLElement.prototype, "clientHeight", { configurable: true, get: () => 480 });
  });
  afterAll(() => {
    if (height) Object.defineProperty(HTMLElement.prototype, "clientHeight", height);
  });

  it("puts only the rows in view in the page, not all 1,000", async () => {
    const rows = Array.from({ length: 1000 }, (_, i) => toRow({ id: `c-${i}`, name: `cluster-${i}` }));
    const root = document.createElement("div");
    document.body.append(root);
    await act(() => {
      render(<ClusterTable rows={rows} />, root);
    });
    const shownRows = root.querySelectorAll("[data-cluster]");
    expect(shownRows.length).toBeGreaterThan(0);
    expect(shownRows.length).toBeLessThan(50);
    expect(root.querySelector("[role=table]")?.getAttribute("aria-rowcount")).toBe("1001");
    render(null, root);
  });
});
