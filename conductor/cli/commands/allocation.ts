import { z } from "zod";
import { integerOpt, stringOpt, stringsOpt, takePositionals } from "../args.ts";
import type { Command } from "../command.ts";
import { CliError, UsageError } from "../errors.ts";
import { printJson, println, type CommandContext } from "../output.ts";
import { renderRecord, renderTable } from "../table.ts";

const Allocation = z.looseObject({
  uuid: z.string(),
  state: z.string(),
  last_error: z.string().nullable().optional(),
});

const COLUMNS = [
  ["UUID", "uuid"],
  ["Name", "name"],
  ["Resource Class", "resource_class"],
  ["State", "state"],
  ["Node UUID", "node_uuid"],
] as const;

const path = (ident: string): string => `/v1/allocations/${encodeURIComponent(ident)}`;

function showAllocation(ctx: CommandContext, allocation: Record<string, unknown>): void {
  if (ctx.output.json) printJson(ctx.output, allocation);
  else println(ctx.output.stdout, renderRecord(allocation));
}

const list: Command = {
  words: ["allocation", "list"],
  synopsis: "",
  summary: "List allocations.",
  options: {},
  async run(ctx, { positionals }) {
    takePositionals(positionals, []);
    const allocations = await ctx.client.listAll("/v1/allocations", "allocations");
    if (ctx.output.json) return printJson(ctx.output, { allocations });
    println(
      ctx.output.stdout,
      renderTable(
        COLUMNS.map(([header]) => header),
        allocations.map((a) => COLUMNS.map(([, key]) => a[key])),
      ),
    );
  },
};

const MATCH = ["exact", "best_fit"] as const;

const create: Command = {
  words: ["allocation", "create"],
  synopsis:
    "--resource-class RC [--name N] [--trait T]... [--memory-mb N] [--vcpus N] [--local-gb N] [--cpu-arch A] [--match exact|best_fit]",
  summary: "Reserve an available node matching a resource class, traits and a flavor-like spec.",
  details: [
    "--match best_fit (default) takes the smallest node that satisfies the spec; exact wants an exact fit.",
    "Exits 1 with the allocation's last_error when no node matches.",
    "example: anvil allocation create --resource-class baremetal --memory-mb 16384 --vcpus 8 --local-gb 100",
  ],
  options: {
    "resource-class": { type: "string" },
    name: { type: "string" },
    trait: { type: "string", multiple: true },
    "memory-mb": { type: "string" },
    vcpus: { type: "string" },
    "local-gb": { type: "string" },
    "cpu-arch": { type: "string" },
    match: { type: "string" },
  },
  async run(ctx, { values, positionals }) {
    takePositionals(positionals, []);
    const rc = stringOpt(values, "resource-class");
    if (!rc) throw new UsageError("--resource-class is required");
    const body: Record<string, unknown> = { resource_class: rc };
    const name = stringOpt(values, "name");
    if (name) body.name = name;
    const traits = stringsOpt(values, "trait");
    if (traits.length) body.traits = traits;
    const spec: Record<string, unknown> = {};
    const memory = integerOpt(values, "memory-mb");
    const vcpus = integerOpt(values, "vcpus");
    const disk = integerOpt(values, "local-gb");
    const arch = stringOpt(values, "cpu-arch");
    if (memory !== undefined) spec.memory_mb = memory;
    if (vcpus !== undefined) spec.vcpus = vcpus;
    if (disk !== undefined) spec.local_gb = disk;
    if (arch !== undefined) spec.cpu_arch = arch;
    const match = stringOpt(values, "match");
    if (match !== undefined) {
      if (!(MATCH as readonly string[]).includes(match))
        throw new UsageError(`--match wants exact or best_fit, not "${match}"`);
      spec.match = match;
    }
    if (Object.keys(spec).length) body.spec = spec;
    const allocation = Allocation.parse(await ctx.client.request("POST", "/v1/allocations", body));
    showAllocation(ctx, allocation);
    if (allocation.state === "error")
      throw new CliError(allocation.last_error ?? `Allocation ${allocation.uuid} failed`);
  },
};

const show: Command = {
  words: ["allocation", "show"],
  synopsis: "ID",
  summary: "Show one allocation (by UUID or name).",
  options: {},
  async run(ctx, { positionals }) {
    const [ident] = takePositionals(positionals, ["ID"]);
    showAllocation(ctx, Allocation.parse(await ctx.client.get(path(ident!))));
  },
};

const remove: Command = {
  words: ["allocation", "delete"],
  synopsis: "ID",
  summary: "Delete an allocation (frees its node).",
  options: {},
  async run(ctx, { positionals }) {
    const [ident] = takePositionals(positionals, ["ID"]);
    await ctx.client.request("DELETE", path(ident!));
    if (!ctx.output.json) println(ctx.output.stdout, `Deleted allocation ${ident!}`);
  },
};

export const allocationCommands: readonly Command[] = [list, create, show, remove];
