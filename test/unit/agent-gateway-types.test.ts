import { describe, expect, it } from "vitest";
import type { AgentControl } from "../../conductor/drivers/agent-control.ts";
import { createAgentGateway } from "../../conductor/agents/gateway.ts";
import { MemoryAgentDirectory } from "../../conductor/agents/memory-directory.ts";
import { silentLogger } from "../../shared/log.ts";

describe("the gateway as the conductor's AgentControl", () => {
  it("is assignable to the interface the provisioning flows use", async () => {
    const gateway = createAgentGateway({ directory: new MemoryAgentDirectory(), logger: silentLogger });
    const control: AgentControl = gateway; // a compile-time check first of all
    expect(control.isConnected("nobody")).toBe(false);
    await expect(control.call("nobody", { name: "sync", args: {} })).rejects.toMatchObject({
      code: "NOT_CONNECTED",
    });
    const bogus = { name: "format_c", args: {} } as unknown as Parameters<AgentControl["call"]>[1];
    await expect(control.call("nobody", bogus)).rejects.toMatchObject({
      code: "UNKNOWN_COMMAND",
    });
    await gateway.close();
  });
});
