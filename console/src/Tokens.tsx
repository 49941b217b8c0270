import { useEffect, useRef, useState } from "preact/hooks";

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
import { all, call, listing, pathOf } from "./api";
import type { V3Cluster } from "./clusters";
import { DeleteButton } from "./DeleteButton";
import { DeleteDialog } from "./DeleteDialog";
import { FieldError, FieldRefusal, FormFailure, invalid, useSubmit } from "./FieldError";
import { FormButtons } from "./FormButtons";
import { ListToolbar } from "./ListToolbar";
import { useRead } from "./live";
import { messageOf } from "./resources";
import { TextField } from "./TextField";

/** The caller's tokens (the API lists no one else's): made with a lifetime and, if wanted, one
 * cluster as their scope; the key shown once, in a dialog; deleted after a confirmation.
 * Tokens are not among the subscription's families: the list is read again after each change. */
export function Tokens() {
  const [tokens, setTokens] = useState<V3Token[] | null>(null);
  const [mayCreate, setMayCreate] = useState(false);
  const [creating, setCreating] = useState(false);
  const [made, setMade] = useState<V3Token | null>(null);
  const [deleting, setDeleting] = useState<V3Token | null>(null);

  const { error, load } = useRead(async () => {
    const listed = await listing<V3Token>("/v3/tokens");
    setTokens(listed.data.sort((a, b) => (b.created ?? "").localeCompare(a.created ?? "")));
    setMayCreate(listed.createTypes.token !== undefined);
  });

  const now = Date.now();
  return (
    <>
      <ListToolbar note="Tokens are not live: the list is read again after each change."
        create={mayCreate && !creating ? "Create token" : null} onCreate={() => { setCreating(true); }} />
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
                  <DeleteButton of={t} label={`Delete ${t.id}`} onDelete={() => { setDeleting(t); }} />
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
  const { busy, failure, setFailure, submit } = useSubmit(async () => {
    const ttl = parseLifetime(form.lifetime);
    if (ttl === undefined) throw new FieldRefusal("token-lifetime", LIFETIME_HINT);
    onCreated(await call<V3Token>("POST", "/v3/tokens", tokenBody(form, ttl)));
  }, tokenErrorInput);

  useEffect(() => {
    all<V3Cluster>("/v3/clusters").then(setClusters, (failed: unknown) => {
      setFailure({ input: null, message: messageOf(failed) });
    });
  }, []);

  return (
    <form class="panel" aria-labelledby="create-token-title" onSubmit={(event) => void submit(event)} noValidate>
      <h2 id="create-token-title">Create a token</h2>
      <FormFailure failure={failure} />
      <TextField id="token-description" label="Description" value={form.description} failure={failure}
        onInput={(description) => { setForm({ ...form, description }); }} />
      <TextField id="token-lifetime" label="Lifetime" placeholder="8h" hint={LIFETIME_HINT} value={form.lifetime}
        failure={failure} onInput={(lifetime) => { setForm({ ...form, lifetime }); }} />
      <div class="field">
        <label for="token-cluster">Cluster scope</label>
        <select id="token-cluster" value={form.clusterId} {...invalid("token-cluster", failure)}
          onChange={(e) => { setForm({ ...form, clusterId: e.currentTarget.value }); }}>
          <option value="">None: the token acts as you everywhere</option>
          {clusters.map((c) => (
            <option key={c.id} value={c.id}>
              {c.name && c.name !== c.id ? `${c.name} (${c.id})` : c.id}
            </option>
          ))}
        </select>
        <FieldError id="token-cluster" failure={failure} />
      </div>
      <FormButtons onCancel={onCancel} busy={busy} submit="Create" pending="Creating…" />
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
