import type { CommandHandler } from "./command.ts";

/** Flushes, answers, then reboots: the conductor learns the command succeeded before the link drops. */
export const reboot: CommandHandler<"reboot"> = async (_args, { backend, afterResult }) => {
  await backend.sync();
  afterResult(() => backend.reboot());
  return { rebooting: true };
};
