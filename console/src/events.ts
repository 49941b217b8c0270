// A project's events as /v3 shows them (docs/api.md, "Projects", "Events"): a bounded page,
// newest first, and what a row says of each. Pure: the page and its tests share it.

import type { Resource } from "./resources";

export interface V3Event extends Resource {
  eventType?: string;
  reason?: string;
  message?: string;
  count?: number;
  lastTimestamp?: string;
  firstTimestamp?: string;
  namespaceId?: string;
  involvedObject?: { kind?: string; name?: string; namespace?: string };
  origin?: string;
}

// The most events the page shows: the newest, one page of the API's.
export const EVENT_LIMIT = 50;

export function eventsPath(projectId: string): string {
  return `/v3/projects/${encodeURIComponent(projectId)}/events?limit=${String(EVENT_LIMIT)}`;
}

/** Newest first by their last time, at most `EVENT_LIMIT` (the API sorts them so too; a page
 * holds what it was given, whatever its order). */
export function newestFirst(events: V3Event[]): V3Event[] {
  return [...events]
    .sort((a, b) => (b.lastTimestamp ?? "").localeCompare(a.lastTimestamp ?? ""))
    .slice(0, EVENT_LIMIT);
}

/** What the event is about: `Pod web-1`, or `project` for the project's own. */
export function subjectOf(event: V3Event): string {
  const object = event.involvedObject;
  if (event.origin === "project" || !object?.name) return "project";
  return `${object.kind ?? ""} ${object.name}`.trim();
}
