import { describe, expect, it } from "vitest";

import { SECRET_INPUTS, secretBody, secretErrorInput } from "./secrets";

describe("secretBody", () => {
  it("sends an opaque secret's values as text, leaving out empty rows", () => {
    const body = secretBody(" db ", [
      { key: "user", value: "admin" },
      { key: "", value: "" },
      { key: " password ", value: " s3cret " },
    ]);
    expect(body).toEqual({
      type: "secret",
      name: "db",
      kind: "Opaque",
      stringData: { user: "admin", password: " s3cret " },
    });
  });

  it("keeps a value without a key for the API to refuse", () => {
    expect(secretBody("db", [{ key: "", value: "x" }]).stringData).toEqual({ "": "x" });
  });
});

describe("secretErrorInput", () => {
  it("puts the API's field errors at their inputs", () => {
    expect(secretErrorInput("name")).toBe(SECRET_INPUTS.name);
    expect(secretErrorInput("stringData")).toBe(SECRET_INPUTS.data);
    expect(secretErrorInput("data.bad key")).toBe(SECRET_INPUTS.data);
    expect(secretErrorInput("projectId")).toBeNull();
    expect(secretErrorInput("")).toBeNull();
  });
});
