import { describe, expect, it } from "vitest";

import { LogRing } from "./logring";

describe("LogRing", () => {
  it("joins a line split across chunks and keeps the unfinished one last", () => {
    const ring = new LogRing(10);
    ring.push("first li");
    ring.push("ne\nsecond line\nthi");
    expect(ring.view()).toEqual(["first line", "second line", "thi"]);
    ring.push("rd\n");
    expect(ring.view()).toEqual(["first line", "second line", "third"]);
  });

  it("keeps only the last lines, counting those let go", () => {
    const ring = new LogRing(3);
    for (let i = 0; i < 10; i++) ring.push(`line-${String(i)}\n`);
    expect(ring.view()).toEqual(["line-7", "line-8", "line-9"]);
    expect(ring.dropped).toBe(7);
  });

  it("never shows more than its capacity, the unfinished line included", () => {
    const ring = new LogRing(2);
    ring.push("a\nb\nc");
    expect(ring.view()).toEqual(["b", "c"]);
  });

  it("drops the carriage return of CRLF lines", () => {
    const ring = new LogRing(5);
    ring.push("windows\r\nline\r\n");
    expect(ring.view()).toEqual(["windows", "line"]);
  });

  it("refuses a capacity that holds nothing", () => {
    expect(() => new LogRing(0)).toThrow(RangeError);
  });
});
