interface Props {
  note: string; // how the list stays current: "Tokens are not live: …"
  create: string | null; // the create button's words, null where it is not offered
  onCreate: () => void;
}

/** The row above an Access list: how it is kept current, and its create button where the
 * API offers one (its collection's `createTypes`) and no form is open. */
export function ListToolbar({ note, create, onCreate }: Props) {
  return (
    <div class="toolbar">
      <span class="count">{note}</span>
      <span class="spacer-flex" />
      {create !== null && (
        <button type="button" onClick={onCreate}>
          {create}
        </button>
      )}
    </div>
  );
}
