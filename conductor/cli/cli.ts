import { parseCommandArgs } from "./args.ts";
import { AnvilClient, authorizationFromEnv } from "./client.ts";
import { commandHelp, type Command } from "./command.ts";
import { allocationCommands } from "./commands/allocation.ts";
import { consoleCommands } from "./commands/console.ts";
import { tokenCommands } from "./commands/token.ts";
import { tlsCommands } from "./commands/tls.ts";
import { keystoneCommands } from "./commands/keystone.ts";
import { nodeCommands } from "./commands/node.ts";
import { portCommands } from "./commands/port.ts";
import { CliError, UsageError } from "./errors.ts";
import { println, type Sink } from "./output.ts";

export const DEFAULT_URL = "http://127.0.0.1:6385";

export const COMMANDS: readonly Command[] = [
  ...nodeCommands,
  ...portCommands,
  ...allocationCommands,
  ...tokenCommands,
  ...tlsCommands,
  ...keystoneCommands,
  ...consoleCommands,
];

interface Globals {
  url?: string;
  json: boolean;
  help: boolean;
  rest: string[];
}

/** --url, --json and --help may stand anywhere on the line; everything else belongs to the command. */
export function extractGlobals(argv: readonly string[]): Globals {
  const globals: Globals = { json: false, help: false, rest: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--") {
      globals.rest.push(...argv.slice(i));
      break;
    }
    if (arg === "--json") globals.json = true;
    else if (arg === "--help" || arg === "-h") globals.help = true;
    else if (arg === "--url") {
      const value = argv[++i];
      if (value === undefined) throw new UsageError("--url wants a URL");
      globals.url = value;
    } else if (arg.startsWith("--url=")) globals.url = arg.slice("--url=".length);
    else globals.rest.push(arg);
  }
  return globals;
}

/** The command whose words start the line (longest match), and the arguments after them. */
export function findCommand(rest: readonly string[]): { command: Command; args: string[] } | null {
  let best: Command | null = null;
  for (const command of COMMANDS) {
    const matches = command.words.every((word, i) => rest[i] === word);
    if (matches && (!best || command.words.length > best.words.length)) best = command;
  }
  return best ? { command: best, args: rest.slice(best.words.length) } : null;
}

/** The command list, or one group's ("node") when the line names a group. */
export function overview(group?: string): string {
  const commands = COMMANDS.filter((c) => !group || c.words[0] === group);
  const width = Math.max(...commands.map((c) => c.words.join(" ").length));
  return [
    "usage: anvil [--url URL] [--json] <command> [options]   (anvil <command> --help for details)",
    "",
    ...commands.map((c) => `  ${c.words.join(" ").padEnd(width)}  ${c.summary}`),
    "",
    `--url defaults to $ANVIL_URL, else ${DEFAULT_URL}. --json prints the API's JSON.`,
    "Credentials: $ANVIL_TOKEN (anvil token issue), else $OS_USERNAME/$OS_PASSWORD (http_basic).",
  ].join("\n");
}

export interface CliIo {
  env: Record<string, string | undefined>;
  stdout: Sink;
  stderr: Sink;
}

/** Runs one command line; resolves to the exit code (0 ok, 1 failed, 2 usage). */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let command: Command | null = null;
  try {
    const globals = extractGlobals(argv);
    const found = findCommand(globals.rest);
    if (!found) {
      const group = COMMANDS.some((c) => c.words[0] === globals.rest[0]) ? globals.rest[0] : undefined;
      if (globals.help) {
        println(io.stdout, overview(group));
        return 0;
      }
      println(io.stderr, overview(group));
      if (globals.rest.length === 0 || (group && globals.rest.length === 1)) return 2;
      throw new UsageError(`unknown command: ${globals.rest.join(" ")}`);
    }
    command = found.command;
    if (globals.help) {
      println(io.stdout, commandHelp(command));
      return 0;
    }
    const args = parseCommandArgs(found.args, command.options);
    const url = globals.url ?? io.env.ANVIL_URL ?? DEFAULT_URL;
    await command.run(
      {
        client: new AnvilClient({ url, authorization: authorizationFromEnv(io.env) }),
        output: { stdout: io.stdout, stderr: io.stderr, json: globals.json },
        env: io.env,
      },
      args,
    );
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      println(io.stderr, `anvil: ${error.message}`);
      if (command)
        println(io.stderr, `usage: anvil ${command.words.join(" ")} ${command.synopsis}`.trimEnd());
      return error.exitCode;
    }
    if (error instanceof CliError) {
      println(io.stderr, error.message);
      return error.exitCode;
    }
    println(
      io.stderr,
      `anvil: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
    );
    return 1;
  }
}
