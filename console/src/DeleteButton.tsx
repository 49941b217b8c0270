interface Props {
  /** The row's resource: the button shows only where the API links `remove` for the caller. */
  of: { links?: { remove?: string } };
  label: string; // what a screen reader says: "Delete secret db-password"
  onDelete: () => void; // opens the confirmation; nothing is removed before it
}

/** The Delete button of a table row. */
export function DeleteButton({ of, label, onDelete }: Props) {
  if (of.links?.remove === undefined) return null;
  return (
    <button type="button" class="ghost" aria-label={label} onClick={onDelete}>
      Delete
    </button>
  );
}
