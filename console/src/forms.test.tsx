import { render } from "preact";
import { useState } from "preact/hooks";
import { act } from "preact/test-utils";
import { afterEach, describe, expect, it, vi } from "vitest";

import { ApiError } from "./api";
import { DeleteDialog } from "./DeleteDialog";
import { FieldRefusal, FormFailure, useSubmit } from "./FieldError";
import { FormButtons } from "./FormButtons";
import { GrantForm } from "./RoleBindings";
import { TextField } from "./TextField";

let root: HTMLElement | null = null;

async function shown(page: preact.ComponentChild): Promise<HTMLElement> {
  const into = document.createElement("div");
  root = into;
  document.body.append(into);
  await act(() => {
    render(page, into);
  });
  return into;
}

afterEach(() => {
  if (root) render(null, root);
  root?.remove();
  root = null;
});

async function typed(input: HTMLInputElement, value: string) {
  await act(() => {
    input.value = value;
    input.dispatchEvent(new Event("input", { bubbles: true }));
  });
}

async function submitted(form: HTMLFormElement) {
  await act(async () => {
    form.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    await Promise.resolve();
  });
}

// A form of two fields whose submit fails as `send` does; "name" is placed at the first.
function Form({ send }: { send: (name: string) => Promise<unknown> }) {
  const [name, setName] = useState("");
  const [size, setSize] = useState("");
  const { busy, failure, submit } = useSubmit(
    () => send(name),
    (fieldName) => (fieldName === "name" ? "f-name" : null),
  );
  return (
    <form onSubmit={(event) => void submit(event)}>
      <FormFailure failure={failure} />
      <TextField id="f-name" label="Name" value={name} onInput={setName} failure={failure} />
      <TextField id="f-size" label="Size" hint="10Gi" value={size} onInput={setSize} failure={failure} />
      <FormButtons onCancel={() => undefined} busy={busy} submit="Create" pending="Creating…" />
    </form>
  );
}

describe("a form's fields and submit", () => {
  it("shows the API's refusal at the input its fieldName names, focused, and the hint elsewhere", async () => {
    const page = await shown(<Form send={() => Promise.reject(new ApiError(422, "MissingRequired", "name is required", "name"))} />);
    const name = page.querySelector<HTMLInputElement>("#f-name") as HTMLInputElement;
    const size = page.querySelector<HTMLInputElement>("#f-size") as HTMLInputElement;
    expect(size.getAttribute("aria-describedby")).toBe("f-size-hint");
    await submitted(page.querySelector("form") as HTMLFormElement);
    expect(name.getAttribute("aria-invalid")).toBe("true");
    expect(page.querySelector(`#${name.getAttribute("aria-describedby") ?? ""}`)?.textContent).toBe("name is required");
    expect(document.activeElement).toBe(name);
    expect(size.getAttribute("aria-invalid")).toBe("false");
    expect(size.getAttribute("aria-describedby")).toBe("f-size-hint");
    // Announced once, not shown twice.
    expect(page.querySelector('[role="alert"]')?.className).toBe("visually-hidden");
  });

  it("places the page's own refusal as the API's, and any other failure above the form", async () => {
    const send = vi.fn<(name: string) => Promise<unknown>>()
      .mockRejectedValueOnce(new FieldRefusal("f-size", "say 10Gi"))
      .mockRejectedValueOnce(new Error("network down"));
    const page = await shown(<Form send={send} />);
    const form = page.querySelector("form") as HTMLFormElement;
    await submitted(form);
    expect(page.querySelector("#f-size-error")?.textContent).toBe("say 10Gi");
    expect(page.querySelector("#f-size")?.getAttribute("aria-describedby")).toBe("f-size-error");
    await submitted(form);
    expect(page.querySelector("#f-size-error")).toBeNull();
    const above = page.querySelector('[role="alert"]');
    expect([above?.className, above?.textContent]).toEqual(["error", "network down"]);
  });
});

describe("the delete dialog", () => {
  it("deletes only once the name is typed", async () => {
    const remove = vi.fn(() => Promise.resolve());
    const page = await shown(<DeleteDialog what="token" name="t-1" remove={remove} onClose={() => undefined} />);
    const confirm = [...page.querySelectorAll("button")].find((b) => b.textContent === "Delete token");
    expect(confirm?.disabled).toBe(true);
    await typed(page.querySelector("#delete-confirm") as HTMLInputElement, "t-");
    expect(confirm?.disabled).toBe(true);
    await typed(page.querySelector("#delete-confirm") as HTMLInputElement, "t-1");
    expect(confirm?.disabled).toBe(false);
    await submitted(page.querySelector("form") as HTMLFormElement);
    expect(remove).toHaveBeenCalledOnce();
  });
});

describe("the grant form", () => {
  it("shows a refused grant at who is granted and clears it when who changes", async () => {
    const send = vi.fn<(who: string, role: string) => Promise<unknown>>(() =>
      Promise.reject(new ApiError(409, "AlreadyExists", "binding exists")));
    const page = await shown(
      <GrantForm
        name="Grant a role"
        who={{ id: "grant-principal", label: "User id or group principal" }}
        whoInput={(value, set, attributes) => (
          <input value={value} {...attributes} onInput={(e) => { set(e.currentTarget.value); }} />
        )}
        role={{ id: "grant-role", label: "Role", choices: ["project-owner", "read-only"], first: "read-only" }}
        send={send}
        onGranted={() => Promise.resolve()}
      />,
    );
    const who = page.querySelector("#grant-principal") as HTMLInputElement;
    await typed(who, "u-b");
    await submitted(page.querySelector("form") as HTMLFormElement);
    expect(send).toHaveBeenCalledWith("u-b", "read-only");
    expect(who.getAttribute("aria-invalid")).toBe("true");
    expect(page.querySelector("#grant-error")?.textContent).toBe("binding exists");
    await typed(who, "u-c");
    expect(who.getAttribute("aria-invalid")).toBe("false");
    expect(page.querySelector("#grant-error")).toBeNull();
  });
});
