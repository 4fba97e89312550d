import { z } from "zod";
import {
  flagOpt,
  keyValues,
  keyValuesFromEnv,
  secondsOpt,
  stringOpt,
  stringsOpt,
  takePositionals,
  type Values,
} from "../args.ts";
import type { Command } from "../command.ts";
import { configDriveValue } from "../configdrive-arg.ts";
import { CliError, UsageError } from "../errors.ts";
import { addOps, type PatchOp } from "../json-patch.ts";
import { nodeLabel, nodePath } from "../node-state.ts";
import { watchNode, watchPower } from "../node-watch.ts";
import { liveSink, printJson, println, type CommandContext } from "../output.ts";
import { renderRecord, renderTable } from "../table.ts";

const JsonRecord = z.record(z.string(), z.unknown());

const WAIT_OPTIONS = {
  wait: { type: "boolean" },
  timeout: { type: "string" },
} as const;

const LIST_COLUMNS = [
  ["UUID", "uuid"],
  ["Name", "name"],
  ["Instance UUID", "instance_uuid"],
  ["Power State", "power_state"],
  ["Provisioning State", "provision_state"],
  ["Maintenance", "maintenance"],
] as const;

const LONG_COLUMNS = [
  ...LIST_COLUMNS,
  ["Target Provision State", "target_provision_state"],
  ["Driver", "driver"],
  ["Resource Class", "resource_class"],
  ["Reservation", "reservation"],
  ["Last Error", "last_error"],
] as const;

function showNode(ctx: CommandContext, node: Record<string, unknown>): void {
  if (ctx.output.json) printJson(ctx.output, node);
  else println(ctx.output.stdout, renderRecord(node));
}

const list: Command = {
  words: ["node", "list"],
  synopsis: "[--long] [--state S] [--resource-class RC] [--maintenance]",
  summary: "List nodes.",
  details: [
    "--long              more columns (driver, resource class, target state, last error)",
    "--state S           only nodes in provision state S (quote states with spaces)",
    "--resource-class RC only nodes of resource class RC",
    "--maintenance       only nodes in maintenance",
  ],
  options: {
    long: { type: "boolean" },
    state: { type: "string" },
    "resource-class": { type: "string" },
    maintenance: { type: "boolean" },
  },
  async run(ctx, { values, positionals }) {
    takePositionals(positionals, []);
    const long = flagOpt(values, "long");
    const query = new URLSearchParams();
    const state = stringOpt(values, "state");
    const rc = stringOpt(values, "resource-class");
    if (state) query.set("provision_state", state);
    if (rc) query.set("resource_class", rc);
    if (flagOpt(values, "maintenance")) query.set("maintenance", "true");
    const qs = query.size ? `?${query}` : "";
    const nodes = await ctx.client.listAll(`/v1/nodes${long ? "/detail" : ""}${qs}`, "nodes");
    if (ctx.output.json) return printJson(ctx.output, { nodes });
    const columns = long ? LONG_COLUMNS : LIST_COLUMNS;
    println(
      ctx.output.stdout,
      renderTable(
        columns.map(([header]) => header),
        nodes.map((node) => columns.map(([, key]) => node[key])),
      ),
    );
  },
};

const show: Command = {
  words: ["node", "show"],
  synopsis: "ID",
  summary: "Show one node (by UUID or name); BMC passwords appear as ******.",
  options: {},
  async run(ctx, { positionals }) {
    const [ident] = takePositionals(positionals, ["ID"]);
    showNode(ctx, JsonRecord.parse(await ctx.client.get(nodePath(ident!))));
  },
};

