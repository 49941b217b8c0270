import { useState } from "preact/hooks";
import type { TargetedSubmitEvent } from "preact";

import { ApiError } from "./api";
import { signIn } from "./session";

interface Props {
  // Why the sign-in page is shown when it is not the first visit (the session ended).
  notice: string;
  onSignedIn: () => void;
}

export function SignIn({ notice, onSignedIn }: Props) {
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");

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
      </form>
    </main>
  );
}
