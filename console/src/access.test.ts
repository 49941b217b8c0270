import { describe, expect, it } from "vitest";

import {
  expiryText,
  lifetimeText,
  parseLifetime,
  providerOf,
  tokenBody,
  tokenErrorInput,
  userBody,
  userErrorInput,
  whenText,
} from "./access";

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

describe("a token's lifetime", () => {
  it("reads minutes, hours and days as milliseconds", () => {
    expect(parseLifetime("90m")).toBe(90 * MINUTE);
    expect(parseLifetime(" 8H ")).toBe(8 * HOUR);
    expect(parseLifetime("30 d")).toBe(30 * DAY);
    expect(parseLifetime("0m")).toBe(0);
    expect(parseLifetime("9999999d")).toBe(9999999 * DAY);
  });

  it("leaves an empty one to the API's longest and refuses what is no lifetime", () => {
    expect(parseLifetime("")).toBeNull();
    expect(parseLifetime("   ")).toBeNull();
    for (const typed of ["8", "h", "1.5h", "-2h", "2w", "8h30m", "1e3m", "10000000d", "٣h"]) {
      expect(parseLifetime(typed), typed).toBeUndefined();
    }
  });

  it("says a lifetime in the largest unit that is exact", () => {
    expect(lifetimeText(30 * DAY)).toBe("30 days");
    expect(lifetimeText(HOUR)).toBe("1 hour");
    expect(lifetimeText(90 * MINUTE)).toBe("90 minutes");
    expect(lifetimeText(1500)).toBe("2 s");
    expect(lifetimeText(0)).toBe("–");
    expect(lifetimeText(undefined)).toBe("–");
  });
});

describe("a token's expiry", () => {
  const now = Date.parse("2026-11-28T12:00:00Z");

  it("says how long is left in the largest whole unit", () => {
    expect(expiryText({ expiresAt: "2026-12-01T13:00:00Z", expired: false }, now)).toBe("in 3 days");
    expect(expiryText({ expiresAt: "2026-11-29T11:59:00Z" }, now)).toBe("in 23 hours");
    expect(expiryText({ expiresAt: "2026-11-28T13:00:00Z" }, now)).toBe("in 1 hour");
    expect(expiryText({ expiresAt: "2026-11-28T12:05:30Z" }, now)).toBe("in 5 minutes");
    expect(expiryText({ expiresAt: "2026-11-28T12:00:30Z" }, now)).toBe("in under a minute");
  });

  it("says never for none and expired once past or when the API says so", () => {
    expect(expiryText({ expiresAt: "" }, now)).toBe("Never");
    expect(expiryText({}, now)).toBe("Never");
    expect(expiryText({ expiresAt: "2026-11-28T11:00:00Z" }, now)).toBe("Expired");
    expect(expiryText({ expiresAt: "2026-12-28T11:00:00Z", expired: true }, now)).toBe("Expired");
    expect(expiryText({ expiresAt: "not a time" }, now)).toBe("Expired");
  });

  it("shows a time to the minute in UTC", () => {
    expect(whenText("2026-11-28T21:40:59+01:00")).toBe("2026-11-28 20:40 UTC");
    expect(whenText("")).toBe("–");
    expect(whenText("soon")).toBe("–");
  });
});

describe("the token form", () => {
  it("sends only what was given", () => {
    expect(tokenBody({ description: " ", lifetime: "", clusterId: "" }, null)).toEqual({ type: "token" });
    expect(tokenBody({ description: " ci ", lifetime: "8h", clusterId: "c-abcde" }, 8 * HOUR)).toEqual({
      type: "token",
      description: "ci",
      ttl: 8 * HOUR,
      clusterId: "c-abcde",
    });
    expect(tokenBody({ description: "", lifetime: "0m", clusterId: "" }, 0)).toEqual({ type: "token", ttl: 0 });
  });

  it("puts the API's refusals at the input they name", () => {
    expect(tokenErrorInput("ttl")).toBe("token-lifetime");
    expect(tokenErrorInput("ttlMillis")).toBe("token-lifetime");
    expect(tokenErrorInput("clusterId")).toBe("token-cluster");
    expect(tokenErrorInput("description")).toBe("token-description");
    expect(tokenErrorInput("")).toBeNull();
    expect(tokenErrorInput("token")).toBeNull();
  });
});

describe("the user form", () => {
  it("always sends the username and password, even empty, for the API to judge", () => {
    expect(userBody({ username: "", password: "", name: "" })).toEqual({ type: "user", username: "", password: "" });
    expect(userBody({ username: " ana ", password: " secret pass ", name: " Ana " })).toEqual({
      type: "user",
      username: "ana",
      password: " secret pass ",
      name: "Ana",
    });
  });

  it("puts the API's refusals at the input they name", () => {
    expect(userErrorInput("username")).toBe("user-username");
    expect(userErrorInput("password")).toBe("user-password");
    expect(userErrorInput("name")).toBe("user-name");
    expect(userErrorInput("enabled")).toBeNull();
  });

  it("names how a user signs in", () => {
    expect(providerOf({ id: "u-admin", principalIds: ["local://u-admin"] })).toBe("local");
    expect(providerOf({ id: "u-x", principalIds: ["keycloakoidc_user://abc"] })).toBe("keycloakoidc");
    expect(providerOf({ id: "u-y", principalIds: ["github_user://42"] })).toBe("github");
    expect(providerOf({ id: "u-z" })).toBe("local");
  });
});