const create: Command = {
  words: ["node", "create"],
  synopsis:
    "--driver D [--name N] [--property k=v]... [--driver-info k=v]... [--driver-info-env k=VAR]... [--resource-class RC] [--port MAC]...",
  summary: "Enroll a node (it starts in enroll); --port also creates its ports.",
  details: [
    "--driver-info-env k=VAR  sets driver_info.k from $VAR (keeps BMC passwords out of argv)",
    "example: BMC_PW=... anvil node create --driver ipmi --name n1 --driver-info ipmi_address=10.0.0.5 \\",
    "           --driver-info ipmi_username=admin --driver-info-env ipmi_password=BMC_PW --port 52:54:00:12:34:56",
  ],
  options: {
    driver: { type: "string" },
    name: { type: "string" },
    property: { type: "string", multiple: true },
    "driver-info": { type: "string", multiple: true },
    "driver-info-env": { type: "string", multiple: true },
    "instance-info": { type: "string", multiple: true },
    "resource-class": { type: "string" },
    port: { type: "string", multiple: true },
  },
  async run(ctx, { values, positionals }) {
    takePositionals(positionals, []);
    const driver = stringOpt(values, "driver");
    if (!driver) throw new UsageError("--driver is required");
    const body: Record<string, unknown> = { driver };
    const name = stringOpt(values, "name");
    if (name) body.name = name;
    const rc = stringOpt(values, "resource-class");
    if (rc) body.resource_class = rc;
    const properties = keyValues(stringsOpt(values, "property"), "property");
    const driverInfo = {
      ...keyValues(stringsOpt(values, "driver-info"), "driver-info"),
      ...keyValuesFromEnv(stringsOpt(values, "driver-info-env"), { option: "driver-info-env", env: ctx.env }),
    };
    const instanceInfo = keyValues(stringsOpt(values, "instance-info"), "instance-info");
    if (Object.keys(properties).length) body.properties = properties;
    if (Object.keys(driverInfo).length) body.driver_info = driverInfo;
    if (Object.keys(instanceInfo).length) body.instance_info = instanceInfo;
    const node = JsonRecord.parse(await ctx.client.request("POST", "/v1/nodes", body));
    for (const address of stringsOpt(values, "port")) {
      await ctx.client
        .request("POST", "/v1/ports", { node_uuid: node.uuid, address })
        .catch((error: unknown) => {
          throw new CliError(
            `Node ${String(node.uuid)} was created, but its port ${address} was not: ${(error as Error).message}`,
          );
        });
    }
    showNode(ctx, node);
  },
};

const set: Command = {
  words: ["node", "set"],
  synopsis:
    "ID [--property k=v]... [--instance-info k=v]... [--driver-info k=v]... [--driver-info-env k=VAR]... [--extra k=v]... [--name N] [--resource-class RC]",
  summary: "Change a node's fields (sent as a JSON Patch).",
  details: ["--driver-info-env k=VAR  sets driver_info.k from $VAR (keeps BMC passwords out of argv)"],
  options: {
    property: { type: "string", multiple: true },
    "instance-info": { type: "string", multiple: true },
    "driver-info": { type: "string", multiple: true },
    "driver-info-env": { type: "string", multiple: true },
    extra: { type: "string", multiple: true },
    name: { type: "string" },
    "resource-class": { type: "string" },
  },
  async run(ctx, { values, positionals }) {
    const [ident] = takePositionals(positionals, ["ID"]);
    const patch: PatchOp[] = [
      ...addOps("properties", keyValues(stringsOpt(values, "property"), "property")),
      ...addOps("instance_info", keyValues(stringsOpt(values, "instance-info"), "instance-info")),
      ...addOps("driver_info", keyValues(stringsOpt(values, "driver-info"), "driver-info")),
      ...addOps(
        "driver_info",
        keyValuesFromEnv(stringsOpt(values, "driver-info-env"), { option: "driver-info-env", env: ctx.env }),
      ),
      ...addOps("extra", keyValues(stringsOpt(values, "extra"), "extra")),
    ];
    const name = stringOpt(values, "name");
    if (name !== undefined) patch.push({ op: "add", path: "/name", value: name });
    const rc = stringOpt(values, "resource-class");
    if (rc !== undefined) patch.push({ op: "add", path: "/resource_class", value: rc });
    if (!patch.length) throw new UsageError("nothing to set");
    showNode(ctx, JsonRecord.parse(await ctx.client.request("PATCH", nodePath(ident!), patch)));
  },
};

