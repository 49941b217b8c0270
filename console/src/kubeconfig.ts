// A cluster's kubeconfig (the cluster action generateKubeconfig), saved as a file the
// browser downloads. The API returns it base64-encoded.

import { call } from "./api";

export function decodeKubeconfig(config: string): string {
  const bytes = Uint8Array.from(atob(config), (c) => c.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}

/** The file's name: the cluster's name where it makes a safe one, else its id. */
export function kubeconfigFileName(name: string, id: string): string {
  const safe = name.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^[.-]+|-+$/g, "");
  return `${safe || id}.yaml`;
}

export async function generateKubeconfig(clusterId: string): Promise<string> {
  const path = `/v3/clusters/${encodeURIComponent(clusterId)}?action=generateKubeconfig`;
  const answer = await call<{ config: string }>("POST", path);
  return decodeKubeconfig(answer.config);
}

/** Hand `text` to the browser as a download named `fileName`. */
export function download(text: string, fileName: string): void {
  const url = URL.createObjectURL(new Blob([text], { type: "application/yaml" }));
  const link = document.createElement("a");
  link.href = url;
  link.download = fileName;
  document.body.append(link);
  link.click();
  link.remove();
  URL.revokeObjectURL(url);
}
