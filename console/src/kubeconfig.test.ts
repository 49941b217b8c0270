import { describe, expect, it } from "vitest";

import { decodeKubeconfig, kubeconfigFileName } from "./kubeconfig";

describe("kubeconfig", () => {
  it("decodes the API's base64, UTF-8 included", () => {
    const text = "apiVersion: v1\nclusters:\n- name: démo\n";
    const encoded = btoa(String.fromCharCode(...new TextEncoder().encode(text)));
    expect(decodeKubeconfig(encoded)).toBe(text);
  });

  it("names the file after the cluster, safely", () => {
    expect(kubeconfigFileName("demo", "c-abcde")).toBe("demo.yaml");
    expect(kubeconfigFileName("../prod east", "c-abcde")).toBe("prod-east.yaml");
    expect(kubeconfigFileName("///", "c-abcde")).toBe("c-abcde.yaml");
  });
});
