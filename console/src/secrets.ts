// A project's secrets as /v3 takes and shows them (docs/api.md, "Secrets"): the create form's
// body and where the API's field errors belong in it. Values go in the body once and are never
// shown again: the API answers with keys only. Pure: the page and its tests share it.

import type { Resource } from "./resources";

export interface V3Secret extends Resource {
  name: string;
  kind?: string;
  keys?: string[];
  state?: string;
  created?: string;
}

/** One key and its value, as typed. */
export interface Entry {
  key: string;
  value: string;
}

export const EMPTY_ENTRY: Entry = { key: "", value: "" };

// The inputs of the form, by what they hold.
export const SECRET_INPUTS = { name: "secret-name", data: "secret-key-0" } as const;

/** The body of `POST /v3/projects/{id}/secrets`: an opaque secret whose values go as text
 * (`stringData`). Rows with neither key nor value are left out; a value without a key goes
 * under the empty key, for the API to refuse at `stringData`. */
export function secretBody(name: string, entries: Entry[]): Record<string, unknown> {
  const stringData: Record<string, string> = {};
  for (const { key, value } of entries) {
    if (key.trim() === "" && value === "") continue;
    stringData[key.trim()] = value;
  }
  return { type: "secret", name: name.trim(), kind: "Opaque", stringData };
}

/** The input an error of the API names (`fieldName`): the name's, or the first key's for the
 * data; null for the rest (the message then shows above the form). */
export function secretErrorInput(fieldName: string): string | null {
  if (fieldName === "name") return SECRET_INPUTS.name;
  if (/^(stringData|data)\b/.test(fieldName)) return SECRET_INPUTS.data;
  return null;
}
