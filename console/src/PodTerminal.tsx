// The exec terminal: xterm.js over the API's exec WebSocket (corral's `/k8s/clusters/{id}`
// proxy, Kubernetes' channel protocol). Loaded only when a terminal is opened, so the page
// shell does not carry xterm's bytes.

import "@xterm/xterm/css/xterm.css";

import { FitAddon } from "@xterm/addon-fit";
import { Terminal } from "@xterm/xterm";
import { useEffect, useRef, useState } from "preact/hooks";

import {
  ERROR,
  PROTOCOLS,
  SHELL,
  STDERR,
  STDOUT,
  endedOf,
  execPath,
  parseFrame,
  resizeFrame,
  socketUrl,
  stdinFrame,
  type Ended,
} from "./channel";

export interface TerminalTarget {
  clusterId: string;
  namespace: string;
  pod: string;
  container: string;
}

// xterm's DOM renderer writes its colours and cell sizes into <style> elements it adds, whose
// text the page's Content-Security-Policy (`style-src 'self'`, nothing inline) does not apply
// (xtermjs/xterm.js#4445). The same rules go into a constructed stylesheet, which the policy
// allows, each time xterm rewrites them.
function adoptStyles(root: HTMLElement): () => void {
  const sheet = new CSSStyleSheet();
  document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
  const copy = () => {
    sheet.replaceSync([...root.querySelectorAll("style")].map((s) => s.textContent).join("\n"));
  };
  const observer = new MutationObserver(copy);
  observer.observe(root, { subtree: true, childList: true, characterData: true });
  copy();
  return () => {
    observer.disconnect();
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== sheet);
  };
}

function themeOf(element: HTMLElement) {
  const style = getComputedStyle(element);
  const value = (name: string) => style.getPropertyValue(name).trim();
  return { background: value("--surface"), foreground: value("--text"), cursor: value("--accent"),
    selectionBackground: value("--border") };
}

function endText(ended: Ended | null, reason: string): string {
  if (ended?.exitCode === 0) return "The shell has exited.";
  if (ended?.exitCode !== undefined && ended.exitCode !== null) {
    return `The shell has exited with code ${String(ended.exitCode)}.`;
  }
  if (ended) return `The command ended: ${ended.message}`;
  return reason ? `Disconnected: ${reason}` : "Disconnected (the cluster refused the terminal, or the pod is gone).";
}

export default function PodTerminal({ target }: { target: TerminalTarget }) {
  const host = useRef<HTMLDivElement>(null);
  const [status, setStatus] = useState("Connecting…");

  useEffect(() => {
    const element = host.current;
    if (!element) return;
    const unadopt = adoptStyles(element);
    const terminal = new Terminal({
      cursorBlink: true,
      fontFamily: 'ui-monospace, "DejaVu Sans Mono", "Liberation Mono", monospace',
      fontSize: 14,
      scrollback: 1000,
      theme: themeOf(element),
    });
    const fit = new FitAddon();
    terminal.loadAddon(fit);
    terminal.open(element);
    fit.fit();

    const socket = new WebSocket(
      socketUrl(window.location, execPath({ ...target, command: SHELL })),
      [...PROTOCOLS],
    );
    socket.binaryType = "arraybuffer";
    let ended: Ended | null = null;
    const send = (message: Uint8Array<ArrayBuffer>) => {
      if (socket.readyState === WebSocket.OPEN) socket.send(message);
    };
    socket.onopen = () => {
      setStatus("Connected");
      send(resizeFrame(terminal.cols, terminal.rows));
      terminal.focus();
    };
    socket.onmessage = (message: MessageEvent<ArrayBuffer>) => {
      const frame = parseFrame(message.data);
      if (!frame || frame.data.length === 0) return;
      if (frame.channel === STDOUT || frame.channel === STDERR) terminal.write(frame.data);
      else if (frame.channel === ERROR) ended = endedOf(new TextDecoder().decode(frame.data));
    };
    socket.onclose = (event) => {
      setStatus(endText(ended, event.reason));
    };
    const typed = terminal.onData((data) => {
      send(stdinFrame(data));
    });
    const resized = terminal.onResize(({ cols, rows }) => {
      send(resizeFrame(cols, rows));
    });
    const observer = new ResizeObserver(() => {
      fit.fit();
    });
    observer.observe(element);

    return () => {
      observer.disconnect();
      typed.dispose();
      resized.dispose();
      socket.onclose = null;
      socket.close();
      terminal.dispose();
      unadopt();
    };
  }, [target.clusterId, target.namespace, target.pod, target.container]);

  return (
    <div class="terminal-box">
      <p role="status" class="muted" data-testid="terminal-status">
        {status}
      </p>
      <div ref={host} class="terminal" data-testid="terminal" />
    </div>
  );
}
