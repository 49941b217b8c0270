import { useEffect, useRef, useState } from "preact/hooks";
import type { TargetedSubmitEvent } from "preact";

import {
  LIFETIME_HINT,
  expiryText,
  lifetimeText,
  parseLifetime,
  tokenBody,
  tokenErrorInput,
  whenText,
  type TokenForm,
  type V3Token,
} from "./access";
import { ApiError, all, call, listing, pathOf } from "./api";
import type { V3Cluster } from "./clusters";
import { DeleteDialog } from "./DeleteDialog";
import { messageOf } from "./resources";

/** The caller's tokens (the API lists no one else's): made with a lifetime and, if wanted, one
 * cluster as their scope; the key shown once, in a dialog; deleted after a confirmation.
 * Tokens are not among the subscription's families: the list is read again after each change. */
export function Tokens() {
  const [tokens, setTokens] = useState<V3Token[] | null>(null);
  const [mayCreate, setMayCreate] = useState(false);
  const [error, setError] = useState("");
  const [creating, setCreating] = useState(false);
  const [made, setMade] = useState<V3Token | null>(null);
  const [deleting, setDeleting] = useState<V3Token | null>(null);

  const load = async () => {
    try {
      const listed = await listing<V3Token>("/v3/tokens");
      setTokens(listed.data.sort((a, b) => (b.created ?? "").localeCompare(a.created ?? "")));
      setMayCreate(listed.createTypes.token !== undefined);
      setError("");
    } catch (failure) {
      if (failure instanceof ApiError && failure.sessionEnded) return;
      setError(messageOf(failure));
    }
  };
  useEffect(() => {
    void load();
  }, []);

  const now = Date.now();
  return (
    <>
      <div class="toolbar">
        <span class="count">Tokens are not live: the list is read again after each change.</span>
        <span class="spacer-flex" />
        {mayCreate && !creating && (
          <button type="button" onClick={() => { setCreating(true); }}>
            Create token
          </button>
        )}
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {creating && (
        <CreateToken
          onCreated={(token) => {
            setCreating(false);
            setMade(token);
            void load();
          }}
          onCancel={() => { setCreating(false); }}
        />
      )}
      {tokens === null ? (
        <p role="status">Loading…</p>
      ) : tokens.length === 0 ? (
        <p class="empty">No tokens.</p>
      ) : (
        <table class="grid" data-testid="tokens">
          <thead>
            <tr>
              <th scope="col">Token</th>
              <th scope="col">Scope</th>
              <th scope="col">Expires</th>
              <th scope="col">Created</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {tokens.map((t) => (
              <tr key={t.id} data-token={t.id}>
                <th scope="row">
                  {t.description || t.id}
                  {(t.description || t.current) && (
                    <small class="muted">
                      {[t.description ? t.id : "", t.current ? "this session" : ""].filter(Boolean).join(", ")}
                    </small>
                  )}
                </th>
                <td>{t.clusterName ? `Cluster ${t.clusterName}` : "Not scoped"}</td>
                <td title={t.expiresAt ? `${whenText(t.expiresAt)}: a lifetime of ${lifetimeText(t.ttl)}` : undefined}>
                  {expiryText(t, now)}
                </td>
                <td>{whenText(t.created)}</td>
                <td class="actions">
                  {t.links?.remove !== undefined && (
                    <button type="button" class="ghost" aria-label={`Delete ${t.id}`}
                      onClick={() => { setDeleting(t); }}>
                      Delete
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {made?.token && (
        <KeyDialog
          token={made}
          onClose={() => { setMade(null); }}
        />
      )}
      {deleting?.links?.remove !== undefined && (
        <DeleteDialog
          what="token"
          name={deleting.id}
          remove={async () => {
            await call("DELETE", pathOf(deleting.links?.remove ?? ""));
            await load();
          }}
          onClose={() => { setDeleting(null); }}
        />
      )}
    </>
  );
}

function CreateToken({ onCreated, onCancel }: { onCreated: (token: V3Token) => void; onCancel: () => void }) {
  const [form, setForm] = useState<TokenForm>({ description: "", lifetime: "", clusterId: "" });
  const [clusters, setClusters] = useState<V3Cluster[]>([]);
  const [busy, setBusy] = useState(false);
  // A refusal at the input it names, else above the form.
  const [failure, setFailure] = useState<{ input: string | null; message: string } | null>(null);

  useEffect(() => {
    all<V3Cluster>("/v3/clusters").then(setClusters, (failed: unknown) => {
      setFailure({ input: null, message: messageOf(failed) });
    });
  }, []);

  const submit = async (event: TargetedSubmitEvent<HTMLFormElement>) => {
    event.preventDefault();
    const ttl = parseLifetime(form.lifetime);
    if (ttl === undefined) {
      setFailure({ input: "token-lifetime", message: LIFETIME_HINT });
      document.getElementById("token-lifetime")?.focus();
      return;
    }
    setBusy(true);
    setFailure(null);
    try {
      onCreated(await call<V3Token>("POST", "/v3/tokens", tokenBody(form, ttl)));
    } catch (refused) {
      const input = refused instanceof ApiError ? tokenErrorInput(refused.fieldName) : null;
      setFailure({ input, message: messageOf(refused) });
      if (input) document.getElementById(input)?.focus();
    } finally {
      setBusy(false);
    }
  };

  const wrong = (id: string) => failure?.input === id;
  const errorAt = (id: string) =>
    wrong(id) && (
      <span class="error field-error" id={`${id}-error`}>
        {failure?.message}
      </span>
    );
  return (
    <form class="panel" aria-labelledby="create-token-title" onSubmit={(event) => void submit(event)} noValidate>
      <h2 id="create-token-title">Create a token</h2>
      {failure && (
        <p class={failure.input ? "visually-hidden" : "error"} role="alert">
          {failure.message}
        </p>
      )}
      <div class="field">
        <label for="token-description">Description</label>
        <input id="token-description" value={form.description} aria-invalid={wrong("token-description")}
          aria-describedby={wrong("token-description") ? "token-description-error" : undefined}
          onInput={(e) => { setForm({ ...form, description: e.currentTarget.value }); }} />
        {errorAt("token-description")}
      </div>
      <div class="field">
        <label for="token-lifetime">Lifetime</label>
        <input id="token-lifetime" placeholder="8h" value={form.lifetime} aria-invalid={wrong("token-lifetime")}
          aria-describedby={wrong("token-lifetime") ? "token-lifetime-error" : "token-lifetime-hint"}
          onInput={(e) => { setForm({ ...form, lifetime: e.currentTarget.value }); }} />
        <small class="muted" id="token-lifetime-hint">{LIFETIME_HINT}</small>
        {errorAt("token-lifetime")}
      </div>
      <div class="field">
        <label for="token-cluster">Cluster scope</label>
        <select id="token-cluster" value={form.clusterId} aria-invalid={wrong("token-cluster")}
          aria-describedby={wrong("token-cluster") ? "token-cluster-error" : undefined}
          onChange={(e) => { setForm({ ...form, clusterId: e.currentTarget.value }); }}>
          <option value="">None: the token acts as you everywhere</option>
          {clusters.map((c) => (
            <option key={c.id} value={c.id}>
              {c.name && c.name !== c.id ? `${c.name} (${c.id})` : c.id}
            </option>
          ))}
        </select>
        {errorAt("token-cluster")}
      </div>
      <div class="buttons">
        <button type="button" class="ghost" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" disabled={busy}>
          {busy ? "Creating…" : "Create"}
        </button>
      </div>
    </form>
  );
}

/** The new token's key, shown this once: the API never answers it again. Closing the dialog
 * drops it from the page. */
function KeyDialog({ token, onClose }: { token: V3Token; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [copied, setCopied] = useState("");
  const key = token.token ?? "";

  useEffect(() => {
    dialog.current?.showModal();
  }, []);

  const copy = async () => {
    try {
      await navigator.clipboard.writeText(key);
      setCopied("Copied.");
    } catch (failure) {
      setCopied(`Not copied: ${messageOf(failure)}. Select the key and copy it.`);
    }
  };

  return (
    <dialog ref={dialog} class="dialog" aria-labelledby="key-title" onClose={onClose}>
      <h2 id="key-title">{`Token ${token.id} created`}</h2>
      <p class="notice">
        Copy the key now: it is shown only this once and cannot be shown again. Use it as a
        bearer token (<code>Authorization: Bearer …</code>).
      </p>
      <label for="token-key">Key</label>
      <div class="key-row">
        <input id="token-key" class="key" readOnly value={key}
          onFocus={(e) => { e.currentTarget.select(); }} />
        <button type="button" onClick={() => void copy()}>
          Copy
        </button>
      </div>
      <p role="status">{copied}</p>
      <div class="buttons">
        <button type="button" onClick={() => dialog.current?.close()}>
          Close
        </button>
      </div>
    </dialog>
  );
}
