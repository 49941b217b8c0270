import { describe, expect, it } from "vitest";

import { initialTheme } from "./theme";

describe("initialTheme", () => {
  it("is the remembered choice, else the system's", () => {
    expect(initialTheme("light", true)).toBe("light");
    expect(initialTheme(null, true)).toBe("dark");
    expect(initialTheme("bogus", false)).toBe("light");
  });
});
