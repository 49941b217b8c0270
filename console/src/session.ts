// Signing in and out: the local provider's password, the providers a browser is sent to, and
// the API's cookie session either way, as for any browser.

import { ApiError, all, call } from "./api";
import type { AuthProvider } from "./providers";

export interface User {
  id: string;
  username: string;
  name: string;
}

/** Sign in; the API sets the session and CSRF cookies. Throws the API's refusal. */
export async function signIn(username: string, password: string): Promise<void> {
  await call("POST", "/v3-public/localProviders/local?action=login", {
    username,
    password,
    responseType: "cookie",
  });
}

/** The providers anyone may sign in through (the public list Rancher's clients read). */
export async function signInProviders(): Promise<AuthProvider[]> {
  return all<AuthProvider>("/v3-public/authProviders");
}

/** Who the session belongs to; null when there is no session (or it is over). */
export async function whoAmI(): Promise<User | null> {
  try {
    const [me] = await all<User>("/v3/users?me=true");
    return me ?? null;
  } catch (error) {
    if (error instanceof ApiError && error.sessionEnded) return null;
    throw error;
  }
}

/** End the session: the API deletes its token and clears both cookies. */
export async function signOut(): Promise<void> {
  await call("POST", "/v3/tokens?action=logout");
}
