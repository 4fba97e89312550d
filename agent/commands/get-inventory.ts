import type { CommandHandler } from "./command.ts";

/** The hardware inventory, IPA-shaped (the conductor validates it against InventorySchema). */
export const getInventory: CommandHandler<"get_inventory"> = (_args, { backend, signal }) =>
  backend.inventory({ signal });
