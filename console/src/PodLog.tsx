import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";

import { errorOf, sessionEnded } from "./api";
import { LOG_LINES, LogRing } from "./logring";
import { messageOf } from "./resources";

type Streaming = "reading" | "following" | "ended" | "failed";

const STATE_TEXT: Record<Streaming, string> = {
  reading: "Reading…",
  following: "Following",
  ended: "The log has ended",
  failed: "Not read",
};

/** A container's log read over the API's stream (`GET …/pods/{id}/logs`): the last
 * LOG_LINES lines, and with follow the new ones as they are written, until the page is left
 * or follow is turned off (the request is aborted, so the API and the cluster stop too). */
export function PodLog({ logsUrl, container }: { logsUrl: string; container: string }) {
  const [follow, setFollow] = useState(true);
  const [timestamps, setTimestamps] = useState(false);
  const [lines, setLines] = useState<string[]>([]);
  const [state, setState] = useState<Streaming>("reading");
  const [error, setError] = useState("");
  const view = useRef<HTMLPreElement>(null);
  const atEnd = useRef(true);

  useEffect(() => {
    const controller = new AbortController();
    const ring = new LogRing(LOG_LINES);
    let frame = 0;
    // Many chunks may come in one frame: the page shows them once per frame.
    const show = () => {
      frame ||= requestAnimationFrame(() => {
        frame = 0;
        setLines(ring.view());
      });
    };
    const query = new URLSearchParams({ container, tailLines: String(LOG_LINES) });
    if (follow) query.set("follow", "true");
    if (timestamps) query.set("timestamps", "true");
    setLines([]);
    setError("");
    setState(follow ? "following" : "reading");

    const read = async () => {
      const response = await fetch(`${logsUrl}?${query.toString()}`, {
        credentials: "same-origin",
        headers: { Accept: "text/plain" },
        signal: controller.signal,
      });
      if (!response.ok || !response.body) {
        const refused = await errorOf(response);
        if (refused.sessionEnded) sessionEnded();
        throw refused;
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        ring.push(decoder.decode(value, { stream: true }));
        show();
      }
      ring.push(decoder.decode());
      show();
      setState("ended");
    };
    read().catch((failure: unknown) => {
      if (controller.signal.aborted) return;
      setError(messageOf(failure));
      setState("failed");
    });
    return () => {
      controller.abort();
      cancelAnimationFrame(frame);
    };
  }, [logsUrl, container, follow, timestamps]);

  // Stay at the newest line while the reader is there; leave them be once they scroll up.
  useLayoutEffect(() => {
    const element = view.current;
    if (element && atEnd.current) element.scrollTop = element.scrollHeight;
  }, [lines]);

  return (
    <section aria-labelledby="log-title">
      <div class="page-head">
        <h2 id="log-title">{`Log of ${container}`}</h2>
        <span class="link" role="status">
          {STATE_TEXT[state]}
        </span>
        <span class="spacer-flex" />
        <label class="check">
          <input type="checkbox" checked={follow} onChange={(e) => { setFollow(e.currentTarget.checked); }} />
          Follow
        </label>
        <label class="check">
          <input type="checkbox" checked={timestamps} onChange={(e) => { setTimestamps(e.currentTarget.checked); }} />
          Timestamps
        </label>
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <p class="muted">{`The last ${LOG_LINES.toLocaleString("en")} lines are kept.`}</p>
      <pre
        ref={view}
        class="log"
        data-testid="log"
        tabIndex={0}
        aria-label={`Log of ${container}`}
        onScroll={(e) => {
          const element = e.currentTarget;
          atEnd.current = element.scrollTop + element.clientHeight >= element.scrollHeight - 4;
        }}
      >
        {lines.join("\n")}
      </pre>
    </section>
  );
}
