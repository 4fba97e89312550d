import WebSocket from "ws";
import { z } from "zod";
import { flagOpt, takePositionals } from "../args.ts";
import type { Command } from "../command.ts";
import { CliError } from "../errors.ts";
import { nodePath } from "../node-state.ts";
import { printJson, println, type CommandContext } from "../output.ts";

const ConsoleState = z.object({
  console_enabled: z.boolean(),
  console_info: z.object({ type: z.string(), url: z.string() }).nullable(),
});

/**
 * The ssh-style escape: `~.` typed at the start of a line ends the session. State between chunks is whether
 * the last byte ended a line (or nothing was typed yet) and whether a `~` waits for its second byte.
 */
export class EscapeScanner {
  private lineStart = true;
  private tilde = false;

  /** The bytes to send for this chunk, and whether the user asked to quit (bytes after `~.` are dropped). */
  feed(chunk: Buffer): { forward: Buffer; quit: boolean } {
    const out: number[] = [];
    for (const byte of chunk) {
      if (this.tilde) {
        this.tilde = false;
        if (byte === 0x2e) return { forward: Buffer.from(out), quit: true };
        out.push(0x7e);
        // "~~" sends one "~"
        if (byte === 0x7e) {
          this.lineStart = false;
          continue;
        }
      } else if (this.lineStart && byte === 0x7e) {
        this.tilde = true;
        continue;
      }
      out.push(byte);
      this.lineStart = byte === 0x0d || byte === 0x0a;
    }
    return { forward: Buffer.from(out), quit: false };
  }
}

async function consoleState(ctx: CommandContext, ident: string) {
  return ConsoleState.parse(await ctx.client.get(`${nodePath(ident)}/states/console`));
}

/** Polls until the console is enabled (the conductor starts the session in the background). */
async function enableConsole(ctx: CommandContext, ident: string): Promise<z.infer<typeof ConsoleState>> {
  await ctx.client.request("PUT", `${nodePath(ident)}/states/console`, { enabled: true });
  for (let i = 0; i < 150; i++) {
    const state = await consoleState(ctx, ident);
    if (state.console_enabled) return state;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new CliError(`the console of node ${ident} did not come up within 30 s: see its last_error`);
}

/** Attaches the terminal to the console WebSocket until `~.`, the end of input or the console's end. */
function attach(url: string): Promise<string> {
  const stdin = process.stdin;
  const raw = stdin.isTTY;
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const scanner = new EscapeScanner();
    const onInput = (chunk: Buffer): void => {
      const { forward, quit } = scanner.feed(chunk);
      if (forward.length > 0 && ws.readyState === ws.OPEN) ws.send(forward);
      if (quit) ws.close(1000, "viewer quit");
    };
    const restore = (): void => {
      stdin.off("data", onInput);
      stdin.off("end", onEnd);
      if (raw) stdin.setRawMode(false);
      stdin.pause();
    };
    const onEnd = (): void => ws.close(1000, "end of input");
    ws.on("open", () => {
      if (raw) stdin.setRawMode(true);
      process.stderr.write("[connected; type ~. at the start of a line to quit]\r\n");
      stdin.on("data", onInput);
      stdin.once("end", onEnd);
      stdin.resume();
    });
    ws.on("message", (data: Buffer) => process.stdout.write(data));
    ws.on("unexpected-response", (_request, response) => {
      restore();
      reject(new CliError(`the conductor refused the console connection (HTTP ${response.statusCode})`));
    });
    ws.on("close", (_code, reason) => {
      restore();
      resolve(reason.toString() || "closed");
    });
    ws.on("error", (error) => {
      restore();
      reject(new CliError(`console connection failed: ${error.message}`));
    });
  });
}

const consoleCommand: Command = {
  words: ["node", "console"],
  synopsis: "ID [--enable] [--disable] [--info]",
  summary: "Attach the terminal to a node's serial console (type ~. at the start of a line to quit).",
  details: [
    "--enable   enable the console first if it is not (PUT …/states/console)",
    "--disable  disable the console and exit",
    "--info     print the console state and URL instead of attaching",
  ],
  options: { enable: { type: "boolean" }, disable: { type: "boolean" }, info: { type: "boolean" } },
  async run(ctx, { values, positionals }) {
    const [ident] = takePositionals(positionals, ["ID"]);
    if (flagOpt(values, "disable")) {
      await ctx.client.request("PUT", `${nodePath(ident!)}/states/console`, { enabled: false });
      if (!ctx.output.json) println(ctx.output.stdout, `Requested console off for node ${ident!}`);
      return;
    }
    let state = await consoleState(ctx, ident!);
    if (!state.console_enabled && flagOpt(values, "enable")) state = await enableConsole(ctx, ident!);
    if (flagOpt(values, "info") || ctx.output.json) {
      if (ctx.output.json) printJson(ctx.output, state);
      else println(ctx.output.stdout, state.console_info ? state.console_info.url : "console disabled");
      return;
    }
    if (state.console_info === null)
      throw new CliError(`the console of node ${ident!} is not enabled (use --enable)`);
    const why = await attach(state.console_info.url);
    println(ctx.output.stderr, `\r\n[console closed: ${why}]`);
  },
};

export const consoleCommands: readonly Command[] = [consoleCommand];
