import { useRef, useState } from "preact/hooks";

import { call, pathOf } from "./api";
import type { Cluster } from "./ClusterPage";
import { ConfirmDialog } from "./ConfirmDialog";
import { updateProgress } from "./etcdbackups";

/** **Rotate certificates** where the cluster's actions offer it: a confirmation, then the
 * API's answer and the cluster's `Updated` condition while the control plane rolls. */
export function RotateCertificates({ cluster }: { cluster: Cluster }) {
  const [confirming, setConfirming] = useState(false);
  const [withCa, setWithCa] = useState(false);
  const [answer, setAnswer] = useState("");
  const opener = useRef<HTMLButtonElement>(null);
  const rotate = cluster.actions?.rotateCertificates;
  if (rotate === undefined) return null;
  const progress = updateProgress(cluster.status?.conditions);
  return (
    <>
      <button type="button" class="ghost" ref={opener} onClick={() => { setConfirming(true); }}>
        {progress?.running && answer ? "Rotating certificates…" : "Rotate certificates"}
      </button>
      {answer && (
        <p role="status" class="rotation" data-testid="rotation-progress">
          {progress?.running ? progress.text : answer}
        </p>
      )}
      {confirming && (
        <ConfirmDialog
          title={`Rotate the certificates of ${cluster.name || cluster.id}?`}
          confirm="Rotate certificates"
          pending="Rotating…"
          run={async () => {
            const done = await call<{ message?: string } | null>("POST", pathOf(rotate), { caCertificates: withCa });
            setAnswer(done?.message || "Certificate rotation asked for.");
          }}
          onClose={() => {
            setConfirming(false);
            opener.current?.focus();
          }}
        >
          <p>
            corral issues new certificates for the control plane's components and rolls them;
            the cluster's API is briefly unavailable while each restarts.
          </p>
          <label class="check">
            <input
              type="checkbox"
              checked={withCa}
              onChange={(e) => {
                setWithCa(e.currentTarget.checked);
              }}
            />
            Replace the cluster's certificate authority too, and every certificate it signs
          </label>
        </ConfirmDialog>
      )}
    </>
  );
}
