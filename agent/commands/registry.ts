import { CodedError } from "../../shared/errors.ts";
import { COMMAND_NAMES, agentStepDescriptors } from "../../shared/agent-steps.ts";
import type { CommandName } from "../../shared/protocol.ts";
import type { StepDescriptor, StepKind } from "../../shared/steps.ts";
import type { CommandHandler, CommandTable } from "./command.ts";

/**
 * Where a command's handler lives, by convention: `smart_check` is the export `smartCheck` of
 * `./smart-check.ts`. A new command or step is then one catalogue entry (shared/agent-steps.ts) and
 * one handler file, with no list here to edit.
 */
export function handlerLocation(name: CommandName): { module: string; exportName: string } {
  return {
    module: name.replaceAll("_", "-"),
    exportName: name.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase()),
  };
}

type AnyHandler = CommandHandler<CommandName>;

/** Node's, vitest's and esbuild's bundle's ways of saying a module file is not there. */
function isMissingModule(error: unknown): boolean {
  if ((error as { code?: unknown }).code === "ERR_MODULE_NOT_FOUND") return true;
  return /Module not found in bundle|Cannot find module|Failed to load url/i.test(String(error));
}

async function importHandler(name: CommandName): Promise<AnyHandler | undefined> {
  const { module, exportName } = handlerLocation(name);
  let exports: Record<string, unknown>;
  try {
    // NOTE: a template literal of the form `./${…}.ts`, which esbuild bundles as every .ts file of this
    // folder (its glob imports), so the single executable finds the same handlers as `node --import tsx`;
    // vite (the tests) is told to leave it to Node's resolution.
    exports = (await import(/* @vite-ignore */ `./${module}.ts`)) as Record<string, unknown>;
  } catch (error) {
    if (isMissingModule(error)) return undefined; // no such file: the agent does not implement the command
    throw error;
  }
  const handler = exports[exportName];
  if (typeof handler !== "function") {
    throw new Error(`agent/commands/${module}.ts does not export the handler ${exportName}`);
  }
  return handler as AnyHandler;
}

const loading = new Map<CommandName, Promise<AnyHandler | undefined>>();

/** The handler of `name`, loaded once; undefined when the agent has no handler file for it. */
export function loadHandler(name: CommandName): Promise<AnyHandler | undefined> {
  let handler = loading.get(name);
  if (handler === undefined) {
    handler = importHandler(name);
    loading.set(name, handler);
  }
  return handler;
}

/** The commands this agent has a handler for, in catalogue order. */
export async function implementedCommands(): Promise<ReadonlySet<CommandName>> {
  const found = await Promise.all(
    COMMAND_NAMES.map(async (name) => [name, await loadHandler(name)] as const),
  );
  return new Set(found.filter(([, handler]) => handler !== undefined).map(([name]) => name));
}

/**
 * The steps this agent offers (IPA's get_clean_steps / get_deploy_steps): the catalogue's, for the commands
 * it has a handler for, so the conductor's view before and after the call-back is the same.
 */
export async function offeredSteps(kind: Extract<StepKind, "clean" | "deploy">): Promise<StepDescriptor[]> {
  const implemented = await implementedCommands();
  return agentStepDescriptors(kind, (name) => implemented.has(name));
}

/** Runs the handler file's export; a command without one answers NOT_SUPPORTED, as IPA's unknown command. */
function lazy(name: CommandName): AnyHandler {
  return async (args, context) => {
    const handler = await loadHandler(name);
    if (handler === undefined)
      throw new CodedError("NOT_SUPPORTED", `${name} is not supported by this agent`);
    return handler(args, context);
  };
}

const BUILT_IN: CommandTable = {
  get_clean_steps: async () => ({ clean_steps: await offeredSteps("clean") }),
  get_deploy_steps: async () => ({ deploy_steps: await offeredSteps("deploy") }),
};

/**
 * Every catalogue command, bound to its handler file (arguments arrive parsed by the catalogue's schema).
 * get_clean_steps and get_deploy_steps are answered here, from the catalogue.
 */
export const COMMANDS: CommandTable = Object.fromEntries(
  COMMAND_NAMES.map((name) => [name, BUILT_IN[name] ?? lazy(name)]),
) as CommandTable;
