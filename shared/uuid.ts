/** The textual UUID form Ironic uses for node, port and allocation identities. */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for a UUID; anything else that names a resource is a name. */
export function isUuid(value: string): boolean {
  return UUID_PATTERN.test(value);
}
