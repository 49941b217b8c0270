// The one way the console talks to corral: the public API, as any client would, with the
// session cookie the sign-in set. Writes echo the CSRF cookie in the X-API-CSRF header, as the
// API asks of every cookie-authenticated write.

export const CSRF_COOKIE = "CSRF";
export const CSRF_HEADER = "X-API-CSRF";
const TOKEN_GONE = "token not found";

/** An answer of the API that is not a success, with the API's own words. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly fieldName: string;

  constructor(status: number, code: string, message: string, fieldName = "") {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.fieldName = fieldName;
  }

  /** Whether the credential is no good any more (expired, idle, logged out, deleted, its user
   * disabled): sign in again. The API's answers for these (docs/api.md, "Authentication"): 401,
   * 410, 422 InvalidToken, and 404 "token not found" for a token that is gone. */
  get sessionEnded(): boolean {
    if (this.status === 401 || this.status === 410) return true;
    if (this.status === 422) return this.code === "InvalidToken";
    return this.status === 404 && this.message === TOKEN_GONE;
  }
}

/** The value of one cookie of `cookies` (document.cookie's format); "" when absent. */
export function cookieValue(cookies: string, name: string): string {
  for (const part of cookies.split(";")) {
    const [key, ...value] = part.trim().split("=");
    if (key === name) return decodeURIComponent(value.join("="));
  }
  return "";
}

/** The error an answer carries: the /v3 error body when it is one, else its status line. */
export async function errorOf(response: Response): Promise<ApiError> {
  const fallback = `${response.status} ${response.statusText}`.trim();
  let body: unknown = null;
  try {
    body = await response.json();
  } catch {
    // Not JSON (a proxy's page, an empty body): the status line is all there is.
  }
  if (typeof body === "object" && body !== null) {
    const { code, message, fieldName } = body as Record<string, unknown>;
    return new ApiError(
      response.status,
      typeof code === "string" ? code : "",
      typeof message === "string" && message ? message : fallback,
      typeof fieldName === "string" ? fieldName : "",
    );
  }
  return new ApiError(response.status, "", fallback);
}

type Listener = () => void;
const ended = new Set<Listener>();

/** Run `listener` when any call finds the session over; returns the unsubscribe. */
export function onSessionEnded(listener: Listener): () => void {
  ended.add(listener);
  return () => ended.delete(listener);
}

export function sessionEnded(): void {
  for (const listener of ended) listener();
}

const SAFE = new Set(["GET", "HEAD"]);

/** One call of the API; the parsed JSON body of a success (null for an empty one). */
export async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  if (!SAFE.has(method)) headers[CSRF_HEADER] = cookieValue(document.cookie, CSRF_COOKIE);
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? null : JSON.stringify(body),
  });
  if (!response.ok) {
    const error = await errorOf(response);
    if (error.sessionEnded && !path.startsWith("/v3-public/")) sessionEnded();
    throw error;
  }
  const text = await response.text();
  return (text ? JSON.parse(text) : null) as T;
}

export interface Collection<T> {
  data: T[];
  pagination?: { next?: string; total?: number };
  // What the caller may create here, by type: the address to POST to.
  createTypes?: Record<string, string>;
}

export interface Listing<T> {
  data: T[];
  createTypes: Record<string, string>;
}

/** Every resource of a collection, page after page, and what the caller may create in it. */
export async function listing<T>(path: string): Promise<Listing<T>> {
  const found: T[] = [];
  let createTypes: Record<string, string> | undefined;
  let next: string | undefined = path;
  while (next) {
    const page: Collection<T> = await call<Collection<T>>("GET", next);
    found.push(...page.data);
    createTypes ??= page.createTypes ?? {};
    // The API's links are absolute (its external URL): follow only their path and query, so a
    // console reached at another address still talks to the server that served it.
    next = page.pagination?.next ? pathOf(page.pagination.next) : undefined;
  }
  return { data: found, createTypes: createTypes ?? {} };
}

/** Every resource of a collection, page after page. */
export async function all<T>(path: string): Promise<T[]> {
  const listed: Listing<T> = await listing<T>(path);
  return listed.data;
}

export function pathOf(link: string): string {
  const url = new URL(link, window.location.href);
  return url.pathname + url.search;
}
