import { FieldError, invalid, type Failure } from "./FieldError";

interface Props {
  id: string;
  label: string;
  value: string;
  onInput: (value: string) => void;
  failure: Failure | null;
  type?: "text" | "password";
  autoComplete?: string;
  placeholder?: string;
  inputMode?: "numeric" | undefined;
  // In a grid whose row and column say what the input is, the label is for assistive
  // technology only.
  labelHidden?: boolean;
  // Said under the input, and what describes it until a refusal does.
  hint?: string;
}

/** A labelled input with the refusal that is its own next to it. */
export function TextField({ id, label, value, onInput, failure, type, autoComplete, placeholder, inputMode, labelHidden, hint }: Props) {
  const attributes = invalid(id, failure);
  const hintId = `${id}-hint`;
  return (
    <div class="field">
      <label for={id} class={labelHidden ? "visually-hidden" : undefined}>
        {label}
      </label>
      <input
        id={id}
        type={type}
        value={value}
        autoComplete={autoComplete}
        placeholder={placeholder}
        inputMode={inputMode}
        {...attributes}
        aria-describedby={attributes["aria-describedby"] ?? (hint ? hintId : undefined)}
        onInput={(e) => {
          onInput(e.currentTarget.value);
        }}
      />
      {hint && (
        <small class="muted" id={hintId}>
          {hint}
        </small>
      )}
      <FieldError id={id} failure={failure} />
    </div>
  );
}
