import { describe, expect, it } from "vitest";

import { retryDelay, subscriptionUrl } from "./subscribe";

describe("subscriptionUrl", () => {
  it("is a wss URL on the page's own host for an https page", () => {
    const url = subscriptionUrl({ protocol: "https:", host: "corral.example:8443" } as Location, ["cluster", "node"]);
    expect(url).toBe("wss://corral.example:8443/v3/subscribe?resourceTypes=cluster&resourceTypes=node");
  });
});

describe("retryDelay", () => {
  it("doubles from half a second and stops at 15 s", () => {
    expect([1, 2, 3, 10].map(retryDelay)).toEqual([500, 1000, 2000, 15000]);
  });
});
