/** Human-readable sizes, rates and durations for the dashboard. */

export function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value >= 100 || unit === 0 ? 0 : 1)} ${units[unit]}`;
}

export function duration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "…";
  if (seconds < 60) return `${Math.round(seconds)} s`;
  const m = Math.floor(seconds / 60);
  return m < 60 ? `${m} min ${Math.round(seconds % 60)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

export interface Progress {
  done: number;
  total: number | null;
  rate: number;
}

/** Percent done and time left of a write, when the total is known. */
export function eta(p: Progress): { percent: number | null; left: string } {
  if (!p.total) return { percent: null, left: "…" };
  const percent = Math.min(100, (100 * p.done) / p.total);
  return { percent, left: p.rate > 0 ? duration((p.total - p.done) / p.rate) : "…" };
}

const share = (part: number, whole: number): string =>
  whole > 0 ? ` (${Math.round((100 * part) / whole)} %)` : "";
const count = (v: unknown): number | null =>
  typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : null;
const entries = (v: unknown): [string, unknown][] =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? Object.entries(v) : [];

/**
 * The last deploy's figures (driver_internal_info.deploy_result, the agent's write_image result) as
 * label/value rows: what was written and how fast, and in a swarm where the bytes came from (the store, each
 * peer) and what went wrong with peers. What the page cannot read as a figure is left out, never thrown on.
 */
export function deployFigures(result: unknown): [string, string][] {
  const r = Object.fromEntries(entries(result));
  const rows: [string, string][] = [];
  const image = count(r.image_bytes);
  const written = count(r.bytes_written);
  const ms = count(r.duration_ms);
  if (image !== null) rows.push(["image", bytes(image)]);
  if (written !== null) rows.push(["written", bytes(written)]);
  if (ms !== null) {
    rows.push(["took", duration(ms / 1000)]);
    // a denormal duration makes the rate Infinity: no row rather than "Infinity TiB/s"
    const rate = image !== null && ms > 0 ? (image * 1000) / ms : Number.NaN;
    if (Number.isFinite(rate)) rows.push(["rate", `${bytes(rate)}/s`]);
  }
  const s = Object.fromEntries(entries(r.swarm));
  const store = count(s.bytes_from_store);
  const peers = count(s.bytes_from_peers);
  if (store === null || peers === null) return rows;
  rows.push(["from the store", bytes(store) + share(store, store + peers)]);
  rows.push(["from peers", bytes(peers) + share(peers, store + peers)]);
  const perPeer = entries(s.per_peer)
    .map(([peer, n]): [string, number] => [peer, count(n) ?? 0])
    .sort((a, b) => b[1] - a[1]);
  // a wave has few peers, but the page names the biggest five and counts the rest
  for (const [peer, n] of perPeer.slice(0, 5)) rows.push([`  peer ${peer.slice(0, 8)}`, bytes(n)]);
  if (perPeer.length > 5) rows.push(["  other peers", String(perPeer.length - 5)]);
  const served = count(s.bytes_served);
  if (served !== null) rows.push(["served to peers", bytes(served)]);
  const bad = count(s.bad_chunks);
  if (bad) rows.push(["bad chunks refetched", String(bad)]);
  for (const [peer, why] of entries(s.dropped_peers))
    rows.push([`dropped ${peer.slice(0, 8)}`, typeof why === "string" ? why : JSON.stringify(why)]);
  if (typeof s.fallback === "string" && s.fallback) rows.push(["swarm stopped", s.fallback]);
  return rows;
}
