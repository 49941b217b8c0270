// Tokens, users, global role bindings and settings as /v3 takes and shows them: a lifetime
// typed as `8h` and back, when a token expires in words, the create forms' bodies and where
// the API's field errors go. Pure: the Access pages and their tests share it.

import type { Resource } from "./resources";

export interface V3Token extends Resource {
  name?: string;
  description?: string;
  current?: boolean;
  expired?: boolean;
  expiresAt?: string;
  ttl?: number;
  clusterName?: string;
  created?: string;
  // `<name>:<key>`, in the answer to the token's creation only.
  token?: string;
}

export interface V3User extends Resource {
  username?: string;
  name?: string;
  description?: string;
  enabled?: boolean;
  principalIds?: string[];
  me?: boolean;
}

export interface V3GlobalRoleBinding extends Resource {
  globalRoleId?: string;
  userId?: string;
}

export interface V3Setting extends Resource {
  name?: string;
  value?: string;
  default?: string;
  customized?: boolean;
  description?: string;
}

// The global roles a binding grants (docs/api.md, "Global role bindings").
export const GLOBAL_ROLES = ["user", "admin"] as const;

const MINUTE = 60_000;
const UNITS: Record<string, number> = { m: MINUTE, h: 60 * MINUTE, d: 24 * 60 * MINUTE };
// Seven digits keep even days well inside a double's whole numbers; what the API allows
// (up to 100 years) it says itself.
const LIFETIME = /^(\d{1,7})\s*([mhd])$/;

export const LIFETIME_HINT = "A whole number of minutes, hours or days: 90m, 8h, 30d; empty for the longest allowed";

/** A lifetime as typed (`90m`, `8h`, `30d`) in milliseconds; null for empty (the longest the
 * API allows); undefined for what is not one. */
export function parseLifetime(typed: string): number | null | undefined {
  const text = typed.trim().toLowerCase();
  if (!text) return null;
  const found = LIFETIME.exec(text);
  if (!found) return undefined;
  const [, count = "", unit = ""] = found;
  return Number(count) * (UNITS[unit] ?? 0);
}

/** A lifetime in milliseconds in the largest unit that says it exactly: `8 hours`. */
export function lifetimeText(ms: number | undefined): string {
  if (!ms) return "–";
  for (const [unit, size] of [["day", UNITS.d], ["hour", UNITS.h], ["minute", UNITS.m]] as const) {
    if (size && ms % size === 0) {
      const count = ms / size;
      return `${String(count)} ${unit}${count === 1 ? "" : "s"}`;
    }
  }
  return `${String(Math.round(ms / 1000))} s`;
}

/** When a token stops working, as its row says it: never, expired, or how long from `now`. */
export function expiryText(token: Pick<V3Token, "expiresAt" | "expired">, now: number): string {
  if (!token.expiresAt) return "Never";
  const at = Date.parse(token.expiresAt);
  if (token.expired || Number.isNaN(at) || at <= now) return "Expired";
  const left = at - now;
  for (const [unit, size] of [["day", UNITS.d], ["hour", UNITS.h], ["minute", UNITS.m]] as const) {
    if (size && left >= size) {
      const count = Math.floor(left / size);
      return `in ${String(count)} ${unit}${count === 1 ? "" : "s"}`;
    }
  }
  return "in under a minute";
}

/** An RFC 3339 time in a line, to the minute and in UTC, so it reads the same everywhere. */
export function whenText(iso: string | undefined): string {
  const at = iso ? Date.parse(iso) : NaN;
  if (Number.isNaN(at)) return "–";
  return `${new Date(at).toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

export interface TokenForm {
  description: string;
  lifetime: string;
  clusterId: string;
}

/** The body of `POST /v3/tokens`: only what was given; a lifetime that is none is left to
 * the caller to refuse (`parseLifetime` gives undefined). */
export function tokenBody(form: TokenForm, ttl: number | null): Record<string, unknown> {
  const body: Record<string, unknown> = { type: "token" };
  const description = form.description.trim();
  if (description) body.description = description;
  if (ttl !== null) body.ttl = ttl;
  if (form.clusterId) body.clusterId = form.clusterId;
  return body;
}

/** The token form's input an error of the API names; null for one above the form. */
export function tokenErrorInput(fieldName: string): string | null {
  switch (fieldName) {
    case "ttl":
    case "ttlMillis":
      return "token-lifetime";
    case "clusterId":
      return "token-cluster";
    case "description":
      return "token-description";
    default:
      return null;
  }
}

export interface UserForm {
  username: string;
  password: string;
  name: string;
}

/** The body of `POST /v3/users`: the username and password as typed, even empty, so the API
 * judges them and names the field it refuses. */
export function userBody(form: UserForm): Record<string, unknown> {
  const body: Record<string, unknown> = { type: "user", username: form.username.trim(), password: form.password };
  const name = form.name.trim();
  if (name) body.name = name;
  return body;
}

/** The user form's input an error of the API names; null for one above the form. */
export function userErrorInput(fieldName: string): string | null {
  switch (fieldName) {
    case "username":
      return "user-username";
    case "password":
      return "user-password";
    case "name":
      return "user-name";
    default:
      return null;
  }
}

/** How a user signs in: `local` for a password, else the provider of their first principal. */
export function providerOf(user: V3User): string {
  const principal = user.principalIds?.[0] ?? "";
  const provider = principal.split("_user://")[0] ?? "";
  return principal.includes("_user://") ? provider : "local";
}
