import type { CommandHandler } from "./command.ts";

export const sync: CommandHandler<"sync"> = async (_args, { backend }) => {
  await backend.sync();
  return {};
};
