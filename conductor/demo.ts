import type { Conductor } from "./server.ts";

const say = (line: string): void => {
  process.stdout.write(line + "\n");
};

async function request(url: string, init: { method: string; body?: unknown }): Promise<unknown> {
  const response = await fetch(url, {
    method: init.method,
    headers: { "Content-Type": "application/json", "X-OpenStack-Ironic-API-Version": "latest" },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${init.method} ${url}: ${response.status} ${text}`);
  return text ? (JSON.parse(text) as unknown) : null;
}

/** Enrolls fake-hardware nodes and walks one from enroll to active, printing every state it passes. */
export async function runDemo(conductor: Conductor, url: string): Promise<void> {
  const api = `${url}/v1`;
  const names = ["demo-1", "demo-2", "demo-3"];
  for (const name of names) {
    if (await conductor.store.getNode(name)) continue;
    await request(`${api}/nodes`, {
      method: "POST",
      body: {
        name,
        driver: "fake-hardware",
        resource_class: "demo",
        properties: { cpus: 8, memory_mb: 16384, local_gb: 200, cpu_arch: "x86_64" },
        driver_info: { ipmi_address: "192.0.2.10", ipmi_password: "secret" },
      },
    });
  }
  const node = await conductor.store.getNode("demo-1");
  if (!node) return;
  say(`\nAnvil conductor on ${url} (embedded SQLite, fake-hardware demo nodes: ${names.join(", ")})`);
  const unsubscribe = conductor.events.subscribe((event) => {
    if (event.node !== node.uuid || event.type !== "provision") return;
    say(`  demo-1: ${String(event.from)} --${String(event.event)}--> ${String(event.provision_state)}`);
  });
  const settle = async (stable: string): Promise<void> => {
    for (;;) {
      const current = await conductor.store.getNode(node.uuid);
      if (!current || current.provision_state === stable) return;
      if (current.last_error) throw new Error(current.last_error);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const provision = async (target: string, stable: string): Promise<void> => {
    const current = await conductor.store.getNode(node.uuid);
    if (current?.provision_state === stable) return;
    await request(`${api}/nodes/demo-1/states/provision`, { method: "PUT", body: { target } });
    await settle(stable);
  };
  say(`demo-1 starts in "${node.provision_state}"`);
  if (node.provision_state === "enroll") await provision("manage", "manageable");
  if ((await conductor.store.getNode(node.uuid))?.provision_state === "manageable")
    await provision("provide", "available");
  if ((await conductor.store.getNode(node.uuid))?.provision_state === "available")
    await provision("active", "active");
  unsubscribe();
  say(`demo-1 is active.\n`);
  say(`Try the stock client (Debian: python3-ironicclient):`);
  say(`  baremetal --os-auth-type none --os-endpoint ${url} node list`);
  say(`  baremetal --os-auth-type none --os-endpoint ${url} node undeploy demo-1 --wait 60`);
  say(`or Anvil's CLI:  npm run anvil -- --url ${url} node list`);
  say(`Press Ctrl-C to stop.`);
}
