import type { CommandHandler } from "./command.ts";

export const syncDisks: CommandHandler<"sync"> = async (_args, { backend }) => {
  await backend.sync();
  return {};
};
