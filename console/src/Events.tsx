import { useEffect, useState } from "preact/hooks";

import { call, type Collection } from "./api";
import { EVENT_LIMIT, eventsPath, newestFirst, subjectOf, type V3Event } from "./events";
import { useAction } from "./live";

/** The project's recent events (its own and its namespaces'), newest first, one bounded page;
 * read when the page opens and again on Refresh (events are not among the subscription's
 * families). */
export function Events({ projectId }: { projectId: string }) {
  const [events, setEvents] = useState<V3Event[] | null>(null);
  const read = useAction();

  const load = () =>
    read.run("read", async () => {
      const page = await call<Collection<V3Event>>("GET", eventsPath(projectId));
      setEvents(newestFirst(page.data));
    });
  useEffect(() => {
    void load();
  }, [projectId]);

  return (
    <section class="panel" aria-labelledby="events-title" data-testid="events">
      <header class="page-head">
        <h2 id="events-title">Events</h2>
        <span class="muted">{`The newest ${String(EVENT_LIMIT)} at most`}</span>
        <span class="spacer-flex" />
        <button type="button" class="ghost" disabled={read.pending !== null} onClick={() => void load()}>
          {read.pending ? "Reading…" : "Refresh"}
        </button>
      </header>
      {read.error && (
        <p class="error" role="alert">
          {read.error}
        </p>
      )}
      {events === null ? (
        !read.error && <p role="status">Loading…</p>
      ) : events.length === 0 ? (
        <p class="empty">No events.</p>
      ) : (
        <table class="grid">
          <thead>
            <tr>
              <th scope="col">Last seen</th>
              <th scope="col">Type</th>
              <th scope="col">Reason</th>
              <th scope="col">Object</th>
              <th scope="col">Namespace</th>
              <th scope="col">Message</th>
              <th scope="col">Count</th>
            </tr>
          </thead>
          <tbody>
            {events.map((e) => (
              <tr key={e.id} class={e.eventType === "Warning" ? "warning" : undefined}>
                <td>{e.lastTimestamp ?? "–"}</td>
                <td>{e.eventType ?? ""}</td>
                <td>{e.reason ?? ""}</td>
                <td>{subjectOf(e)}</td>
                <td>{e.namespaceId || "–"}</td>
                <td>{e.message ?? ""}</td>
                <td class="num">{e.count ?? 1}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
