/** The WebSocket URL agents dial, from a conductor's public URL (http → ws, https → wss). */
export function agentEndpointOf(publicUrl: string): string {
  return `${publicUrl.replace(/\/$/, "").replace(/^http/, "ws")}/v1/agent`;
}
