import type { Options, Values } from "./args.ts";
import type { CommandContext } from "./output.ts";

/** One `anvil <words...>` command: its options (parseArgs), help and body. */
export interface Command {
  words: readonly string[];
  /** The argument synopsis after the words, e.g. "ID [--state S]". */
  synopsis: string;
  summary: string;
  /** Extra help lines: what the options mean, examples. */
  details?: readonly string[];
  options: Options;
  run(ctx: CommandContext, args: { values: Values; positionals: string[] }): Promise<void>;
}

/** The help text of one command. */
export function commandHelp(command: Command): string {
  const lines = [
    `usage: anvil ${command.words.join(" ")} ${command.synopsis}`.trimEnd(),
    "",
    command.summary,
  ];
  if (command.details?.length) lines.push("", ...command.details);
  lines.push("", "global options: --url URL (env ANVIL_URL), --json, --help");
  return lines.join("\n");
}
