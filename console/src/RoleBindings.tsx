// What a global role's and a project role's bindings share: a table of who holds which
// role, each revoked where the API offers it, and a form granting one. Neither family is
// among the subscription's, so the page reads its list again after each change.

import type { JSX } from "preact";
import { useState } from "preact/hooks";

import { call, pathOf } from "./api";
import { useAction } from "./live";

export interface BindingRow {
  id: string;
  who: string;
  role: string;
  remove: string | undefined; // the binding's `links.remove`
}

interface TableProps {
  rows: BindingRow[] | null; // null until read
  error: string; // the read's failure
  heads: { who: string; role: string };
  testId?: string | undefined;
  onRevoked: () => Promise<void>;
}

/** The bindings, with the read's or a revoke's failure above them. */
export function BindingTable({ rows, error, heads, testId, onRevoked }: TableProps) {
  const revoke = useAction();
  const remove = async (row: BindingRow) => {
    const link = row.remove;
    if (link && (await revoke.run(row.id, () => call("DELETE", pathOf(link))))) await onRevoked();
  };
  return (
    <>
      {(error || revoke.error) && (
        <p class="error" role="alert">
          {error || revoke.error}
        </p>
      )}
      {rows === null ? (
        <p role="status">Loading…</p>
      ) : (
        <table class="grid" data-testid={testId}>
          <thead>
            <tr>
              <th scope="col">{heads.who}</th>
              <th scope="col">{heads.role}</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map((b) => (
              <tr key={b.id} data-binding={b.id}>
                <th scope="row">{b.who}</th>
                <td>{b.role}</td>
                <td class="actions">
                  {b.remove !== undefined && (
                    <button type="button" class="ghost" disabled={revoke.pending === b.id}
                      aria-label={`Revoke ${b.role} from ${b.who}`}
                      onClick={() => void remove(b)}>
                      {revoke.pending === b.id ? "Revoking…" : "Revoke"}
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

/** What the input of who is granted carries: its id and whether the grant was refused. */
export interface WhoAttributes {
  id: string;
  "aria-invalid": boolean;
  "aria-describedby": string | undefined;
}

interface GrantProps {
  name: string; // the form's accessible name
  who: { id: string; label: string };
  // The input of who is granted (a user to choose, a principal to type).
  whoInput: (value: string, set: (value: string) => void, attributes: WhoAttributes) => JSX.Element;
  role: { id: string; label: string; choices: readonly string[]; first: string };
  send: (who: string, role: string) => Promise<unknown>;
  onGranted: () => Promise<void>;
}

/** A role granted to someone; the API's refusal (a binding that exists, a role it does not
 * know) shown at who, and cleared when who changes. */
export function GrantForm({ name, who, whoInput, role, send, onGranted }: GrantProps) {
  const [principal, setPrincipal] = useState("");
  const [chosen, setChosen] = useState(role.first);
  const grant = useAction();

  const submit = async (event: Event) => {
    event.preventDefault();
    if (await grant.run("grant", () => send(principal, chosen))) {
      setPrincipal("");
      await onGranted();
    }
  };
  const attributes: WhoAttributes = {
    id: who.id,
    "aria-invalid": grant.error !== "",
    "aria-describedby": grant.error ? "grant-error" : undefined,
  };

  return (
    <form class="grant" aria-label={name} onSubmit={(event) => void submit(event)}>
      <div class="field">
        <label for={who.id}>{who.label}</label>
        {whoInput(principal, (value) => {
          setPrincipal(value);
          grant.clear();
        }, attributes)}
        {grant.error && (
          <span class="error field-error" id="grant-error" role="alert">
            {grant.error}
          </span>
        )}
      </div>
      <div class="field">
        <label for={role.id}>{role.label}</label>
        <select id={role.id} value={chosen} onChange={(e) => { setChosen(e.currentTarget.value); }}>
          {role.choices.map((r) => (
            <option key={r} value={r}>
              {r}
            </option>
          ))}
        </select>
      </div>
      <button type="submit" disabled={grant.pending !== null}>
        {grant.pending ? "Granting…" : "Grant"}
      </button>
    </form>
  );
}
