import { describe, expect, it } from "vitest";

import {
  INPUT,
  base64Of,
  catalogVersions,
  importBody,
  importErrorInput,
  newPool,
  poolInput,
  provisionBody,
  provisionErrorInput,
  registerErrorInput,
  registrationCommands,
} from "./clustercreate";

describe("creating a cluster", () => {
  it("sends the kubeconfig as base64 of its UTF-8 bytes", () => {
    const text = "apiVersion: v1\nkind: Config # é\n";
    const body = importBody(" demo ", text) as { name: string; importedConfig: { kubeConfig: string } };
    expect(body.name).toBe("demo");
    expect(new TextDecoder().decode(Uint8Array.from(atob(body.importedConfig.kubeConfig), (c) => c.charCodeAt(0)))).toBe(text);
    expect(base64Of("")).toBe("");
  });

  it("puts each of the import's refusals at the input its fieldName names", () => {
    expect(importErrorInput("importedConfig.kubeConfig")).toBe(INPUT.kubeconfig);
    expect(importErrorInput("kubeConfig")).toBe(INPUT.kubeconfig);
    expect(importErrorInput("displayName")).toBe(INPUT.importName);
    expect(importErrorInput("")).toBeNull();
    expect(importErrorInput("driver")).toBeNull();
    expect(registerErrorInput("name")).toBe(INPUT.registerName);
    expect(registerErrorInput("importedConfig.kubeConfig")).toBeNull();
  });

  it("offers the catalog's versions newest first, none for a value that does not parse", () => {
    expect(catalogVersions('{"v1.35.8": {}, "v1.36.3": {}, "v1.9.0": {}}')).toEqual(["v1.36.3", "v1.35.8", "v1.9.0"]);
    expect(catalogVersions("not json")).toEqual([]);
    expect(catalogVersions('["v1.36.3"]')).toEqual([]);
  });

  it("makes the /v1 object with the flavour's configuration and each pool's template", () => {
    const pool = { ...newPool(0, "nt-abcde"), quantity: "3" };
    const body = provisionBody({ name: " edge ", flavour: "k3s", version: "v1.36.3", pools: [pool] });
    expect(body).toEqual({
      type: "provisioning.svc.io.cluster",
      metadata: { name: "edge", namespace: "fleet-default" },
      spec: {
        kubernetesVersion: "v1.36.3",
        k3sConfig: { kubernetesVersion: "v1.36.3" },
        rkeConfig: {
          machinePools: [{
            name: "workers", quantity: 3, workerRole: true, etcdRole: false, controlPlaneRole: false,
            machineConfigRef: { kind: "NodeTemplate", name: "nt-abcde" },
          }],
        },
      },
    });
  });

  it("leaves the API to judge what is not a number or not chosen", () => {
    const body = provisionBody({
      name: "",
      flavour: "rke2",
      version: "",
      pools: [{ ...newPool(1), quantity: "two" }, { ...newPool(2), quantity: "" }],
    }) as { spec: { rke2Config: object; kubernetesVersion?: string; rkeConfig: { machinePools: Record<string, unknown>[] } } };
    expect(body.spec.rke2Config).toEqual({});
    expect(body.spec.kubernetesVersion).toBeUndefined();
    const [first, second] = body.spec.rkeConfig.machinePools;
    expect(first?.quantity).toBe("two");
    expect(first?.machineConfigRef).toBeUndefined();
    expect(second && "quantity" in second).toBe(false);
  });

  it("puts each of the view's refusals at its input", () => {
    expect(provisionErrorInput("metadata.name")).toBe(INPUT.provisionName);
    expect(provisionErrorInput("spec.kubernetesVersion")).toBe(INPUT.version);
    expect(provisionErrorInput("spec.rke2Config.kubernetesVersion")).toBe(INPUT.version);
    expect(provisionErrorInput("spec.rkeConfig.machinePools[1].name")).toBe(poolInput(1, "name"));
    expect(provisionErrorInput("spec.rkeConfig.machinePools[0].machineConfigRef")).toBe(poolInput(0, "template"));
    expect(provisionErrorInput("spec.rkeConfig.machinePools[0].machineConfigRef.kind")).toBe(poolInput(0, "template"));
    expect(provisionErrorInput("spec.rkeConfig.machinePools[2].autoscalingMinSize")).toBe(poolInput(2, "quantity"));
    expect(provisionErrorInput("spec.rkeConfig.machinePools[0].workerRole")).toBe(poolInput(0, "roles"));
    expect(provisionErrorInput("spec.rkeConfig.networking.plugin")).toBeNull();
    expect(provisionErrorInput("")).toBeNull();
  });

  it("shows an imported cluster's manifest commands and a provisioned one's node commands", () => {
    const imported = {
      id: "c-abcde:default-token",
      command: "kubectl apply -f https://corral/v3/import/x_c-abcde.yaml",
      insecureCommand: "curl --insecure -sfL https://corral/v3/import/x_c-abcde.yaml | kubectl apply -f -",
      nodeCommand: "",
      insecureNodeCommand: "",
      manifestUrl: "https://corral/v3/import/x_c-abcde.yaml",
    };
    expect(registrationCommands(imported).map((c) => c.text)).toEqual([imported.command, imported.insecureCommand]);
    const provisioned = { id: "c-m-abcdefgh:default-token", manifestUrl: "", nodeCommand: "curl … --worker", insecureNodeCommand: "curl -k … --worker" };
    expect(registrationCommands(provisioned).map((c) => c.text)).toEqual(["curl … --worker", "curl -k … --worker"]);
    expect(registrationCommands({ id: "x", manifestUrl: "u", command: "same", insecureCommand: "same" })).toHaveLength(1);
  });
});
