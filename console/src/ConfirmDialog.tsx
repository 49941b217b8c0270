import { useEffect, useRef } from "preact/hooks";
import type { ComponentChildren } from "preact";

import { FormButtons } from "./FormButtons";
import { useAction } from "./live";

interface Props {
  title: string;
  confirm: string; // the button's words: "Restore", "Rotate certificates"
  pending: string; // while the API answers: "Restoring…"
  run: () => Promise<unknown>;
  onClose: () => void;
  ready?: boolean; // false while what confirms it is not given yet (a name to type)
  children?: ComponentChildren;
}

/** A modal that says what an action does and runs it only when confirmed; the API's refusal
 * is shown in it, and it closes once the API has taken the action. */
export function ConfirmDialog({ title, confirm, pending, run, onClose, ready = true, children }: Props) {
  const dialog = useRef<HTMLDialogElement>(null);
  const action = useAction();

  useEffect(() => {
    dialog.current?.showModal();
  }, []);

  // Every way out (Cancel, Escape, done) closes the native dialog, whose close event tells
  // the opener: only then is the page outside it focusable again.
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
        <FormButtons onCancel={close} busy={action.pending !== null} submit={confirm} pending={pending}
          danger disabled={!ready} />
      </form>
    </dialog>
  );
}
