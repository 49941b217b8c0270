// A form's refusal by the API: at the input its `fieldName` names, else above the form.

import type { TargetedSubmitEvent } from "preact";
import { useState } from "preact/hooks";

import { ApiError } from "./api";
import { messageOf } from "./resources";

export interface Failure {
  input: string | null;
  message: string;
}

/** Where the API's `fieldName` (and, for a few, its message) puts a refusal: an input's id. */
export type InputOf = (fieldName: string, message: string) => string | null;

/** A refusal by the page itself, before anything is sent (a lifetime that is no duration):
 * shown at `input` as the API's are. */
export class FieldRefusal extends Error {
  readonly input: string;

  constructor(input: string, message: string) {
    super(message);
    this.name = "FieldRefusal";
    this.input = input;
  }
}

/** The failure of a submit: the input `inputOf` finds for the API's `fieldName`, focused so
 * a keyboard user is taken to it. */
export function failureOf(refused: unknown, inputOf: InputOf): Failure {
  const input =
    refused instanceof FieldRefusal
      ? refused.input
      : refused instanceof ApiError
        ? inputOf(refused.fieldName, refused.message)
        : null;
  if (input) document.getElementById(input)?.focus();
  return { input, message: messageOf(refused) };
}

/** A form's submit: `busy` while `send` runs, and what refused it as a Failure after. */
export function useSubmit(send: () => Promise<unknown>, inputOf: InputOf) {
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<Failure | null>(null);
  const submit = async (event: TargetedSubmitEvent<HTMLFormElement>) => {
    event.preventDefault();
    setBusy(true);
    setFailure(null);
    try {
      await send();
    } catch (refused) {
      setFailure(failureOf(refused, inputOf));
    } finally {
      setBusy(false);
    }
  };
  return { busy, failure, setFailure, submit };
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
