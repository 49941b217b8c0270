import type { ComponentChildren } from "preact";

interface Props {
  onCancel: () => void;
  busy: boolean;
  submit: string; // the button's words: "Create", "Save"
  pending: string; // while the API answers: "Creating…"
  danger?: boolean;
  disabled?: boolean; // besides while busy: a confirmation not typed yet
  children?: ComponentChildren; // buttons before Cancel ("Add a key")
}

/** A form's last row: Cancel, and its submit showing progress while the API answers. */
export function FormButtons({ onCancel, busy, submit, pending, danger, disabled, children }: Props) {
  return (
    <div class="buttons">
      {children}
      <button type="button" class="ghost" onClick={onCancel}>
        Cancel
      </button>
      <button type="submit" class={danger ? "danger" : undefined} disabled={busy || disabled}>
        {busy ? pending : submit}
      </button>
    </div>
  );
}
