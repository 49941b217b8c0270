// Sign-in providers as the API shows them: the ones anyone may sign in through
// (`/v3-public/authProviders`), where their buttons lead, and an OpenID Connect
// configuration's form (`/v3/authConfigs`, administrators only). Pure: the pages and their
// tests share it.

import type { Resource } from "./resources";

/** One entry of `GET /v3-public/authProviders`. */
export interface AuthProvider {
  id: string;
  type?: string;
  // corral's own login address of the provider (absent for `local`, which takes a password).
  redirectUrl?: string;
}

/** One of `GET /v3/authConfigs`: `local`, `oidc`, `keycloakoidc`, `github`. */
export interface AuthConfig extends Resource {
  name?: string;
  enabled?: boolean;
  issuer?: string;
  clientId?: string;
  scope?: string;
  groupsClaim?: string;
  hostname?: string;
  redirectUri?: string;
}

// The buttons' order and names; a provider the console does not know gets no button.
export const PROVIDER_NAMES: Record<string, string> = {
  local: "Local users",
  oidc: "OpenID Connect",
  keycloakoidc: "Keycloak",
  github: "GitHub",
};
const REDIRECTED = ["oidc", "keycloakoidc", "github"];
export const OIDC_PROVIDERS = new Set(["oidc", "keycloakoidc"]);

/** The providers a browser signs in through by redirect, in a fixed order. */
export function redirectProviders(listed: AuthProvider[]): AuthProvider[] {
  const byId = new Map(listed.map((p) => [p.id, p]));
  return REDIRECTED.flatMap((id) => {
    const found = byId.get(id);
    return found?.redirectUrl ? [found] : [];
  });
}

// The API takes a return path of at most 256 characters (docs/api.md, "Sign-in through
// OpenID Connect"); a longer page address returns to the clusters list.
const MAX_RETURN = 256;

/** Where the console should land once the provider sends the browser back: this page. */
export function returnPath(hash: string): string {
  const path = `/${hash.startsWith("#/") ? hash : ""}`;
  return path.length <= MAX_RETURN && /^[\x21-\x5b\x5d-\x7e]+$/.test(path) ? path : "/";
}

/** The address a provider's button opens: corral's login for it (the API's `redirectUrl`,
 * its external URL, where the provider sends the browser back), a cookie session, and back
 * to `returnTo`. */
export function loginHref(provider: AuthProvider, returnTo: string): string {
  const url = new URL(provider.redirectUrl ?? "", window.location.href);
  url.searchParams.set("responseType", "cookie");
  url.searchParams.set("returnTo", returnTo);
  return url.toString();
}

// Why a provider's sign-in did not complete, by the word the API's callback sends the browser
// back with (`/?signInError=<word>`, docs/api.md, "Sign-in through OpenID Connect"). Only
// these words are shown, each as its own sentence: nothing of the address is put in the page.
export const SIGN_IN_REFUSALS: Record<string, string> = {
  cancelled: "The sign-in was cancelled at the provider, or the provider denied it.",
  provider: "The provider refused the sign-in.",
  state: "The sign-in took too long or was not started in this browser. Try again.",
  code: "The provider's answer could not be verified. Try again.",
  disabled: "That sign-in provider is not enabled.",
  user: "corral does not let this user sign in: they are disabled or not allowed.",
  unavailable: "The sign-in provider cannot be reached. Try again shortly.",
  throttled: "Too many failed sign-ins. Wait a minute and try again.",
  failed: "The sign-in did not complete. Try again.",
};

/** The message for the refusal a location's query names, or "" when it names none; a word
 * the console does not know reads as the general failure. */
export function signInRefusal(search: string): string {
  const reason = new URLSearchParams(search).get("signInError");
  if (reason === null) return "";
  return Object.hasOwn(SIGN_IN_REFUSALS, reason) ? (SIGN_IN_REFUSALS[reason] ?? "") : (SIGN_IN_REFUSALS.failed ?? "");
}

export function providerName(id: string): string {
  return PROVIDER_NAMES[id] ?? id;
}

// The form of an OpenID Connect provider: its fields by the names the API gives them.
export const OIDC_FIELDS = ["issuer", "clientId", "clientSecret", "scope", "groupsClaim"] as const;
export type OidcField = (typeof OIDC_FIELDS)[number];
export type OidcForm = Record<OidcField, string>;

export const OIDC_LABELS: Record<OidcField, string> = {
  issuer: "Issuer",
  clientId: "Client ID",
  clientSecret: "Client secret",
  scope: "Scopes",
  groupsClaim: "Group claim",
};

/** The form as the stored configuration fills it; the client secret is never shown, so it
 * starts empty. */
export function oidcForm(config: AuthConfig): OidcForm {
  return {
    issuer: config.issuer ?? "",
    clientId: config.clientId ?? "",
    clientSecret: "",
    scope: config.scope ?? "",
    groupsClaim: config.groupsClaim ?? "",
  };
}

/** What the form sends: every field as typed, but the client secret only when one was typed
 * (empty keeps the stored one). The API judges the values. */
export function oidcBody(form: OidcForm): Partial<OidcForm> {
  const { clientSecret, ...rest } = form;
  return clientSecret ? { ...rest, clientSecret } : rest;
}

export function oidcInput(provider: string, field: string): string {
  return `${provider}-${field}`;
}

/** The input a refusal's `fieldName` belongs to, or null for one to show above the form.
 * testAndApply's body nests the fields under `oidcConfig`. */
export function oidcErrorInput(provider: string, fieldName: string): string | null {
  const field = fieldName.replace(/^oidcConfig\./, "");
  return (OIDC_FIELDS as readonly string[]).includes(field) ? oidcInput(provider, field) : null;
}
