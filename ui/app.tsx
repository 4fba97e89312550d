import { render } from "preact";
import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import {
  ApiRefusal,
  call,
  callText,
  followEvents,
  login,
  session,
  type DeployLog,
  type Node,
  type StreamEvent,
} from "./api.ts";
import { bytes, deployFigures, eta, type Progress } from "./format.ts";

/** Live state shared by the pages: the last progress of each write and whether the event stream is up. */
interface Live {
  progress: Record<string, Progress>;
  /** Node fields changed by events since the page loaded them (provision_state, power_state, …). */
  patches: Record<string, Partial<Node>>;
  live: boolean;
  seq: number;
}

const PAGE_SIZES = [100, 500, 1000];
const STATES = [
  "enroll",
  "manageable",
  "available",
  "active",
  "deploying",
  "wait call-back",
  "deploy failed",
  "cleaning",
  "clean wait",
  "clean failed",
  "inspecting",
  "inspect wait",
  "inspect failed",
  "error",
];

function useHash(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const on = () => setHash(location.hash);
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return hash;
}

function useLive(): Live {
  const [live, setLive] = useState<Live>({ progress: {}, patches: {}, live: false, seq: 0 });
  useEffect(
    () =>
      followEvents(
        (event: StreamEvent) =>
          setLive((current) => {
            const next = { ...current, seq: event.seq };
            if (event.type === "progress") {
              const p = (event.progress ?? {}) as {
                bytes_done?: number;
                bytes_total?: number | null;
                rate_bps?: number;
              };
              next.progress = {
                ...current.progress,
                [event.node]: {
                  done: p.bytes_done ?? 0,
                  total: p.bytes_total ?? null,
                  rate: p.rate_bps ?? 0,
                },
              };
            } else if (event.type === "provision" || event.type === "power" || event.type === "maintenance") {
              const patch: Partial<Node> = {};
              if (typeof event.provision_state === "string") patch.provision_state = event.provision_state;
              if (typeof event.power_state === "string") patch.power_state = event.power_state;
              if (typeof event.maintenance === "boolean") patch.maintenance = event.maintenance;
              next.patches = {
                ...current.patches,
                [event.node]: { ...current.patches[event.node], ...patch },
              };
              if (event.type === "provision" && !String(event.provision_state).startsWith("deploy")) {
                next.progress = { ...current.progress };
                delete next.progress[event.node];
              }
            }
            return next;
          }),
        (up) => setLive((current) => ({ ...current, live: up })),
      ),
    [],
  );
  return live;
}

function Login({ onDone }: { onDone: () => void }) {
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.target as HTMLFormElement);
    try {
      await login(String(form.get("user")), String(form.get("password")));
      onDone();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    <form class="login" onSubmit={submit}>
      <h2>Sign in to Anvil</h2>
      <input name="user" placeholder="user" autocomplete="username" />
      <input name="password" type="password" placeholder="password" autocomplete="current-password" />
      <button type="submit">Sign in</button>
      {error && <p class="error">{error}</p>}
    </form>
  );
}

function ProgressBar({ progress }: { progress: Progress }) {
  const { percent, left } = eta(progress);
  return (
    <div class="progress" data-testid="progress">
      <div class="bar" style={{ width: `${percent ?? 0}%` }} data-percent={percent?.toFixed(1) ?? ""} />
      <span>
        {bytes(progress.done)}
        {progress.total ? ` / ${bytes(progress.total)}` : ""} · {bytes(progress.rate)}/s · {left} left
      </span>
    </div>
  );
}

interface Filters {
  provision_state: string;
  resource_class: string;
  owner: string;
  maintenance: string;
  fault: string;
  search: string;
}

