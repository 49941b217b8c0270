import { describe, expect, it } from "vitest";

import {
  ERROR,
  RESIZE,
  STDIN,
  STDOUT,
  endedOf,
  execPath,
  frame,
  parseFrame,
  resizeFrame,
  socketUrl,
  stdinFrame,
} from "./channel";

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

describe("frames", () => {
  it("puts the stream's number before its bytes", () => {
    expect([...frame(7, new Uint8Array([1, 2]))]).toEqual([7, 1, 2]);
    const typed = stdinFrame("ls é\r");
    expect(typed[0]).toBe(STDIN);
    expect(text(typed.subarray(1))).toBe("ls é\r");
  });

  it("sends a resize as the kubelet's terminal size", () => {
    const resize = resizeFrame(120, 40);
    expect(resize[0]).toBe(RESIZE);
    expect(JSON.parse(text(resize.subarray(1)))).toEqual({ Width: 120, Height: 40 });
  });

  it("reads the stream and its bytes of a server message, and nothing of an empty one", () => {
    const parsed = parseFrame(new Uint8Array([STDOUT, 104, 105]).buffer);
    expect(parsed?.channel).toBe(STDOUT);
    expect(text(parsed?.data ?? new Uint8Array())).toBe("hi");
    expect(parseFrame(new Uint8Array([]).buffer)).toBeNull();
    // The server names each stream once with no data when the socket opens.
    expect(parseFrame(new Uint8Array([ERROR]).buffer)?.data.length).toBe(0);
  });
});

describe("endedOf", () => {
  it("reads success as exit code 0", () => {
    expect(endedOf('{"metadata":{},"status":"Success"}')).toEqual({ exitCode: 0, message: "" });
  });

  it("reads a non-zero exit code from the Status's causes", () => {
    const status = JSON.stringify({
      status: "Failure",
      message: "command terminated with non-zero exit code: exit status 4",
      reason: "NonZeroExitCode",
      details: { causes: [{ reason: "ExitCode", message: "4" }] },
    });
    expect(endedOf(status)).toEqual({
      exitCode: 4,
      message: "command terminated with non-zero exit code: exit status 4",
    });
  });

  it("reads the exit code kwok puts only in the message", () => {
    const status = JSON.stringify({ status: "Failure", message: "Internal error occurred: error executing " +
      "command in container: cmd wait: /bin/sh -c exit 3: exit status 3" });
    expect(endedOf(status).exitCode).toBe(3);
  });

  it("keeps the message of a failure with no exit code", () => {
    const status = '{"status":"Failure","message":"no exec found for container \\"app\\""}';
    expect(endedOf(status)).toEqual({ exitCode: null, message: 'no exec found for container "app"' });
    expect(endedOf("not json\n")).toEqual({ exitCode: null, message: "not json" });
  });
});

describe("execPath", () => {
  it("names the pod through corral's proxy with a terminal and no stderr", () => {
    const path = execPath({ clusterId: "c-abc", namespace: "web", pod: "shop-1", container: "app",
      command: ["/bin/sh", "-c", "echo a && b"] });
    const url = new URL(path, "https://corral.example");
    expect(url.pathname).toBe("/k8s/clusters/c-abc/api/v1/namespaces/web/pods/shop-1/exec");
    expect(url.searchParams.getAll("command")).toEqual(["/bin/sh", "-c", "echo a && b"]);
    expect(url.searchParams.get("container")).toBe("app");
    expect(url.searchParams.get("tty")).toBe("true");
    expect(url.searchParams.get("stdin")).toBe("true");
    expect(url.searchParams.has("stderr")).toBe(false);
  });

  it("keeps every name one path segment", () => {
    const path = execPath({ clusterId: "c-abc", namespace: "../x", pod: "a/b", container: "c", command: ["sh"] });
    expect(path.startsWith("/k8s/clusters/c-abc/api/v1/namespaces/..%2Fx/pods/a%2Fb/exec?")).toBe(true);
  });
});

describe("socketUrl", () => {
  it("follows the page's scheme and host", () => {
    expect(socketUrl({ protocol: "https:", host: "corral:8443" } as Location, "/k8s/x")).toBe("wss://corral:8443/k8s/x");
    expect(socketUrl({ protocol: "http:", host: "h" } as Location, "/p")).toBe("ws://h/p");
  });
});
