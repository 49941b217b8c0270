import type { TargetedSubmitEvent } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";

import { all, call, pathOf } from "./api";
import { useAction } from "./live";
import { messageOf } from "./resources";
import { rollbackChoices, type V3Revision, type V3Workload } from "./workloads";

/** A modal listing a deployment's earlier revisions as the API gives them (its `revisions`
 * link), one of which its `rollback` action brings back. */
export function RollbackDialog({ workload, onClose }: { workload: V3Workload; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [choices, setChoices] = useState<V3Revision[] | null>(null);
  const [chosen, setChosen] = useState("");
  const [error, setError] = useState("");
  const action = useAction();
  const revisions = workload.links?.revisions;
  const rollback = workload.actions?.rollback;

  useEffect(() => {
    dialog.current?.showModal();
    if (revisions === undefined) return;
    all<V3Revision>(pathOf(revisions))
      .then((found) => {
        const earlier = rollbackChoices(found);
        setChoices(earlier);
        setChosen(earlier[0]?.id ?? "");
      })
      .catch((failure: unknown) => {
        setError(messageOf(failure));
      });
  }, [revisions]);

  // Every way out closes the native dialog, whose close event tells the opener.
  const close = () => {
    dialog.current?.close();
  };
  const confirm = async (event: TargetedSubmitEvent<HTMLFormElement>) => {
    event.preventDefault();
    if (rollback === undefined || !chosen) return;
    if (await action.run("rollback", () => call("POST", pathOf(rollback), { replicaSetId: chosen }))) close();
  };

  return (
    <dialog ref={dialog} class="dialog" aria-labelledby="rollback-title" onClose={onClose}>
      <form method="dialog" onSubmit={(event) => void confirm(event)}>
        <h2 id="rollback-title">{`Roll back ${workload.name}`}</h2>
        {choices === null && !error && <p role="status">Loading revisions…</p>}
        {choices?.length === 0 && <p>No earlier revision to roll back to.</p>}
        {choices !== null && choices.length > 0 && (
          <fieldset class="revisions">
            <legend>Revision to bring back</legend>
            {choices.map((r) => (
              <label key={r.id} class="choice">
                <input
                  type="radio"
                  name="revision"
                  value={r.id}
                  checked={chosen === r.id}
                  onChange={() => {
                    setChosen(r.id);
                  }}
                />
                {`Revision ${String(r.revision)}: `}
                {(r.containers ?? []).map((c) => c.image ?? "").join(", ")}
                {r.created && <small class="muted">{` made ${r.created}`}</small>}
              </label>
            ))}
          </fieldset>
        )}
        <p class="error" role="alert">
          {error || action.error}
        </p>
        <div class="buttons">
          <button type="button" class="ghost" onClick={close}>
            Cancel
          </button>
          <button type="submit" disabled={!chosen || action.pending !== null}>
            {action.pending ? "Rolling back…" : "Roll back"}
          </button>
        </div>
      </form>
    </dialog>
  );
}
