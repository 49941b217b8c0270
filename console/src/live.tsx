// A page's live data: one /v3/subscribe socket for the families it shows. `load` reads the
// page's collections each time the socket opens (the server replays no events), `onEvent`
// applies what changes after.

import { useEffect, useRef, useState } from "preact/hooks";

import { ApiError } from "./api";
import { messageOf, type ResourceEvent } from "./resources";
import { whoAmI } from "./session";
import { subscribe, type Link } from "./subscribe";

export const LINK_TEXT: Record<Link, string> = {
  connecting: "Connecting…",
  live: "Live",
  reconnecting: "Reconnecting…",
};

export function useLive(
  resourceTypes: string[],
  load: () => Promise<void>,
  onEvent: (event: ResourceEvent) => void,
): Link {
  const [link, setLink] = useState<Link>("connecting");
  // The latest callbacks, without opening the socket again when they change.
  const handlers = useRef({ load, onEvent });
  handlers.current = { load, onEvent };
  const types = resourceTypes.join(",");

  useEffect(() => {
    const live = replayingDuringLoads(
      () => handlers.current.load(),
      (event) => {
        handlers.current.onEvent(event);
      },
    );
    const subscription = subscribe(types.split(","), {
      onOpen: () => void live.onOpen(),
      onEvent: live.onEvent,
      onLink: setLink,
      sessionHolds: async () => (await whoAmI()) !== null,
    });
    return () => {
      subscription.close();
    };
  }, [types]);

  return link;
}

/** A socket's handlers that read the page's collections on each open and apply each event as
 * it comes, and once a read has set what it found, apply again, in order, the events that came
 * while it was in flight. The read may have been answered before an event's change and reach
 * the page after the event: a cluster deleted meanwhile stayed listed. Replayed in order, the
 * events leave each object as its latest change has it (each page applies an event by id). */
export function replayingDuringLoads(
  load: () => Promise<void>,
  apply: (event: ResourceEvent) => void,
): { onOpen: () => Promise<void>; onEvent: (event: ResourceEvent) => void } {
  let during: ResourceEvent[] | null = null;
  return {
    onOpen: async () => {
      const mine: ResourceEvent[] = [];
      during = mine;
      try {
        await load();
      } finally {
        if (during === mine) during = null;
        for (const event of mine) apply(event);
      }
    },
    onEvent: (event) => {
      during?.push(event);
      apply(event);
    },
  };
}

export function LiveBadge({ link }: { link: Link }) {
  return (
    <span class={`link link-${link}`} role="status" aria-live="polite">
      {LINK_TEXT[link]}
    </span>
  );
}

/** An action's progress and failure: `run` marks `label` pending while `work` runs, and
 * keeps the API's message when it fails. */
export function useAction(): {
  pending: string | null;
  error: string;
  run: (label: string, work: () => Promise<unknown>) => Promise<boolean>;
  clear: () => void;
} {
  const [pending, setPending] = useState<string | null>(null);
  const [error, setError] = useState("");
  const run = async (label: string, work: () => Promise<unknown>): Promise<boolean> => {
    setPending(label);
    setError("");
    try {
      await work();
      return true;
    } catch (failure) {
      setError(failure instanceof Error ? failure.message : String(failure));
      return false;
    } finally {
      setPending(null);
    }
  };
  return { pending, error, run, clear: () => { setError(""); } };
}

/** Reads `read` when the page opens (and when `deps` change) and again each time `load` is
 * called: after each change, for what the subscription does not carry. A failed read is kept
 * as `error` until one succeeds; an ended session is not shown (the app returns to the
 * sign-in page). */
export function useRead(read: () => Promise<void>, deps: unknown[] = []): { error: string; load: () => Promise<void> } {
  const [error, setError] = useState("");
  const load = async () => {
    try {
      await read();
      setError("");
    } catch (failure) {
      if (failure instanceof ApiError && failure.sessionEnded) return;
      setError(messageOf(failure));
    }
  };
  useEffect(() => {
    void load();
  }, deps);
  return { error, load };
}

/** Reads `load` now and then again `everyMs` after each read ends, while the page is in
 * view: for what /v3/subscribe does not carry (etcd backups). One read at a time, none
 * while the tab is hidden, and none after the page is left. Returns a read to ask for now
 * (after an action), which resets the wait. */
export function usePolled(load: () => Promise<void>, everyMs: number): () => void {
  const latest = useRef(load);
  latest.current = load;
  const now = useRef<() => void>(() => undefined);

  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let running = false;
    let again = false;
    let left = false;
    const read = async (): Promise<void> => {
      clearTimeout(timer);
      if (running) {
        again = true;
        return;
      }
      running = true;
      try {
        await latest.current();
      } finally {
        running = false;
      }
      if (left) return;
      if (again) {
        again = false;
        void read();
      } else if (document.visibilityState === "visible") {
        timer = setTimeout(() => void read(), everyMs);
      }
    };
    const shown = () => {
      if (document.visibilityState === "visible" && !running) void read();
    };
    now.current = () => void read();
    void read();
    document.addEventListener("visibilitychange", shown);
    return () => {
      left = true;
      clearTimeout(timer);
      document.removeEventListener("visibilitychange", shown);
    };
  }, [everyMs]);

  return () => {
    now.current();
  };
}
