import { useEffect, useState } from "preact/hooks";
import type { TargetedSubmitEvent } from "preact";

import { ApiError } from "./api";
import {
  loginHref,
  providerName,
  redirectProviders,
  returnPath,
  signInRefusal,
  type AuthProvider,
} from "./providers";
import { signInProviders, signIn } from "./session";

interface Props {
  // Why the sign-in page is shown when it is not the first visit (the session ended).
  notice: string;
  onSignedIn: () => void;
}

export function SignIn({ notice, onSignedIn }: Props) {
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [busy, setBusy] = useState(false);
  // Why a provider's sign-in just failed, when the API sent the browser back here with it.
  const [error, setError] = useState(() => signInRefusal(window.location.search));
  const [providers, setProviders] = useState<AuthProvider[]>([]);
  // The page asked for (a link followed while signed out): where a provider's sign-in returns.
  const [hash, setHash] = useState(window.location.hash);

  useEffect(() => {
    // Shown once: dropped from the address so a reload or a copied link does not repeat it.
    if (signInRefusal(window.location.search)) {
      window.history.replaceState(null, "", window.location.pathname + window.location.hash);
    }
    // Without the list the local form still works: a failure here only hides the buttons.
    signInProviders().then(
      (listed) => {
        setProviders(redirectProviders(listed));
      },
      () => undefined,
    );
    const follow = () => {
      setHash(window.location.hash);
    };
    window.addEventListener("hashchange", follow);
    return () => {
      window.removeEventListener("hashchange", follow);
    };
  }, []);

  const submit = async (event: TargetedSubmitEvent<HTMLFormElement>) => {
    event.preventDefault();
    setBusy(true);
    setError("");
    try {
      await signIn(username, password);
      onSignedIn();
    } catch (failure) {
      setError(failure instanceof ApiError ? failure.message : "corral cannot be reached");
      setBusy(false);
    }
  };

  return (
    <main class="signin" id="main">
      <form class="card" onSubmit={(event) => void submit(event)} aria-labelledby="signin-title">
        <h1 id="signin-title">Sign in to corral</h1>
        {notice && (
          <p class="notice" role="status">
            {notice}
          </p>
        )}
        <label for="username">Username</label>
        <input
          id="username"
          name="username"
          autoComplete="username"
          required
          value={username}
          onInput={(e) => {
            setUsername(e.currentTarget.value);
          }}
        />
        <label for="password">Password</label>
        <input
          id="password"
          name="password"
          type="password"
          autoComplete="current-password"
          required
          value={password}
          onInput={(e) => {
            setPassword(e.currentTarget.value);
          }}
        />
        <p class="error" role="alert" id="signin-error">
          {error}
        </p>
        <button type="submit" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
        {providers.length > 0 && (
          <div class="providers" role="group" aria-label="Other ways to sign in">
            <p class="or">or</p>
            {providers.map((provider) => (
              // A navigation, not a fetch: the provider's page takes over until it sends the
              // browser back to corral's callback, which sets the session and returns here.
              <a
                key={provider.id}
                class="button ghost"
                href={loginHref(provider, returnPath(hash))}
                data-provider={provider.id}
              >
                Sign in with {providerName(provider.id)}
              </a>
            ))}
          </div>
        )}
      </form>
    </main>
  );
}
