// A form's refusal by the API: at the input its `fieldName` names, else above the form.

import { ApiError } from "./api";
import { messageOf } from "./resources";

export interface Failure {
  input: string | null;
  message: string;
}

/** The failure of a submit: the input `inputOf` finds for the API's `fieldName`, focused so
 * a keyboard user is taken to it. */
export function failureOf(refused: unknown, inputOf: (fieldName: string) => string | null): Failure {
  const input = refused instanceof ApiError ? inputOf(refused.fieldName) : null;
  if (input) document.getElementById(input)?.focus();
  return { input, message: messageOf(refused) };
}

/** What an input carries when the failure is its own: marked invalid, described by it. */
export function invalid(id: string, failure: Failure | null) {
  const wrong = failure?.input === id;
  return { "aria-invalid": wrong, "aria-describedby": wrong ? `${id}-error` : undefined };
}

export function FieldError({ id, failure }: { id: string; failure: Failure | null }) {
  if (failure?.input !== id) return null;
  return (
    <span class="error field-error" id={`${id}-error`}>
      {failure.message}
    </span>
  );
}

/** The failure above the form when no input is named, else announced once for screen readers
 * (the message itself sits at its input). */
export function FormFailure({ failure }: { failure: Failure | null }) {
  if (!failure) return null;
  return (
    <p class={failure.input === null ? "error" : "visually-hidden"} role="alert">
      {failure.message}
    </p>
  );
}
