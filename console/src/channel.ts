// Kubernetes' remote-command protocol over a WebSocket, as `kubectl exec` speaks it to
// `/k8s/clusters/{id}/…/pods/{name}/exec` (corral relays it message by message): every message
// is binary, its first byte the stream and the rest that stream's bytes. Pure: the terminal
// and its tests share it.

// Offered in order of preference: v5 adds closing one stream (stdin) without the socket.
export const PROTOCOLS = ["v5.channel.k8s.io", "v4.channel.k8s.io"] as const;

export const STDIN = 0;
export const STDOUT = 1;
export const STDERR = 2;
export const ERROR = 3; // the command's end: a Kubernetes Status, as JSON
export const RESIZE = 4;
export const CLOSE = 255; // v5: the stream named in the next byte is done

const encoder = new TextEncoder();

export function frame(channel: number, data: Uint8Array): Uint8Array<ArrayBuffer> {
  const message = new Uint8Array(data.length + 1);
  message[0] = channel;
  message.set(data, 1);
  return message;
}

/** What was typed, for the command's stdin. */
export function stdinFrame(text: string): Uint8Array<ArrayBuffer> {
  return frame(STDIN, encoder.encode(text));
}

/** The terminal's new size, as the kubelet reads it (`remotecommand.TerminalSize`). */
export function resizeFrame(cols: number, rows: number): Uint8Array<ArrayBuffer> {
  return frame(RESIZE, encoder.encode(JSON.stringify({ Width: cols, Height: rows })));
}

export interface Frame {
  channel: number;
  data: Uint8Array;
}

/** One message of the server; null for an empty one (no stream named). */
export function parseFrame(message: ArrayBuffer): Frame | null {
  const bytes = new Uint8Array(message);
  if (bytes.length === 0) return null;
  return { channel: bytes[0] ?? 0, data: bytes.subarray(1) };
}

export interface Ended {
  exitCode: number | null; // null: the command did not run to an exit (refused, failed to start)
  message: string;
}

/** How the command ended, from the Status on the error stream. */
export function endedOf(status: string): Ended {
  let parsed: unknown;
  try {
    parsed = JSON.parse(status);
  } catch {
    return { exitCode: null, message: status.trim() };
  }
  const body = (typeof parsed === "object" && parsed !== null ? parsed : {}) as {
    status?: string;
    message?: string;
    details?: { causes?: { reason?: string; message?: string }[] };
  };
  if (body.status === "Success") return { exitCode: 0, message: "" };
  const message = body.message ?? status.trim();
  const cause = body.details?.causes?.find((c) => c.reason === "ExitCode");
  // A kubelet names the code in the causes; kwok's streaming (through kube-apiserver's
  // translation to SPDY) only in the message, as Go's `exit status N`.
  const text = cause?.message ?? /\bexit status (\d+)\s*$/.exec(message)?.[1];
  const code = text !== undefined ? Number.parseInt(text, 10) : Number.NaN;
  return { exitCode: Number.isNaN(code) ? null : code, message };
}

export interface ExecTarget {
  clusterId: string;
  namespace: string;
  pod: string;
  container: string;
  command: readonly string[];
}

/** The exec address through corral's proxy, with a terminal: stdin and stdout only (the
 * terminal merges stderr into stdout, and Kubernetes refuses both at once). */
export function execPath(target: ExecTarget): string {
  const query = new URLSearchParams({ container: target.container });
  for (const word of target.command) query.append("command", word);
  query.append("stdin", "true");
  query.append("stdout", "true");
  query.append("tty", "true");
  const segments = ["k8s", "clusters", target.clusterId, "api", "v1", "namespaces", target.namespace,
    "pods", target.pod, "exec"].map(encodeURIComponent);
  return `/${segments.join("/")}?${query.toString()}`;
}

/** The WebSocket URL of a path on the server that served the page. */
export function socketUrl(location: Location, path: string): string {
  return `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}${path}`;
}

// The shell a terminal opens: bash where the image has it, else sh (as Rancher's shell does).
export const SHELL = [
  "/bin/sh",
  "-c",
  "TERM=xterm-256color; export TERM; if [ -x /bin/bash ]; then exec /bin/bash; else exec /bin/sh; fi",
] as const;
