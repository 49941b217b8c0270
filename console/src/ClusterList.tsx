import { useMemo, useRef, useState } from "preact/hooks";

import { ApiError, listing } from "./api";
import { applyEvent, shown, toRow, type ClusterRow, type V3Cluster } from "./clusters";
import { LiveBadge, useLive } from "./live";
import { hrefOf } from "./route";
import { useVirtualRows } from "./virtual";

const ROW_HEIGHT = 48;
const COLUMNS = ["Name", "State", "Version", "Driver", "Nodes", "Pods", "Conditions"];

function rowsOf(clusters: V3Cluster[]): ReadonlyMap<string, ClusterRow> {
  return new Map(clusters.map((c) => [c.id, toRow(c)]));
}

export function ClusterList() {
  const [rows, setRows] = useState<ReadonlyMap<string, ClusterRow> | null>(null);
  const [error, setError] = useState("");
  const [filter, setFilter] = useState("");
  const [creatable, setCreatable] = useState(false);

  const load = async () => {
    try {
      const listed = await listing<V3Cluster>("/v3/clusters");
      setRows(rowsOf(listed.data));
      setCreatable(listed.createTypes.cluster !== undefined);
      setError("");
    } catch (failure) {
      if (failure instanceof ApiError && failure.sessionEnded) return;
      setError(failure instanceof Error ? failure.message : String(failure));
    }
  };
  const link = useLive(["cluster"], load, (event) => {
    setRows((current) => (current ? applyEvent(current, event) : current));
  });

  const visible = useMemo(() => (rows ? shown(rows, filter) : []), [rows, filter]);

  return (
    <section class="page" aria-labelledby="clusters-title">
      <header class="page-head">
        <h1 id="clusters-title">Clusters</h1>
        <LiveBadge link={link} />
        <span class="spacer-flex" />
        {creatable && (
          <a class="button" href={hrefOf({ page: "create-cluster" })}>
            Create cluster
          </a>
        )}
      </header>
      <div class="toolbar">
        <label for="cluster-filter">Filter</label>
        <input
          id="cluster-filter"
          type="search"
          placeholder="name, id, driver or state"
          value={filter}
          onInput={(e) => {
            setFilter(e.currentTarget.value);
          }}
        />
        <span class="count" aria-live="polite">
          {rows === null ? "Loading…" : `${visible.length} of ${rows.size} clusters`}
        </span>
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {rows !== null && <ClusterTable rows={visible} />}
    </section>
  );
}

export function ClusterTable({ rows }: { rows: ClusterRow[] }) {
  const scroller = useRef<HTMLDivElement>(null);
  const { items, totalSize } = useVirtualRows(rows.length, ROW_HEIGHT, scroller);
  return (
    <div
      class="table"
      role="table"
      aria-label="Clusters"
      aria-rowcount={rows.length + 1}
      data-testid="cluster-table"
    >
      <div role="rowgroup" class="table-head">
        <div role="row" class="row" aria-rowindex={1}>
          {COLUMNS.map((name) => (
            <span role="columnheader" key={name}>
              {name}
            </span>
          ))}
        </div>
      </div>
      {/* Focusable, so arrow keys and Page Up/Down scroll the list from the keyboard. */}
      <div class="table-body" ref={scroller} tabIndex={0} role="rowgroup" aria-label="Cluster rows">
        {rows.length === 0 && <p class="empty">No clusters to show.</p>}
        <div class="spacer" style={{ height: `${totalSize}px` }}>
          {items.map((item) => {
            const row = rows[item.index];
            if (!row) return null;
            return (
              <div
                role="row"
                class="row"
                key={row.id}
                aria-rowindex={item.index + 2}
                data-cluster={row.id}
                style={{ transform: `translateY(${item.start}px)`, height: `${ROW_HEIGHT}px` }}
              >
                <Cells row={row} />
              </div>
            );
          })}
        </div>
      </div>
    </div>
  );
}

function Cells({ row }: { row: ClusterRow }) {
  const pods = row.pods === null ? "–" : `${row.pods}${row.podCapacity ? ` / ${row.podCapacity}` : ""}`;
  return (
    <>
      <span role="cell" class="name">
        <a href={hrefOf({ page: "cluster", clusterId: row.id })}>
          <strong>{row.name}</strong>
        </a>
        <small>{row.id}</small>
      </span>
      <span role="cell">
        <span class={`state state-${row.state || "unknown"}`} title={row.message}>
          {row.state || "unknown"}
        </span>
      </span>
      <span role="cell">{row.version || "–"}</span>
      <span role="cell">{row.driver || "–"}</span>
      <span role="cell" class="num">
        {row.nodes ?? "–"}
      </span>
      <span role="cell" class="num">
        {pods}
      </span>
      <span role="cell" class="conditions">
        {row.conditions.length === 0 ? (
          "–"
        ) : row.problems.length === 0 ? (
          <span class="ok">{`All ${row.conditions.length} healthy`}</span>
        ) : (
          row.problems.map((c) => (
            <span class="problem" key={c.type} title={c.message ?? ""}>
              {`${c.type}: ${c.status}${c.reason ? ` (${c.reason})` : ""}`}
            </span>
          ))
        )}
      </span>
    </>
  );
}
