import { InvalidDriverInfo } from "../errors.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A node uuid fit to appear in a file name or a config comment. @throws InvalidDriverInfo otherwise. */
export function checkedUuid(uuid: string): string {
  if (!UUID.test(uuid)) throw new InvalidDriverInfo(`invalid node uuid ${JSON.stringify(uuid).slice(0, 60)}`);
  return uuid.toLowerCase();
}
