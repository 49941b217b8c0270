import { describe, expect, it } from "vitest";

import { EVENT_LIMIT, eventsPath, newestFirst, subjectOf, type V3Event } from "./events";

describe("events", () => {
  it("asks for one bounded page", () => {
    expect(eventsPath("c-a:p-b")).toBe(`/v3/projects/c-a%3Ap-b/events?limit=${String(EVENT_LIMIT)}`);
  });

  it("shows the newest first and no more than the limit", () => {
    const events: V3Event[] = Array.from({ length: EVENT_LIMIT + 5 }, (_, i) => ({
      id: `e${String(i)}`,
      lastTimestamp: `2026-11-28T10:${String(i).padStart(2, "0")}:00Z`,
    }));
    const shown = newestFirst(events);
    expect(shown).toHaveLength(EVENT_LIMIT);
    expect(shown[0]?.id).toBe(`e${String(EVENT_LIMIT + 4)}`);
    expect(shown.at(-1)?.id).toBe("e5");
  });

  it("names what an event is about", () => {
    expect(subjectOf({ id: "a", origin: "cluster", involvedObject: { kind: "Pod", name: "web-1" } })).toBe("Pod web-1");
    expect(subjectOf({ id: "b", origin: "project", involvedObject: { kind: "Project", name: "p-b" } })).toBe("project");
  });
});
