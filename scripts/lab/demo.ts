import { labDown, labUp } from "./lab.ts";
import { provision, setInstanceImage, startWalk, testImage } from "./walk.ts";

const MARKER = /ANVIL-TEST-IMAGE-BOOTED \S+/;

/**
 * One node from enroll to active, with the stock client: what `npm run lab -- demo` shows. Starts its own
 * lab (one VM) and takes it down afterwards, unless keep is set.
 */
export async function runLabDemo(options: {
  dir: string;
  port: number;
  keep?: boolean;
  /** The lab secured (`demo --tls --auth http_basic`): the CLI signs in and dials https. */
  tls?: boolean;
  auth?: "noauth" | "http_basic";
}): Promise<void> {
  const started = Date.now();
  const say = (text: string): void =>
    console.log(`[${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${text}`);
  say("starting the lab: one QEMU node behind an ipmi_sim BMC, and a conductor");
  const state = await labUp({
    dir: options.dir,
    nodes: 1,
    port: options.port,
    ...(options.tls ? { tls: true } : {}),
    ...(options.auth ? { auth: options.auth } : {}),
  });
  if (state.tls || state.auth)
    say(
      `secured: ${state.conductor?.url ?? ""}${state.auth ? `, http_basic as ${state.auth.username}` : ""}${state.tls ? `, the ramdisk pins CA sha256 ${state.tls.caFingerprint.slice(0, 16)}…` : ""}`,
    );
  const walk = await startWalk(state);
  try {
    const { node, probe } = walk;
    say(
      `enrolled ${node.name} (driver ipmi, BMC 127.0.0.1:${node.bmcPort}, port ${node.mac}); console: ${node.dir}/vm/serial.log`,
    );
    for (const verb of ["manage", "inspect", "provide"]) {
      say(`baremetal node ${verb} ${node.name} --wait`);
      await provision(walk, [verb]);
      const shown = await walk.bm.node(node.name);
      say(`  → ${shown.provision_state}, ${shown.power_state ?? "power unknown"}`);
    }
    const image = await testImage(state);
    await setInstanceImage(walk, image);
    say(`baremetal node deploy ${node.name} --wait   (image ${image.source})`);
    await provision(walk, ["deploy"]);
    say(`  → ${(await walk.bm.node(node.name)).provision_state}; waiting for the image on the console`);
    const console_ = await probe.waitForSerial(MARKER, 180_000);
    say(`the node booted its new disk: ${MARKER.exec(console_)?.[0] ?? ""}`);
    const actions = await probe.powerActions();
    say(`power actions through the BMC: ${actions.on} on, ${actions.off} off, ${actions.reset} reset`);
  } finally {
    walk.stopEvents();
    if (options.keep)
      say(`the lab stays up in ${state.dir}: \`npm run lab -- down --dir ${options.dir}\` stops it`);
    else {
      await labDown(options.dir);
      say("lab stopped");
    }
  }
}
