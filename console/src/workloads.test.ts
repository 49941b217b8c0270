import { describe, expect, it } from "vitest";

import {
  EMPTY_FORM,
  INPUTS,
  clusterOf,
  endpointUrls,
  envInput,
  parsePorts,
  pauseToggle,
  podsByWorkload,
  readyText,
  rollbackChoices,
  workloadBody,
  workloadErrorInput,
  type V3Pod,
  type V3Workload,
} from "./workloads";

describe("workloadBody", () => {
  it("makes a deployment of one container named after the workload", () => {
    const body = workloadBody({ ...EMPTY_FORM, name: " web ", namespaceId: "shop", image: "nginx:1.27", scale: "3", ports: "8080, 53/udp" });
    expect(body).toEqual({
      type: "workload",
      workloadType: "deployment",
      name: "web",
      namespaceId: "shop",
      scale: 3,
      containers: [{ name: "web", image: "nginx:1.27", ports: [
        { containerPort: 8080, protocol: "TCP" },
        { containerPort: 53, protocol: "UDP" },
      ] }],
    });
  });

  it("sends what is not a number as typed, for the API to name", () => {
    const body = workloadBody({ ...EMPTY_FORM, scale: "many", ports: "http" });
    expect(body.scale).toBe("many");
    expect(body.name).toBe("");
    expect((body.containers as { ports: unknown[] }[])[0]?.ports).toEqual([{ containerPort: "http", protocol: "TCP" }]);
  });

  it("sends every environment row, in order, and the quantities typed", () => {
    const body = workloadBody({
      ...EMPTY_FORM,
      name: "web",
      env: [{ name: " MODE ", value: " prod " }, { name: "", value: "" }],
      cpuRequest: "250m",
      memoryRequest: " 64Mi ",
      memoryLimit: "lots",
    });
    expect((body.containers as Record<string, unknown>[])[0]).toMatchObject({
      env: [{ name: "MODE", value: " prod " }, { name: "", value: "" }],
      resources: { requests: { cpu: "250m", memory: "64Mi" }, limits: { memory: "lots" } },
    });
  });

  it("leaves ports, env and resources out when none were typed", () => {
    expect(parsePorts("  ")).toEqual([]);
    const containers = workloadBody({ ...EMPTY_FORM, name: "a", image: "b" }).containers as object[];
    expect(containers[0]).toEqual({ name: "a", image: "b" });
  });
});

describe("workloadErrorInput", () => {
  it("puts each refusal at the input that holds its field", () => {
    expect(workloadErrorInput("name")).toBe(INPUTS.name);
    expect(workloadErrorInput("namespaceId")).toBe(INPUTS.namespaceId);
    expect(workloadErrorInput("scale")).toBe(INPUTS.scale);
    expect(workloadErrorInput("containers[0].image")).toBe(INPUTS.image);
    expect(workloadErrorInput("containers")).toBe(INPUTS.image);
    expect(workloadErrorInput("containers[0].ports[1].containerPort")).toBe(INPUTS.ports);
    expect(workloadErrorInput("containers[0].name")).toBe(INPUTS.name);
    expect(workloadErrorInput("containers[0].env[1].name")).toBe(envInput(1, "name"));
    expect(workloadErrorInput("containers[0].env[0].value")).toBe(envInput(0, "value"));
    expect(workloadErrorInput("containers[0].env[2]")).toBe(envInput(2, "name"));
    expect(workloadErrorInput("containers[0].resources.limits.memory")).toBe(INPUTS.memoryLimit);
    expect(workloadErrorInput("containers[0].resources.requests.memory")).toBe(INPUTS.memoryRequest);
    expect(workloadErrorInput("containers[0].resources.limits.cpu")).toBe(INPUTS.cpuLimit);
    expect(workloadErrorInput("containers[0].resources.limits")).toBe(INPUTS.cpuLimit);
    expect(workloadErrorInput("containers[0].resources")).toBe(INPUTS.cpuRequest);
  });

  it("has no input for a field the form does not fill", () => {
    expect(workloadErrorInput("")).toBeNull();
    expect(workloadErrorInput("requestsCpu")).toBeNull();
    expect(workloadErrorInput("volumes[0]")).toBeNull();
    expect(workloadErrorInput("containers[0].env")).toBeNull();
  });
});

const workload = (fields: Partial<V3Workload>): V3Workload => ({
  id: "deployment:shop:web", name: "web", namespaceId: "shop", workloadType: "deployment", ...fields,
});

describe("rows", () => {
  it("counts ready pods against the scale, or against the pods wanted for other kinds", () => {
    expect(readyText(workload({ scale: 3, status: { readyReplicas: 2 } }))).toBe("2 / 3");
    expect(readyText(workload({ workloadType: "daemonSet", status: { replicas: 4, readyReplicas: 4 } }))).toBe("4 / 4");
    expect(readyText(workload({}))).toBe("0 / 0");
  });

  it("links the endpoints a browser can open", () => {
    const urls = endpointUrls(workload({ publicEndpoints: [
      { addresses: ["10.0.0.1", "fd00::1"], port: 30080, protocol: "TCP" },
      { addresses: ["10.0.0.1"], port: 30053, protocol: "UDP" },
      { addresses: ["10.0.0.9"], port: 443, protocol: "HTTPS", hostname: "shop.example", path: "/api" },
    ] }));
    expect(urls).toEqual(["http://10.0.0.1:30080", "http://[fd00::1]:30080", "https://shop.example/api"]);
  });

  it("groups pods under their workload, by name, leaving out those of none", () => {
    const pod = (name: string, workloadId: string | null): V3Pod => ({ id: `shop:${name}`, name, namespaceId: "shop", workloadId });
    const grouped = podsByWorkload([pod("web-b", "deployment:shop:web"), pod("lone", null), pod("web-a", "deployment:shop:web")]);
    expect([...grouped.keys()]).toEqual(["deployment:shop:web"]);
    expect(grouped.get("deployment:shop:web")?.map((p) => p.name)).toEqual(["web-a", "web-b"]);
  });

  it("takes the cluster from a project's id", () => {
    expect(clusterOf("c-abcde:p-xyz12")).toBe("c-abcde");
  });
});

describe("pauseToggle", () => {
  const base: V3Workload = { id: "deployment:shop:web", name: "web", namespaceId: "shop", workloadType: "deployment" };
  const actions = { pause: "https://corral/v3/x?action=pause", resume: "https://corral/v3/x?action=resume" };

  it("offers Pause while it rolls out and Resume while it is paused", () => {
    expect(pauseToggle({ ...base, actions })).toEqual({ action: "pause", label: "Pause", url: actions.pause });
    expect(pauseToggle({ ...base, paused: true, actions })).toEqual({ action: "resume", label: "Resume", url: actions.resume });
  });

  it("offers nothing the workload's actions do not carry", () => {
    expect(pauseToggle(base)).toBeNull();
    expect(pauseToggle({ ...base, paused: true, actions: { pause: actions.pause } })).toBeNull();
  });
});

describe("rollbackChoices", () => {
  it("offers every revision but the current, newest first", () => {
    const choices = rollbackChoices([
      { id: "replicaset:shop:web-1", name: "web-1", revision: 1 },
      { id: "replicaset:shop:web-3", name: "web-3", revision: 3, current: true },
      { id: "replicaset:shop:web-2", name: "web-2", revision: 2 },
    ]);
    expect(choices.map((r) => r.revision)).toEqual([2, 1]);
  });
});
