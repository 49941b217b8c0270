import { useState } from "preact/hooks";

import { ConfirmDialog } from "./ConfirmDialog";

interface Props {
  what: string; // "cluster", "project"
  name: string;
  remove: () => Promise<void>;
  onClose: () => void;
}

/** A confirmation that names what is deleted and asks for its name typed, so a click alone
 * never deletes. */
export function DeleteDialog({ what, name, remove, onClose }: Props) {
  const [typed, setTyped] = useState("");
  return (
    <ConfirmDialog title={`Delete ${what} ${name}?`} confirm={`Delete ${what}`} pending="Deleting…" run={remove}
      onClose={onClose} ready={typed === name}>
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
    </ConfirmDialog>
  );
}