function Fleet({ live, onAuth }: { live: Live; onAuth: () => void }) {
  const [filters, setFilters] = useState<Filters>({
    provision_state: "",
    resource_class: "",
    owner: "",
    maintenance: "",
    fault: "",
    search: "",
  });
  const [sort, setSort] = useState<{ key: string; dir: "asc" | "desc" }>({ key: "name", dir: "asc" });
  const [pages, setPages] = useState<(string | undefined)[]>([undefined]);
  const [pageSize, setPageSize] = useState(PAGE_SIZES[0]!);
  const [nodes, setNodes] = useState<Node[]>([]);
  const [next, setNext] = useState<string | undefined>();
  const [counts, setCounts] = useState<Record<string, Record<string, number>>>({});
  const [error, setError] = useState<string | null>(null);
  const marker = pages[pages.length - 1];
  // loads overlap (a filter change, the event-driven refresh): only the latest one may set the page, or a
  // slow answer to an older query (another page size or filter) would replace the newer one's rows
  const latest = useRef(0);

  const load = useCallback(async () => {
    const ticket = ++latest.current;
    const query = new URLSearchParams({ limit: String(pageSize), sort_key: sort.key, sort_dir: sort.dir });
    for (const key of ["provision_state", "resource_class", "owner", "maintenance", "fault"] as const)
      if (filters[key]) query.set(key, filters[key]);
    if (marker) query.set("marker", marker);
    try {
      const [page, summary] = await Promise.all([
        call<{ nodes: Node[]; next?: string }>("GET", `/v1/nodes/detail?${query}`),
        // fleet-wide counts are for those who may see the whole fleet; others just go without them
        call<Record<string, Record<string, number>>>("GET", "/ui/summary").catch(() => ({})),
      ]);
      if (ticket !== latest.current) return;
      setNodes(page.nodes);
      setNext(page.next ? page.nodes[page.nodes.length - 1]?.uuid : undefined);
      setCounts(summary);
      setError(null);
    } catch (err) {
      if (ticket !== latest.current) return;
      if (err instanceof ApiRefusal && err.status === 401) onAuth();
      else setError((err as Error).message);
    }
  }, [filters, sort, marker, pageSize]);
  useEffect(() => void load(), [load]);
  // the timer below must call the load of the current query, not the one of the render that armed it
  const currentLoad = useRef(load);
  currentLoad.current = load;
  // stable states arriving from events refresh the counts, at most every second
  useEffect(() => {
    const timer = setTimeout(() => void currentLoad.current(), 1000);
    return () => clearTimeout(timer);
  }, [Object.keys(live.patches).length]);

  const set = (key: keyof Filters) => (e: Event) => {
    setFilters({ ...filters, [key]: (e.target as HTMLInputElement).value });
    setPages([undefined]);
  };
  const shown = useMemo(() => {
    const needle = filters.search.trim().toLowerCase();
    return nodes
      .map((n) => ({ ...n, ...live.patches[n.uuid] }))
      .filter((n) => !needle || (n.name ?? "").toLowerCase().includes(needle) || n.uuid.startsWith(needle));
  }, [nodes, live.patches, filters.search]);
  const header = (key: string, label: string) => (
    <th
      onClick={() => setSort({ key, dir: sort.key === key && sort.dir === "asc" ? "desc" : "asc" })}
      class={sort.key === key ? `sorted ${sort.dir}` : ""}
    >
      {label}
    </th>
  );
  return (
    <section>
      <div class="counts" data-testid="counts">
        {Object.entries(counts.provision_state ?? {}).map(([state, n]) => (
          <button
            class={`count state-${state.replace(/ /g, "-")}`}
            onClick={() => {
              setFilters({ ...filters, provision_state: filters.provision_state === state ? "" : state });
              setPages([undefined]);
            }}
          >
            <b>{n}</b> {state}
          </button>
        ))}
        {Object.entries(counts.power_state ?? {}).map(([state, n]) => (
          <span class="count power">
            <b>{n}</b> {state}
          </span>
        ))}
      </div>
      <div class="filters">
        <input
          placeholder="search name or uuid"
          value={filters.search}
          onInput={set("search")}
          data-testid="search"
        />
        <select value={filters.provision_state} onChange={set("provision_state")} data-testid="state-filter">
          <option value="">any state</option>
          {STATES.map((s) => (
            <option value={s}>{s}</option>
          ))}
        </select>
        <input placeholder="resource class" value={filters.resource_class} onChange={set("resource_class")} />
        <input placeholder="owner" value={filters.owner} onChange={set("owner")} />
        <input placeholder="fault" value={filters.fault} onChange={set("fault")} />
        <select value={filters.maintenance} onChange={set("maintenance")}>
          <option value="">maintenance: any</option>
          <option value="true">in maintenance</option>
          <option value="false">not in maintenance</option>
        </select>
        <select
          value={pageSize}
          onChange={(e) => {
            setPageSize(Number((e.target as HTMLSelectElement).value));
            setPages([undefined]);
          }}
          data-testid="page-size"
        >
          {PAGE_SIZES.map((n) => (
            <option value={n}>{n} a page</option>
          ))}
        </select>
        <span class={live.live ? "live on" : "live"}>{live.live ? "live" : "reconnecting"}</span>
      </div>
      {error && <p class="error">{error}</p>}
      <table data-testid="fleet">
        <thead>
          <tr>
            {header("name", "name")}
            {header("provision_state", "provision state")}
            {header("power_state", "power")}
            {header("resource_class", "class")}
            {header("owner", "owner")}
            <th>maintenance / fault</th>
            <th>progress</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((n) => (
            <tr key={n.uuid} data-node={n.name ?? n.uuid}>
              <td>
                <a href={`#/node/${n.uuid}`}>{n.name ?? n.uuid}</a>
              </td>
              <td class={`state state-${n.provision_state.replace(/ /g, "-")}`}>{n.provision_state}</td>
              <td>{n.power_state ?? "—"}</td>
              <td>{n.resource_class ?? ""}</td>
              <td>{n.owner ?? ""}</td>
              <td>{n.maintenance ? `yes${n.fault ? ` (${n.fault})` : ""}` : ""}</td>
              <td>{live.progress[n.uuid] && <ProgressBar progress={live.progress[n.uuid]!} />}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <div class="pager">
        <button disabled={pages.length === 1} onClick={() => setPages(pages.slice(0, -1))}>
          ← previous
        </button>
        <span>
          page {pages.length} · {shown.length} shown
        </span>
        <button disabled={!next} onClick={() => setPages([...pages, next])} data-testid="next-page">
          next →
        </button>
      </div>
    </section>
  );
}

/** ALGO:HEX becomes Ironic's image_os_hash_algo/value; anything else (an md5, a URL) image_checksum. */
function checksumOps(checksum: string): { op: string; path: string; value: string }[] {
  if (!checksum) return [];
  const match = /^(md5|sha256|sha512):([0-9a-fA-F]+)$/.exec(checksum);
  if (!match) return [{ op: "add", path: "/instance_info/image_checksum", value: checksum }];
  return [
    { op: "add", path: "/instance_info/image_os_hash_algo", value: match[1]! },
    { op: "add", path: "/instance_info/image_os_hash_value", value: match[2]! },
  ];
}

type Action = { label: string; run: () => Promise<unknown>; confirm: string };

/** The last image write: size, time, rate, and in a swarm where its bytes came from. */
function DeployFigures({ result }: { result: unknown }) {
  const rows = deployFigures(result);
  if (rows.length === 0) return null;
  return (
    <>
      <h3>Last deploy</h3>
      <dl data-testid="deploy-result">
        {rows.map(([label, value]) => (
          <>
            <dt>{label}</dt>
            <dd>{value}</dd>
          </>
        ))}
      </dl>
    </>
  );
}

function NodePage({ uuid, live, onAuth }: { uuid: string; live: Live; onAuth: () => void }) {
  const [node, setNode] = useState<Node | null>(null);
  const [extra, setExtra] = useState<{
    inventory?: Record<string, unknown>;
    ports: Record<string, unknown>[];
    allocations: Record<string, unknown>[];
    history: Record<string, unknown>[];
    logs: DeployLog[];
  }>({ ports: [], allocations: [], history: [], logs: [] });
  const [shownLog, setShownLog] = useState<{ id: string; text: string } | null>(null);
  const [message, setMessage] = useState<{ kind: "error" | "ok"; text: string } | null>(null);
  const [pending, setPending] = useState<Action | null>(null);
  const [image, setImage] = useState({ url: "", checksum: "" });

  const load = useCallback(async () => {
    try {
      setNode(await call<Node>("GET", `/v1/nodes/${uuid}`));
    } catch (err) {
      if (err instanceof ApiRefusal && err.status === 401) return onAuth();
      setMessage({ kind: "error", text: (err as Error).message });
      return;
    }
    const optional = <T,>(p: Promise<T>, fallback: T) => p.catch(() => fallback);
    const [inventory, ports, allocations, history, logs] = await Promise.all([
      optional(call<{ inventory: Record<string, unknown> }>("GET", `/v1/nodes/${uuid}/inventory`), undefined),
      optional(call<{ ports: Record<string, unknown>[] }>("GET", `/v1/ports/detail?node=${uuid}`), {
        ports: [],
      }),
      optional(call<{ allocations: Record<string, unknown>[] }>("GET", `/v1/allocations?node=${uuid}`), {
        allocations: [],
      }),
      optional(call<{ history: Record<string, unknown>[] }>("GET", `/v1/nodes/${uuid}/history`), {
        history: [],
      }),
      optional(call<{ logs: DeployLog[] }>("GET", `/v1/nodes/${uuid}/logs`), { logs: [] }),
    ]);
    setExtra({
      inventory: inventory?.inventory,
      ports: ports.ports,
      allocations: allocations.allocations,
      history: history.history,
      logs: logs.logs,
    });
  }, [uuid]);
  const showLog = async (id: string) => {
    try {
      setShownLog({
        id,
        text: await callText(`/v1/nodes/${uuid}/logs/${encodeURIComponent(id)}?format=text`),
      });
    } catch (err) {
      setMessage({ kind: "error", text: (err as Error).message });
    }
  };
  useEffect(() => void load(), [load]);
  const patch = live.patches[uuid];
  useEffect(() => void load(), [patch?.provision_state, patch?.power_state, patch?.maintenance]);

  if (!node) return <p class={message ? "error" : ""}>{message?.text ?? "loading…"}</p>;
  const provision =
    (target: string, body: Record<string, unknown> = {}) =>
    () =>
      call("PUT", `/v1/nodes/${uuid}/states/provision`, { target, ...body });
  const actions: Action[] = [
    {
      label: "manage",
      run: provision("manage"),
      confirm: "Verify its BMC credentials and make it manageable?",
    },
    {
      label: "inspect",
      run: provision("inspect"),
      confirm: "Boot it into the ramdisk and inspect its hardware?",
    },
    {
      label: "clean",
      run: provision("clean", { clean_steps: [{ interface: "deploy", step: "erase_devices_metadata" }] }),
      confirm: "Erase the disks' metadata (manual cleaning)?",
    },
    { label: "provide", run: provision("provide"), confirm: "Clean it and make it available?" },
    { label: "undeploy", run: provision("deleted"), confirm: "Tear down the instance and clean the disks?" },
    {
      label: "power on",
      run: () => call("PUT", `/v1/nodes/${uuid}/states/power`, { target: "power on" }),
      confirm: "Power it on?",
    },
    {
      label: "power off",
      run: () => call("PUT", `/v1/nodes/${uuid}/states/power`, { target: "power off" }),
      confirm: "Power it off?",
    },
    node.maintenance
      ? {
          label: "end maintenance",
          run: () => call("DELETE", `/v1/nodes/${uuid}/maintenance`),
          confirm: "Take it out of maintenance?",
        }
      : {
          label: "maintenance",
          run: () => call("PUT", `/v1/nodes/${uuid}/maintenance`, { reason: "set from the dashboard" }),
          confirm: "Put it in maintenance?",
        },
  ];
  const deploy: Action = {
    label: "deploy",
    confirm: `Deploy ${image.url} onto this node?`,
    run: async () => {
      const ops = [
        { op: "add", path: "/instance_info/image_source", value: image.url },
        ...checksumOps(image.checksum.trim()),
      ];
      await call("PATCH", `/v1/nodes/${uuid}`, ops);
      await call("PUT", `/v1/nodes/${uuid}/states/provision`, { target: "active" });
    },
  };
  const confirm = async () => {
    const action = pending!;
    setPending(null);
    // the last action's answer must not stand in for this one's while it is under way
    setMessage(null);
    try {
      await action.run();
      setMessage({ kind: "ok", text: `${action.label}: accepted` });
    } catch (err) {
      setMessage({ kind: "error", text: `${action.label} refused: ${(err as Error).message}` });
    }
    void load();
  };
  const shown = { ...node, ...patch };
  const inventory = extra.inventory as
    | {
        cpu?: { count?: number; model_name?: string; architecture?: string };
        memory?: { physical_mb?: number };
        disks?: { name: string; size: number; serial?: string | null; model?: string }[];
        interfaces?: { name: string; mac_address: string; ipv4_address?: string | null }[];
      }
    | undefined;
  return (
    <section class="node">
      <p>
        <a href="#/">← fleet</a>
      </p>
      <h2>
        {shown.name ?? shown.uuid}{" "}
        <span class={`state state-${shown.provision_state.replace(/ /g, "-")}`} data-testid="node-state">
          {shown.provision_state}
        </span>
      </h2>
      <p class="muted">
        {shown.uuid} · {shown.driver} · power {shown.power_state ?? "unknown"} · class{" "}
        {shown.resource_class ?? "—"}
        {shown.maintenance ? ` · maintenance${shown.fault ? ` (${shown.fault})` : ""}` : ""}
      </p>
      {shown.last_error && (
        <p class="error" data-testid="last-error">
          last error: {shown.last_error}
        </p>
      )}
      {live.progress[uuid] && <ProgressBar progress={live.progress[uuid]!} />}
      {message && (
        <p class={message.kind} data-testid="message">
          {message.text}
        </p>
      )}
      <div class="actions">
        {actions.map((a) => (
          <button onClick={() => setPending(a)} data-action={a.label}>
            {a.label}
          </button>
        ))}
      </div>
      <form
        class="deploy"
        onSubmit={(e) => {
          e.preventDefault();
          setPending(deploy);
        }}
      >
        <input
          placeholder="image URL"
          value={image.url}
          onInput={(e) => {
            const url = (e.target as HTMLInputElement).value;
            setImage((i) => ({ ...i, url }));
          }}
          data-testid="image-url"
        />
        <input
          placeholder="checksum (sha256:…)"
          value={image.checksum}
          onInput={(e) => {
            const checksum = (e.target as HTMLInputElement).value;
            setImage((i) => ({ ...i, checksum }));
          }}
          data-testid="image-checksum"
        />
        <button type="submit" data-action="deploy">
          deploy
        </button>
      </form>
      {pending && (
        <div class="confirm" role="dialog">
          <p>{pending.confirm}</p>
          <button onClick={() => void confirm()} data-testid="confirm">
            yes, {pending.label}
          </button>
          <button onClick={() => setPending(null)}>cancel</button>
        </div>
      )}
      <div class="grid">
        <div>
          <h3>Hardware</h3>
          {inventory ? (
            <dl>
              <dt>CPUs</dt>
              <dd>
                {inventory.cpu?.count} × {inventory.cpu?.model_name} ({inventory.cpu?.architecture})
              </dd>
              <dt>Memory</dt>
              <dd>{inventory.memory?.physical_mb} MiB</dd>
              <dt>Disks</dt>
              <dd>
                {inventory.disks?.map((d) => (
                  <div>
                    {d.name} · {bytes(d.size)} · {d.model ?? ""} · serial {d.serial ?? "—"}
                  </div>
                ))}
              </dd>
              <dt>NICs</dt>
              <dd>
                {inventory.interfaces?.map((i) => (
                  <div>
                    {i.name} · {i.mac_address} {i.ipv4_address ?? ""}
                  </div>
                ))}
              </dd>
            </dl>
          ) : (
            <p class="muted">not inspected</p>
          )}
          <DeployFigures result={shown.driver_internal_info?.deploy_result} />
          <h3>Traits</h3>
          <p>{shown.traits?.length ? shown.traits.join(", ") : <span class="muted">none</span>}</p>
        </div>
        <div>
          <h3>Ports</h3>
          {extra.ports.map((p) => (
            <div>
              {String(p.address)} {p.pxe_enabled ? "(PXE)" : ""}
            </div>
          ))}
          <h3>Allocations</h3>
          {extra.allocations.length ? (
            extra.allocations.map((a) => (
              <div>
                {String(a.name ?? a.uuid)} · {String(a.state)}
              </div>
            ))
          ) : (
            <p class="muted">none</p>
          )}
          <h3>Deploy logs</h3>
          {extra.logs.length > 0 ? (
            <ul class="logs" data-testid="deploy-logs">
              {[...extra.logs].reverse().map((l) => (
                <li>
                  <a
                    href={`#/node/${uuid}`}
                    onClick={(e) => {
                      e.preventDefault();
                      void showLog(l.id);
                    }}
                  >
                    {l.created_at.replace("T", " ").slice(0, 19)}
                  </a>{" "}
                  {l.reason} · {Math.ceil(l.size / 1024)} KiB
                </li>
              ))}
            </ul>
          ) : (
            <p class="muted">none</p>
          )}
          {shownLog ? (
            <pre class="log" data-testid="deploy-log-text">
              {shownLog.text}
            </pre>
          ) : null}
          <h3>History</h3>
          <ol class="history" data-testid="history">
            {extra.history
              .slice(-20)
              .reverse()
              .map((h) => (
                <li class={String(h.severity ?? "").toLowerCase()}>
                  <time>
                    {String(h.created_at ?? "")
                      .replace("T", " ")
                      .slice(0, 19)}
                  </time>{" "}
                  {String(h.event ?? "")}
                </li>
              ))}
          </ol>
        </div>
      </div>
    </section>
  );
}

function App() {
  const hash = useHash();
  const live = useLive();
  const [needLogin, setNeedLogin] = useState(false);
  const onAuth = () => setNeedLogin(true);
  const node = /^#\/node\/([^/]+)$/.exec(hash)?.[1];
  return (
    <main>
      <header>
        <a href="#/">
          <h1>Anvil</h1>
        </a>
        {session.token && (
          <button
            onClick={() => {
              session.token = null;
              setNeedLogin(true);
            }}
          >
            sign out
          </button>
        )}
      </header>
      {needLogin ? (
        <Login onDone={() => setNeedLogin(false)} />
      ) : node ? (
        <NodePage uuid={decodeURIComponent(node)} live={live} onAuth={onAuth} />
      ) : (
        <Fleet live={live} onAuth={onAuth} />
      )}
    </main>
  );
}

render(<App />, document.getElementById("app")!);
