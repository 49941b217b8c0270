import { describe, expect, it } from "vitest";

import {
  loginHref,
  oidcBody,
  oidcErrorInput,
  oidcForm,
  oidcInput,
  redirectProviders,
  returnPath,
  SIGN_IN_REFUSALS,
  signInRefusal,
} from "./providers";

const BASE = "https://corral.example:8443";

describe("sign-in providers", () => {
  it("offers a button for each provider signed in by redirect, in a fixed order", () => {
    const listed = [
      { id: "local", type: "localProvider" },
      { id: "github", redirectUrl: `${BASE}/v3-public/githubProviders/github/login` },
      { id: "saml", redirectUrl: `${BASE}/elsewhere` },
      { id: "oidc", redirectUrl: `${BASE}/v3-public/oidcProviders/oidc/login` },
      { id: "keycloakoidc" },
    ];
    expect(redirectProviders(listed).map((p) => p.id)).toEqual(["oidc", "github"]);
    expect(redirectProviders([{ id: "local" }])).toEqual([]);
  });

  it("sends the browser to corral's login for a cookie session and back to this page", () => {
    const href = loginHref({ id: "oidc", redirectUrl: `${BASE}/v3-public/oidcProviders/oidc/login` }, "/#/clusters");
    const url = new URL(href);
    expect(url.origin + url.pathname).toBe(`${BASE}/v3-public/oidcProviders/oidc/login`);
    expect(url.searchParams.get("responseType")).toBe("cookie");
    expect(url.searchParams.get("returnTo")).toBe("/#/clusters");
  });

  it("returns to the page's own address only when the API takes it", () => {
    expect(returnPath("")).toBe("/");
    expect(returnPath("#/clusters/c-abcde")).toBe("/#/clusters/c-abcde");
    expect(returnPath("#/projects/c-a%3Ap-b/workloads")).toBe("/#/projects/c-a%3Ap-b/workloads");
    // Not a page of the console, too long, or with what the API refuses: the list.
    expect(returnPath("#x")).toBe("/");
    expect(returnPath(`#/${"a".repeat(260)}`)).toBe("/");
    expect(returnPath("#/a b")).toBe("/");
    expect(returnPath("#/a\\b")).toBe("/");
    expect(returnPath(`#/${"a".repeat(253)}`)).toHaveLength(256);
  });
});

describe("an OpenID Connect provider's form", () => {
  const stored = {
    id: "oidc",
    issuer: "https://id.example/realms/a",
    clientId: "corral",
    scope: "openid profile email",
    groupsClaim: "groups",
  };

  it("starts from the stored configuration with the secret empty", () => {
    expect(oidcForm(stored)).toEqual({
      issuer: "https://id.example/realms/a",
      clientId: "corral",
      clientSecret: "",
      scope: "openid profile email",
      groupsClaim: "groups",
    });
    expect(oidcForm({ id: "keycloakoidc" }).issuer).toBe("");
  });

  it("sends the secret only when one was typed, and the rest as typed", () => {
    const form = { ...oidcForm(stored), issuer: " not a url " };
    expect(oidcBody(form)).toEqual({
      issuer: " not a url ",
      clientId: "corral",
      scope: "openid profile email",
      groupsClaim: "groups",
    });
    expect(oidcBody({ ...form, clientSecret: "s3cret" }).clientSecret).toBe("s3cret");
  });

  it("puts a refusal at the input its field names, nested or not, else above the form", () => {
    expect(oidcErrorInput("oidc", "issuer")).toBe(oidcInput("oidc", "issuer"));
    expect(oidcErrorInput("keycloakoidc", "oidcConfig.clientSecret")).toBe("keycloakoidc-clientSecret");
    expect(oidcErrorInput("oidc", "groupsClaim")).toBe("oidc-groupsClaim");
    expect(oidcErrorInput("oidc", "hostname")).toBeNull();
    expect(oidcErrorInput("oidc", "")).toBeNull();
  });

  it("tells why a provider's sign-in did not complete by the API's word alone", () => {
    expect(signInRefusal("")).toBe("");
    expect(signInRefusal("?other=1")).toBe("");
    expect(signInRefusal("?signInError=cancelled")).toBe(SIGN_IN_REFUSALS.cancelled);
    expect(signInRefusal("?signInError=state")).toMatch(/took too long/);
    expect(signInRefusal("?signInError=user")).toMatch(/does not let this user/);
    // Every word the API sends has its own sentence (core/corral/core/auth/loginstate.py).
    const words = ["cancelled", "provider", "state", "code", "disabled", "user", "unavailable", "throttled", "failed"];
    expect(Object.keys(SIGN_IN_REFUSALS).sort()).toEqual([...words].sort());
    // Anything else, markup included, is the general failure and never shown as sent.
    for (const odd of ["?signInError=%3Cb%3Ehi%3C%2Fb%3E", "?signInError=", "?signInError=constructor", "?signInError=__proto__"]) {
      expect(signInRefusal(odd)).toBe(SIGN_IN_REFUSALS.failed);
    }
  });
});
