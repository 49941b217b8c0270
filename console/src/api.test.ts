import { afterEach, describe, expect, it, vi } from "vitest";

import { ApiError, call, cookieValue, errorOf, onSessionEnded } from "./api";

describe("cookieValue", () => {
  it("finds a cookie among others, decoded", () => {
    expect(cookieValue("a=1; CSRF=ab%3Dcd; b=2", "CSRF")).toBe("ab=cd");
  });
  it("is empty for a cookie that is not there, or a name only prefixing another", () => {
    expect(cookieValue("CSRFX=1", "CSRF")).toBe("");
    expect(cookieValue("", "CSRF")).toBe("");
  });
});

describe("errorOf", () => {
  it("reads the /v3 error body", async () => {
    const body = { type: "error", status: 422, code: "MissingRequired", message: "name is required", fieldName: "name" };
    const error = await errorOf(new Response(JSON.stringify(body), { status: 422 }));
    expect([error.status, error.code, error.message, error.fieldName]).toEqual([422, "MissingRequired", "name is required", "name"]);
  });
  it("falls back to the status line for a body that is not JSON", async () => {
    const error = await errorOf(new Response("<html>", { status: 502, statusText: "Bad Gateway" }));
    expect(error.message).toBe("502 Bad Gateway");
    expect(error.code).toBe("");
  });
  it("says the credential's failures end the session, and other refusals do not", () => {
    expect(new ApiError(401, "Unauthorized", "must authenticate").sessionEnded).toBe(true);
    expect(new ApiError(410, "Gone", "must authenticate, expired").sessionEnded).toBe(true);
    expect(new ApiError(422, "InvalidToken", "invalid auth token value").sessionEnded).toBe(true);
    expect(new ApiError(404, "NotFound", "token not found").sessionEnded).toBe(true);
    expect(new ApiError(404, "NotFound", "cluster c-1 not found").sessionEnded).toBe(false);
    expect(new ApiError(422, "MissingRequired", "name is required").sessionEnded).toBe(false);
    expect(new ApiError(403, "PermissionDenied", "no").sessionEnded).toBe(false);
  });
});

describe("call", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    document.cookie = "CSRF=; max-age=0";
  });

  it("echoes the CSRF cookie on a write, and not on a read", async () => {
    document.cookie = "CSRF=0123abcd";
    const fetched = vi.fn(() => Promise.resolve(new Response("{}", { status: 200 })));
    vi.stubGlobal("fetch", fetched);
    await call("POST", "/v3/tokens?action=logout");
    await call("GET", "/v3/clusters");
    const headers = fetched.mock.calls.map((args: unknown[]) => (args[1] as RequestInit).headers as Record<string, string>);
    expect(headers[0]?.["X-API-CSRF"]).toBe("0123abcd");
    expect(headers[1]?.["X-API-CSRF"]).toBeUndefined();
  });

  it("tells the listeners when the API says the session is over, not for a sign-in", async () => {
    vi.stubGlobal("fetch", vi.fn(() => Promise.resolve(new Response('{"code":"Unauthorized","message":"must authenticate"}', { status: 401 }))));
    const heard = vi.fn();
    const stop = onSessionEnded(heard);
    await expect(call("POST", "/v3-public/localProviders/local?action=login", {})).rejects.toThrow("must authenticate");
    expect(heard).not.toHaveBeenCalled();
    await expect(call("GET", "/v3/clusters")).rejects.toBeInstanceOf(ApiError);
    expect(heard).toHaveBeenCalledOnce();
    stop();
  });
});
