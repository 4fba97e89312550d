import { z } from "zod";
import { stringOpt, takePositionals } from "../args.ts";
import type { Command } from "../command.ts";
import { UsageError } from "../errors.ts";
import { fetchNode } from "../node-state.ts";
import { printJson, println } from "../output.ts";
import { renderRecord, renderTable } from "../table.ts";

const JsonRecord = z.record(z.string(), z.unknown());

const COLUMNS = [
  ["UUID", "uuid"],
  ["Address", "address"],
  ["Node UUID", "node_uuid"],
  ["PXE Enabled", "pxe_enabled"],
] as const;

const list: Command = {
  words: ["port", "list"],
  synopsis: "[--node ID]",
  summary: "List ports (a node's NICs), optionally of one node.",
  options: { node: { type: "string" } },
  async run(ctx, { values, positionals }) {
    takePositionals(positionals, []);
    const node = stringOpt(values, "node");
    const query = node ? `?node=${encodeURIComponent(node)}` : "";
    const ports = await ctx.client.listAll(`/v1/ports/detail${query}`, "ports");
    if (ctx.output.json) return printJson(ctx.output, { ports });
    println(
      ctx.output.stdout,
      renderTable(
        COLUMNS.map(([header]) => header),
        ports.map((port) => COLUMNS.map(([, key]) => port[key])),
      ),
    );
  },
};

function parsePxe(text: string | undefined): boolean | undefined {
  if (text === undefined) return undefined;
  if (text === "true") return true;
  if (text === "false") return false;
  throw new UsageError(`--pxe-enabled wants true or false, not "${text}"`);
}

const create: Command = {
  words: ["port", "create"],
  synopsis: "--node ID MAC [--pxe-enabled true|false]",
  summary: "Add a port (MAC address) to a node.",
  options: { node: { type: "string" }, "pxe-enabled": { type: "string" } },
  async run(ctx, { values, positionals }) {
    const [address] = takePositionals(positionals, ["MAC"]);
    const ident = stringOpt(values, "node");
    if (!ident) throw new UsageError("--node is required");
    // the API wants the node's UUID; accept names too
    const node = await fetchNode(ctx.client, ident);
    const body: Record<string, unknown> = { node_uuid: node.uuid, address };
    const pxe = parsePxe(stringOpt(values, "pxe-enabled"));
    if (pxe !== undefined) body.pxe_enabled = pxe;
    const port = JsonRecord.parse(await ctx.client.request("POST", "/v1/ports", body));
    if (ctx.output.json) printJson(ctx.output, port);
    else println(ctx.output.stdout, renderRecord(port));
  },
};

const show: Command = {
  words: ["port", "show"],
  synopsis: "UUID",
  summary: "Show one port.",
  options: {},
  async run(ctx, { positionals }) {
    const [uuid] = takePositionals(positionals, ["UUID"]);
    const port = JsonRecord.parse(await ctx.client.get(`/v1/ports/${encodeURIComponent(uuid!)}`));
    if (ctx.output.json) printJson(ctx.output, port);
    else println(ctx.output.stdout, renderRecord(port));
  },
};

const remove: Command = {
  words: ["port", "delete"],
  synopsis: "UUID",
  summary: "Delete a port.",
  options: {},
  async run(ctx, { positionals }) {
    const [uuid] = takePositionals(positionals, ["UUID"]);
    await ctx.client.request("DELETE", `/v1/ports/${encodeURIComponent(uuid!)}`);
    if (!ctx.output.json) println(ctx.output.stdout, `Deleted port ${uuid!}`);
  },
};

export const portCommands: readonly Command[] = [list, create, show, remove];
