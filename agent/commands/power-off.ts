import type { CommandHandler } from "./command.ts";

/** Flushes, answers, then powers off (see reboot). */
export const powerOff: CommandHandler<"power_off"> = async (_args, { backend, afterResult }) => {
  await backend.sync();
  afterResult(() => backend.powerOff());
  return { powering_off: true };
};
