// /v3/subscribe: the API's change events over one WebSocket, opened again when it drops.
// Events missed while it was down are not replayed, so `onOpen` runs on every (re)connect and
// the list reads its collection afresh then.

import type { ResourceEvent } from "./resources";

export type Link = "connecting" | "live" | "reconnecting";

export interface Subscription {
  close(): void;
}

export interface Handlers {
  onEvent(event: ResourceEvent): void;
  onOpen(): void;
  onLink(link: Link): void;
  // Whether the session still holds after the socket dropped: false stops reconnecting.
  sessionHolds(): Promise<boolean>;
}

const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 15_000;

export function subscriptionUrl(location: Location, resourceTypes: string[]): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const query = resourceTypes.map((t) => `resourceTypes=${encodeURIComponent(t)}`).join("&");
  return `${scheme}//${location.host}/v3/subscribe?${query}`;
}

/** The delay before the `attempt`-th reconnect: doubling from half a second, at most 15 s. */
export function retryDelay(attempt: number): number {
  return Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** Math.max(0, attempt - 1));
}

export function subscribe(resourceTypes: string[], handlers: Handlers): Subscription {
  let socket: WebSocket | null = null;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let attempt = 0;
  let closed = false;

  const open = (): void => {
    handlers.onLink(attempt === 0 ? "connecting" : "reconnecting");
    socket = new WebSocket(subscriptionUrl(window.location, resourceTypes));
    socket.onopen = () => {
      attempt = 0;
      handlers.onLink("live");
      handlers.onOpen();
    };
    socket.onmessage = (message: MessageEvent<string>) => {
      const event = JSON.parse(message.data) as ResourceEvent;
      if (event.name !== "ping") handlers.onEvent(event);
    };
    socket.onclose = () => {
      socket = null;
      if (closed) return;
      handlers.onLink("reconnecting");
      attempt += 1;
      // A probe that fails (the server is away) is no answer about the session: try again.
      void handlers
        .sessionHolds()
        .catch(() => true)
        .then((holds) => {
          if (holds && !closed) timer = setTimeout(open, retryDelay(attempt));
        });
    };
  };

  open();
  return {
    close() {
      closed = true;
      clearTimeout(timer);
      socket?.close();
    },
  };
}
