import { isUuid } from "../../../shared/uuid.ts";
import { InvalidDriverInfo } from "../errors.ts";

/** A node uuid fit to appear in a file name or a config comment. @throws InvalidDriverInfo otherwise. */
export function checkedUuid(uuid: string): string {
  if (!isUuid(uuid)) throw new InvalidDriverInfo(`invalid node uuid ${JSON.stringify(uuid).slice(0, 60)}`);
  return uuid.toLowerCase();
}
