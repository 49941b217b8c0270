import { useState } from "preact/hooks";

import { ApiError, all, call } from "./api";
import type { V3Cluster } from "./clusters";
import { registrationCommands, type Command, type V3RegistrationToken } from "./clustercreate";
import { LiveBadge, useLive } from "./live";
import { messageOf, type ResourceEvent } from "./resources";
import { hrefOf } from "./route";

interface Props {
  clusterId: string;
  // Whether the cluster waits for its agent: then the page shows how to start it.
  register: boolean;
}

/** A cluster just made, followed live until it is active; for one to register, the commands
 * of its registration token. */
export function CreatedCluster({ clusterId, register }: Props) {
  const [cluster, setCluster] = useState<V3Cluster | null>(null);
  const [commands, setCommands] = useState<Command[] | null>(null);
  const [error, setError] = useState("");
  const id = encodeURIComponent(clusterId);

  const load = async () => {
    try {
      setCluster(await call<V3Cluster>("GET", `/v3/clusters/${id}`));
      if (register) {
        const tokens = await all<V3RegistrationToken>(`/v3/clusterregistrationtokens?clusterId=${id}`);
        setCommands(tokens.flatMap(registrationCommands));
      }
      setError("");
    } catch (failure) {
      if (failure instanceof ApiError && failure.sessionEnded) return;
      setError(messageOf(failure));
    }
  };
  const link = useLive(["cluster"], load, (event: ResourceEvent) => {
    if (event.resourceType !== "cluster" || event.data?.id !== clusterId) return;
    if (event.name === "resource.remove") setError(`Cluster ${clusterId} has been deleted.`);
    else setCluster(event.data as unknown as V3Cluster);
  });

  const name = cluster?.name || clusterId;
  const state = cluster?.state || "unknown";
  return (
    <section class="panel" aria-labelledby="created-title" data-testid="created">
      <h2 id="created-title">{`Cluster ${name} created`}</h2>
      <p>
        <span class={`state state-${state}`} aria-live="polite" data-testid="created-state">
          {state}
        </span>{" "}
        <LiveBadge link={link} />
        {cluster?.transitioningMessage && <span class="muted"> {cluster.transitioningMessage}</span>}
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {register &&
        (commands === null ? (
          <p role="status">Reading its registration command…</p>
        ) : commands.length === 0 ? (
          <p class="empty">Its registration token is not there yet.</p>
        ) : (
          commands.map((command, index) => (
            <CommandLine key={command.text} command={command} index={index} />
          ))
        ))}
      <a href={hrefOf({ page: "cluster", clusterId })}>{`Open ${name}`}</a>
    </section>
  );
}

function CommandLine({ command, index }: { command: Command; index: number }) {
  const [copied, setCopied] = useState("");
  const id = `command-${String(index)}`;
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(command.text);
      setCopied("Copied.");
    } catch (failure) {
      setCopied(`Not copied: ${messageOf(failure)}`);
    }
  };
  return (
    <div class="command">
      <span id={`${id}-label`} class="command-label">
        {command.label}
      </span>
      <pre aria-labelledby={`${id}-label`} data-testid="registration-command">
        <code>{command.text}</code>
      </pre>
      <button type="button" class="ghost" aria-describedby={`${id}-label`} onClick={() => void copy()}>
        Copy
      </button>
      <span role="status">{copied}</span>
    </div>
  );
}
