import { labFetch, type LabAccess } from "./access.ts";

/** One conductor event from GET /v1/events, with the conductor's timestamp. */
export interface RecordedEvent {
  type: string;
  node: string;
  at: string;
  [key: string]: unknown;
}

/** Follows the conductor's server-sent event stream and keeps every event until stopped. */
export function recordEvents(url: string, access: LabAccess = {}): { events: RecordedEvent[]; stop(): void } {
  const fetch = labFetch(access);
  const events: RecordedEvent[] = [];
  const controller = new AbortController();
  const follow = async (): Promise<void> => {
    const response = await fetch(`${url}/v1/events`, { signal: controller.signal });
    if (!response.body) return;
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of response.body) {
      buffer += decoder.decode(chunk as Uint8Array, { stream: true });
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = frame.split("\n").find((line) => line.startsWith("data: "));
        if (data) events.push(JSON.parse(data.slice(6)) as RecordedEvent);
      }
    }
  };
  // The stream ends when stopped (an abort) or when the conductor goes away: both are expected.
  follow().catch(() => undefined);
  return { events, stop: () => controller.abort() };
}
