import { useEffect, useRef, useState } from "preact/hooks";

import { useAction } from "./live";

interface Props {
  what: string; // "cluster", "project"
  name: string;
  remove: () => Promise<void>;
  onClose: () => void;
}

/** A modal that names what is deleted and asks for its name typed, so a click alone never
 * deletes; the API's refusal is shown in it. */
export function DeleteDialog({ what, name, remove, onClose }: Props) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [typed, setTyped] = useState("");
  const action = useAction();

  useEffect(() => {
    dialog.current?.showModal();
  }, []);

  // Every way out (Cancel, Escape, done) closes the native dialog, whose close event tells
  // the opener: only then is the page outside it focusable again.
  const close = () => {
    dialog.current?.close();
  };
  const confirm = async (event: Event) => {
    event.preventDefault();
    if (await action.run("delete", remove)) close();
  };

  return (
    <dialog ref={dialog} class="dialog" aria-labelledby="delete-title" onClose={onClose}>
      <form method="dialog" onSubmit={(event) => void confirm(event)}>
        <h2 id="delete-title">{`Delete ${what} ${name}?`}</h2>
        <p>
          {`This cannot be undone. Type the ${what}'s name, `}
          <strong>{name}</strong>, to confirm.
        </p>
        <label for="delete-confirm">{`Name of the ${what}`}</label>
        <input
          id="delete-confirm"
          autoComplete="off"
          value={typed}
          onInput={(e) => {
            setTyped(e.currentTarget.value);
          }}
        />
        <p class="error" role="alert">
          {action.error}
        </p>
        <div class="buttons">
          <button type="button" class="ghost" onClick={close}>
            Cancel
          </button>
          <button type="submit" class="danger" disabled={typed !== name || action.pending !== null}>
            {action.pending ? "Deleting…" : `Delete ${what}`}
          </button>
        </div>
      </form>
    </dialog>
  );
}
