import { useEffect, useRef } from "preact/hooks";
import type { ComponentChildren } from "preact";

import { useAction } from "./live";

interface Props {
  title: string;
  confirm: string; // the button's words: "Restore", "Rotate certificates"
  pending: string; // while the API answers: "Restoring…"
  run: () => Promise<unknown>;
  onClose: () => void;
  children?: ComponentChildren;
}

/** A modal that says what an action does and runs it only when confirmed; the API's refusal
 * is shown in it, and it closes once the API has taken the action. */
export function ConfirmDialog({ title, confirm, pending, run, onClose, children }: Props) {
  const dialog = useRef<HTMLDialogElement>(null);
  const action = useAction();

  useEffect(() => {
    dialog.current?.showModal();
  }, []);

  const close = () => {
    dialog.current?.close();
  };
  const submit = async (event: Event) => {
    event.preventDefault();
    if (await action.run("confirm", run)) close();
  };

  return (
    <dialog ref={dialog} class="dialog" aria-labelledby="confirm-title" onClose={onClose}>
      <form method="dialog" onSubmit={(event) => void submit(event)}>
        <h2 id="confirm-title">{title}</h2>
        {children}
        <p class="error" role="alert">
          {action.error}
        </p>
        <div class="buttons">
          <button type="button" class="ghost" onClick={close}>
            Cancel
          </button>
          <button type="submit" class="danger" disabled={action.pending !== null}>
            {action.pending ? pending : confirm}
          </button>
        </div>
      </form>
    </dialog>
  );
}