/** The deploy options turned into instance_info patches. */
function deployPatch(values: Values): PatchOp[] {
  const info: Record<string, string> = {};
  const image = stringOpt(values, "image");
  if (image) info.image_source = image;
  const bmap = stringOpt(values, "bmap");
  if (bmap) info.image_bmap = bmap;
  const checksum = stringOpt(values, "checksum");
  if (checksum) {
    const match = /^(md5|sha256|sha512):([0-9a-fA-F]+)$/.exec(checksum);
    if (match) {
      info.image_os_hash_algo = match[1]!;
      info.image_os_hash_value = match[2]!.toLowerCase();
    } else if (/^https?:\/\//.test(checksum)) info.image_checksum = checksum;
    else throw new UsageError(`--checksum wants ALGO:HEX (md5, sha256, sha512) or a URL, not "${checksum}"`);
  }
  return addOps("instance_info", info);
}

interface VerbSpec {
  command: string;
  verb: string;
  summary: string;
  options?: Command["options"];
  details?: readonly string[];
}

const VERBS: readonly VerbSpec[] = [
  {
    command: "manage",
    verb: "manage",
    summary: "Verify the BMC credentials and move the node to manageable.",
  },
  { command: "provide", verb: "provide", summary: "Clean the node and make it available." },
  { command: "inspect", verb: "inspect", summary: "Inspect the node's hardware (manageable -> manageable)." },
  {
    command: "clean",
    verb: "clean",
    summary: "Run manual cleaning on a manageable node.",
    options: { "clean-steps": { type: "string" } },
    details: ['--clean-steps JSON   e.g. \'[{"interface": "deploy", "step": "erase_devices_metadata"}]\''],
  },
  {
    command: "deploy",
    verb: "active",
    summary: "Deploy an image to an available node.",
    options: {
      image: { type: "string" },
      bmap: { type: "string" },
      checksum: { type: "string" },
      configdrive: { type: "string" },
    },
    details: [
      "--image URL            sets instance_info.image_source first",
      "--bmap URL             sets instance_info.image_bmap: a bmaptool block map, so only mapped ranges are fetched",
      "--checksum ALGO:HEX    sets instance_info.image_os_hash_algo/value (md5, sha256, sha512)",
      "--configdrive FILE|JSON  a JSON object ({meta_data, user_data, network_data}) or a file (JSON, or an ISO)",
      "example: anvil node deploy n1 --image http://images/disk.qcow2 --checksum sha256:ab12... --wait",
    ],
  },
  {
    command: "undeploy",
    verb: "deleted",
    summary: "Tear the instance down (then cleaning makes the node available).",
  },
  { command: "rebuild", verb: "rebuild", summary: "Redeploy the node's image." },
  {
    command: "abort",
    verb: "abort",
    summary: "Abort the node's current wait state (it lands in the failed state).",
  },
  { command: "unhold", verb: "unhold", summary: "Continue a node held in clean hold or deploy hold." },
];

function verbCommand(spec: VerbSpec): Command {
  return {
    words: ["node", spec.command],
    synopsis: `ID${
      spec.options
        ? ` ${Object.keys(spec.options)
            .map((o) => `[--${o} ...]`)
            .join(" ")}`
        : ""
    } [--wait [--timeout S]]`,
    summary: spec.summary,
    details: [
      ...(spec.details ?? []),
      "--wait       follow the node until it settles; exit 1 if it fails",
      "--timeout S  give up waiting after S seconds (default: no limit)",
    ],
    options: { ...spec.options, ...WAIT_OPTIONS },
    async run(ctx, { values, positionals }) {
      const [ident] = takePositionals(positionals, ["ID"]);
      const timeoutS = secondsOpt(values, "timeout");
      const body: Record<string, unknown> = { target: spec.verb };
      if (spec.command === "deploy") {
        const patch = deployPatch(values);
        const configdrive = stringOpt(values, "configdrive");
        if (configdrive !== undefined) body.configdrive = configDriveValue(configdrive);
        if (patch.length) await ctx.client.request("PATCH", nodePath(ident!), patch);
      }
      const steps = stringOpt(values, "clean-steps");
      if (steps !== undefined) {
        try {
          body.clean_steps = JSON.parse(steps) as unknown;
        } catch {
          throw new UsageError("--clean-steps wants a JSON list");
        }
      }
      const action = async (): Promise<void> => {
        await ctx.client.request("PUT", `${nodePath(ident!)}/states/provision`, body);
      };
      if (!flagOpt(values, "wait")) {
        await action();
        if (!ctx.output.json) println(ctx.output.stdout, `Requested ${spec.command} of node ${ident!}`);
        return;
      }
      const node = await watchNode({
        client: ctx.client,
        node: ident!,
        sink: liveSink(ctx.output),
        goal: { expectFailure: spec.verb === "abort" },
        timeoutS,
        action,
      });
      if (ctx.output.json) printJson(ctx.output, node);
    },
  };
}

const POWER_TARGETS = {
  on: { target: "power on", soft: "power on", desired: "power on" },
  off: { target: "power off", soft: "soft power off", desired: "power off" },
  reboot: { target: "rebooting", soft: "soft rebooting", desired: "power on" },
} as const;

const power: Command = {
  words: ["node", "power"],
  synopsis: "on|off|reboot ID [--soft] [--wait [--timeout S]]",
  summary: "Power a node on or off, or reboot it.",
  options: { soft: { type: "boolean" }, ...WAIT_OPTIONS },
  async run(ctx, { values, positionals }) {
    const [action, ident] = takePositionals(positionals, ["on|off|reboot", "ID"]);
    if (action !== "on" && action !== "off" && action !== "reboot")
      throw new UsageError(`power wants on, off or reboot, not "${action}"`);
    const spec = POWER_TARGETS[action];
    const target = flagOpt(values, "soft") ? spec.soft : spec.target;
    await ctx.client.request("PUT", `${nodePath(ident!)}/states/power`, { target });
    if (!flagOpt(values, "wait")) {
      if (!ctx.output.json) println(ctx.output.stdout, `Requested ${target} of node ${ident!}`);
      return;
    }
    const node = await watchPower({
      client: ctx.client,
      node: ident!,
      desired: spec.desired,
      timeoutS: secondsOpt(values, "timeout"),
    });
    if (ctx.output.json) printJson(ctx.output, node);
    else println(ctx.output.stdout, `${nodeLabel(node)}: ${node.power_state ?? "unknown"}`);
  },
};

const maintenance: Command = {
  words: ["node", "maintenance"],
  synopsis: "set|unset ID [--reason R]",
  summary: "Put a node in maintenance (the conductor leaves it alone) or take it out.",
  options: { reason: { type: "string" } },
  async run(ctx, { values, positionals }) {
    const [action, ident] = takePositionals(positionals, ["set|unset", "ID"]);
    const path = `${nodePath(ident!)}/maintenance`;
    if (action === "set") {
      const reason = stringOpt(values, "reason");
      await ctx.client.request("PUT", path, reason === undefined ? {} : { reason });
    } else if (action === "unset") {
      if (stringOpt(values, "reason") !== undefined) throw new UsageError("--reason goes with set");
      await ctx.client.request("DELETE", path);
    } else throw new UsageError(`maintenance wants set or unset, not "${action}"`);
    if (!ctx.output.json)
      println(ctx.output.stdout, `Maintenance ${action === "set" ? "set on" : "unset on"} node ${ident!}`);
  },
};

const remove: Command = {
  words: ["node", "delete"],
  synopsis: "ID...",
  summary: "Delete nodes; carries on past failures and exits 1 if any failed.",
  options: {},
  async run(ctx, { positionals }) {
    if (!positionals.length) throw new UsageError("missing ID");
    const failures: string[] = [];
    for (const ident of positionals) {
      try {
        await ctx.client.request("DELETE", nodePath(ident));
        if (!ctx.output.json) println(ctx.output.stdout, `Deleted node ${ident}`);
      } catch (error) {
        if (!(error instanceof CliError)) throw error;
        failures.push(`Failed to delete node ${ident}: ${error.message}`);
      }
    }
    if (failures.length) throw new CliError(failures.join("\n"));
  },
};

const wait: Command = {
  words: ["node", "wait"],
  synopsis: "ID [--state S] [--timeout S]",
  summary: "Follow a node until it settles (or reaches --state); exit 1 if it fails.",
  details: ["Prints a line per provision state change and, while an image is written, its progress."],
  options: { state: { type: "string" }, timeout: { type: "string" } },
  async run(ctx, { values, positionals }) {
    const [ident] = takePositionals(positionals, ["ID"]);
    const node = await watchNode({
      client: ctx.client,
      node: ident!,
      sink: liveSink(ctx.output),
      goal: { state: stringOpt(values, "state") },
      timeoutS: secondsOpt(values, "timeout"),
    });
    if (ctx.output.json) printJson(ctx.output, node);
  },
};

const LogList = z.object({
  logs: z.array(z.object({ id: z.string(), created_at: z.string(), reason: z.string(), size: z.number() })),
});

const logs: Command = {
  words: ["node", "logs"],
  synopsis: "ID [--collect | --show LOG]",
  summary: "List a node's deploy logs (the ramdisk's, kept on failures), collect them now, or print one.",
  details: [
    "--collect    asks the node's agent (it must be connected) for its logs now",
    "--show LOG   prints log LOG as text: each file under a ==> name <== line",
    "The archive itself (gzip tar, as Ironic stores it): GET /v1/nodes/ID/logs/LOG",
  ],
  options: { collect: { type: "boolean" }, show: { type: "string" } },
  async run(ctx, { values, positionals }) {
    const [ident] = takePositionals(positionals, ["ID"]);
    const path = `${nodePath(ident!)}/logs`;
    const shown = stringOpt(values, "show");
    if (shown !== undefined) {
      ctx.output.stdout.write(await ctx.client.text(`${path}/${encodeURIComponent(shown)}?format=text`));
      return;
    }
    if (flagOpt(values, "collect")) {
      const info = JsonRecord.parse(await ctx.client.request("POST", path));
      if (ctx.output.json) return printJson(ctx.output, info);
      return println(ctx.output.stdout, `Collected ${String(info.id)}`);
    }
    const { logs: list } = LogList.parse(await ctx.client.get(path));
    if (ctx.output.json) return printJson(ctx.output, { logs: list });
    println(
      ctx.output.stdout,
      renderTable(
        ["ID", "Created At", "Reason", "Size"],
        list.map((l) => [l.id, l.created_at, l.reason, l.size]),
      ),
    );
  },
};

export const nodeCommands: readonly Command[] = [
  list,
  show,
  create,
  set,
  ...VERBS.map(verbCommand),
  power,
  maintenance,
  remove,
  wait,
  logs,
];
