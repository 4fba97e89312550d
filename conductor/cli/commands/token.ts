import { z } from "zod";
import { takePositionals } from "../args.ts";
import type { Command } from "../command.ts";
import { printJson, println } from "../output.ts";
import { renderTable } from "../table.ts";

const Issued = z.looseObject({ id: z.string(), token: z.string(), expires_at: z.string() });
const Listed = z.object({
  tokens: z.array(
    z.object({ id: z.string(), user: z.string(), created_at: z.string(), expires_at: z.string() }),
  ),
});

const issue: Command = {
  words: ["token", "issue"],
  synopsis: "",
  summary: "Get a bearer token for $OS_USERNAME/$OS_PASSWORD; prints it (export it as ANVIL_TOKEN).",
  details: [
    'eval "export ANVIL_TOKEN=$(anvil token issue)" — the token expires; `anvil token revoke ID` ends it',
  ],
  options: {},
  async run(ctx, { positionals }) {
    takePositionals(positionals, []);
    const issued = Issued.parse(await ctx.client.request("POST", "/v1/auth/tokens"));
    if (ctx.output.json) return printJson(ctx.output, issued);
    println(ctx.output.stdout, issued.token);
    println(ctx.output.stderr, `token ${issued.id} expires at ${issued.expires_at}`);
  },
};

const list: Command = {
  words: ["token", "list"],
  synopsis: "",
  summary: "List live tokens (yours; an administrator sees everyone's).",
  options: {},
  async run(ctx, { positionals }) {
    takePositionals(positionals, []);
    const { tokens } = Listed.parse(await ctx.client.get("/v1/auth/tokens"));
    if (ctx.output.json) return printJson(ctx.output, { tokens });
    println(
      ctx.output.stdout,
      renderTable(
        ["ID", "User", "Created", "Expires"],
        tokens.map((t) => [t.id, t.user, t.created_at, t.expires_at]),
      ),
    );
  },
};

const revoke: Command = {
  words: ["token", "revoke"],
  synopsis: "ID",
  summary: "Revoke a token.",
  options: {},
  async run(ctx, { positionals }) {
    const [id] = takePositionals(positionals, ["ID"]);
    await ctx.client.request("DELETE", `/v1/auth/tokens/${encodeURIComponent(id!)}`);
    println(ctx.output.stderr, `token ${id} revoked`);
  },
};

export const tokenCommands: readonly Command[] = [issue, list, revoke];
