import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import type { Logger } from "../shared/log.ts";
import { AllocationService } from "./allocations/service.ts";
import { clusterPeers, resolveAuth } from "./auth/strategy.ts";
import { HistoryRecorder } from "./history/recorder.ts";
import { DeployLogStore } from "./history/deploy-logs.ts";
import { loadTlsMaterial } from "./tls/material.ts";
import { lookupAllowed, storeDirectory } from "./agents/directory-store.ts";
import { createAgentGateway, type AgentGateway } from "./agents/gateway.ts";
import { SwarmTracker } from "./agents/swarm-tracker.ts";
import { buildApi } from "./api/app.ts";
import { POWER_SYNC_FIT, runPowerSyncPass, workersToFit } from "./cluster/power-sync.ts";
import { storePowerSyncPort } from "./cluster/power-sync-port.ts";
import { Membership } from "./cluster/membership.ts";
import { BootAdoption, awaitsAdoption, takeOverOrphans } from "./cluster/takeover.ts";
import { rehomeAgents, ringOwnerElsewhere } from "./cluster/agent-owner.ts";
import { publicUrlOf } from "./config.ts";
import type { ConductorConfig } from "./config.ts";
import { openStore } from "./db/open-store.ts";
import type { Store } from "./db/store.ts";
import { bootFilesPlugin } from "./drivers/boot/http-plugin.ts";
import type { DriverRegistry } from "./drivers/hardware-type.ts";
import { defaultDrivers, httpBootRoot } from "./drivers/registry.ts";
import { EventHub } from "./events/hub.ts";
import { createMetrics } from "./metrics/metrics.ts";
import { buildMetricsListener } from "./metrics/listener.ts";
import { buildBootFilesListener } from "./drivers/boot/http-listener.ts";
import { parseListenAddress } from "./listen-address.ts";
import { uiPlugin } from "./ui/ui-plugin.ts";
import type { UrlSigner } from "./images/image-request.ts";
import { ConsoleSessions } from "./console/sessions.ts";
import { consoleUpgradeRoute } from "./console/websocket.ts";
import { ConsoleService } from "./operations/console.ts";
import { Provisioner } from "./operations/provisioner.ts";
import { discoveredAgentConnected, enrollDiscovered } from "./operations/discovery.ts";
import { ramdiskAgentParams } from "./flows/ramdisk.ts";
import { errorMessage } from "./flows/drive.ts";
import { adoptBoot, takeOver } from "./operations/recovery.ts";
import { failTimedOut } from "./operations/wait-timeouts.ts";
import { createImageServing, type ImageServing } from "./images/image-serving.ts";
import { registerImageRoutes } from "./images/image-routes.ts";
import { NetworkBurninPairing } from "./drivers/deploy/burnin-pairing.ts";

export interface Conductor {
  app: FastifyInstance;
  store: Store;
  provisioner: Provisioner;
  membership: Membership;
  gateway: AgentGateway;
  events: EventHub;
  drivers: DriverRegistry;
  /** Image links, Glance sources and the image cache. */
  images: ImageServing;
  /** The separate plain-HTTP listeners' URLs once started (metrics.listen, boot.httpListen), if configured. */
  sideUrls: { metrics?: string; boot?: string };
  /** Listens and starts the periodic tasks; resolves with the bound URL. */
  start(): Promise<string>;
  /** Stops listening, cancels running work (a restart's recovery fails it cleanly) and closes the database. */
  stop(): Promise<void>;
}

/** Wires the store, drivers, provisioner, agent gateway and API of one conductor. */
export function createConductor(
  config: ConductorConfig,
  options: { logger: Logger; drivers?: DriverRegistry; store?: Store; sign?: UrlSigner },
): Conductor {
  const { logger } = options;
  const tls = loadTlsMaterial(config.tls);
  mkdirSync(httpBootRoot(config), { recursive: true });
  const store = options.store ?? openStore(config.databasePath);
  const auth = resolveAuth(config, logger, store);
  const peers = clusterPeers(config);
  let listeningUrl: string | undefined;
  const publicUrl = (): string => publicUrlOf(config, listeningUrl);
  const metrics = createMetrics();
  // with Keystone, Glance is called with Anvil's own service token unless a static one is configured
  const serviceToken = auth.serviceToken;
  const allocations = new AllocationService(store);
  const imageServing = createImageServing(
    config,
    publicUrl,
    serviceToken && config.glance?.token === undefined ? { token: () => serviceToken() } : undefined,
  );
  const drivers =
    options.drivers ??
    defaultDrivers(config, {
      vmedia: {
        signedUrl: (path) => `${publicUrl()}${imageServing.links.sign(path, config.images.urlExpiresS)}`,
      },
      ipmitool: {
        onCall: (call) =>
          metrics.observeBmcCall({ command: call.command, outcome: call.outcome }, call.seconds),
      },
    });
  const events = new EventHub();
  events.observe((event) => metrics.onEvent(event));
  const history = new HistoryRecorder({ store, logger, conductor: config.name });
  events.observe((event) => void history.onEvent(event));
  const membership = new Membership(store, {
    hostname: config.name,
    group: config.cluster.group,
    drivers: drivers.list().map((d) => d.name),
    heartbeatIntervalS: config.cluster.heartbeatIntervalS,
    deadAfterS: config.cluster.deadAfterS,
    partitionExponent: config.cluster.partitionExponent,
    logger,
    scheme: tls ? "https:" : "http:",
  });
  const swarm = config.deploy.swarm
    ? new SwarmTracker({
        logger,
        assigneeWaitMs: config.deploy.swarmAssigneeWaitS * 1000,
        onEvent: (event) => events.publish({ ...event }),
      })
    : undefined;
  const gateway = createAgentGateway({
    ...(swarm === undefined ? {} : { swarm }),
    directory: storeDirectory(store, {
      fastTrack: config.agent.fastTrack,
      // auto-discovery (off by default): a hello from a machine no node has enrolls one
      ...(config.autoDiscovery.enabled
        ? {
            enrollDiscovered: async (machine) =>
              (
                await enrollDiscovered(provisioner, {
                  macs: machine.macs,
                  bmcAddress: machine.bmc_address,
                  awaitsAgent: true,
                })
              )?.uuid ?? null,
          }
        : {}),
    }),
    logger,
    maxFrameBytes: config.agent.maxFrameBytes,
    heartbeatTimeoutMs: config.agent.heartbeatTimeoutS * 1000,
    helloTimeoutMs: config.agent.helloTimeoutS * 1000,
    maxBytesBeforeHello: config.agent.maxBytesBeforeHello,
    maxConnections: config.agent.maxConnections,
    maxConnectionsPerSource: config.agent.maxConnectionsPerSource,
    maxFramesPerSecond: config.agent.maxFramesPerSecond,
    // an agent that dials a conductor not owning its node is sent to the owner (one hop)
    ownerElsewhere: ringOwnerElsewhere(membership),
  });
  const provisioner = new Provisioner(
    {
      store,
      caFingerprint: tls?.pin,
      imageCa: config.tls.imageCa === undefined ? undefined : readFileSync(config.tls.imageCa, "utf8"),
      // the unique identity, not the name: a second process with the same name never shares our locks
      holder: membership.identity,
      logger,
      agents: gateway,
      config,
      burninPairing: new NetworkBurninPairing(),
      publicUrl,
      peerUrls: () =>
        membership
          .alive()
          .filter((r) => r.identity !== membership.identity && r.conductor_group === config.cluster.group)
          .filter((r) => membership.sameTlsMode(r))
          .flatMap((r) => (r.url ? [r.url] : [])),
      publish: (e) => events.publish(e),
      imageSources: imageServing.sources,
      vmediaImages: imageServing.vmedia,
      deployLogs: new DeployLogStore(
        config.deployLogs.dir ?? join(config.dataDir, "deploy-logs"),
        config.deployLogs,
      ),
    },
    drivers,
    options.sign ?? imageServing.sign,
  );
  const consoleSessions = new ConsoleSessions({ logger });
  // a console URL is one of the conductor's signed links: the signature covers its path (one node) and expiry
  const consoles = new ConsoleService(provisioner, consoleSessions, (path, lifetimeS) =>
    imageServing.links.sign(path, lifetimeS),
  );
  const consoleRoute = consoleUpgradeRoute({ sessions: consoleSessions, links: imageServing.links, logger });
  const startedAt = new Date();
  const app = buildApi({
    console: consoles,
    store,
    provisioner,
    allocations,
    membership,
    drivers,
    config,
    logger,
    events,
    startedAt,
    metrics,
    auth,
    history,
    tls: tls ?? undefined,
    peers,
  });
  void app.register(uiPlugin({ store }));
  void app.register(bootFilesPlugin, { prefix: "/boot", root: httpBootRoot(config) });
  registerImageRoutes(app, imageServing.routes);

  // Side listeners: plain HTTP, one job each, started after the API and closed with it.
  const side: { name: "metrics" | "boot"; app: FastifyInstance; listen: string }[] = [];
  if (config.metrics.listen !== undefined)
    side.push({
      name: "metrics",
      app: buildMetricsListener({ store, events, metrics }),
      listen: config.metrics.listen,
    });
  if (config.boot.httpListen !== undefined)
    side.push({
      name: "boot",
      app: buildBootFilesListener({ boot: httpBootRoot(config), images: imageServing.routes }),
      listen: config.boot.httpListen,
    });
  const sideUrls: Conductor["sideUrls"] = {};

  gateway.onConnected((uuid) => {
    events.publish({ type: "agent", node: uuid, connected: true });
    discoveredAgentConnected(provisioner, uuid)
      .then((discovered) => (discovered ? undefined : provisioner.agentConnected(uuid)))
      .catch((error: unknown) => logger.error({ err: error, node: uuid }, "agent call-back failed"));
  });
  gateway.onDisconnected((uuid) => events.publish({ type: "agent", node: uuid, connected: false }));
  gateway.onRebooted((uuid, bootId) => {
    provisioner
      .agentRebooted(uuid, bootId, (node) => membership.owns(node))
      .catch((error: unknown) =>
        logger.error({ err: error, node: uuid }, "resuming a rebooted write failed"),
      );
  });

  /**
   * Auto-discovery's boot script (machines no node has boot the ramdisk and dial us) when it is on, through
   * its driver's boot interface; removed when it is off, so unknown machines get nothing by default.
   */
  const prepareDiscoveryBoot = async (): Promise<void> => {
    if (!config.autoDiscovery.enabled) {
      for (const hw of drivers.list()) await hw.boot.prepareDiscovery?.(null);
      return;
    }
    const boot = drivers.get(config.autoDiscovery.driver)?.boot;
    if (boot?.prepareDiscovery === undefined) {
      logger.warn(
        { driver: config.autoDiscovery.driver },
        "auto-discovery: this driver's boot interface cannot boot unknown machines; only ramdisks booted otherwise are discovered",
      );
      return;
    }
    try {
      await boot.prepareDiscovery({ agentParams: ramdiskAgentParams(provisioner.deps) });
    } catch (error) {
      // no default deploy kernel and ramdisk: machines booted into a ramdisk otherwise are still discovered
      logger.warn({ err: errorMessage(error) }, "auto-discovery: unknown machines cannot network-boot");
    }
  };

  const timers: NodeJS.Timeout[] = [];
  const every = (seconds: number, job: () => Promise<unknown>, name: string): void => {
    if (seconds <= 0) return;
    let running = false;
    const timer = setInterval(() => {
      if (running) return; // never overlap a slow pass with the next
      running = true;
      job()
        .catch((error: unknown) => logger.error({ err: error }, `${name} failed`))
        .finally(() => {
          running = false;
        });
    }, seconds * 1000);
    timer.unref();
    timers.push(timer);
  };

  return {
    app,
    store,
    provisioner,
    membership,
    gateway,
    events,
    drivers,
    images: imageServing,
    sideUrls,
    async start() {
      for (const hw of drivers.list()) await hw.boot.start?.();
      // the image-link key is the cluster's: read (or created first) before any link is signed or checked
      await imageServing.start(store);
      await peers.loadKey(store);
      // registered before anything is locked under our identity (takeover relies on that order)
      await membership.join(null);
      // dead conductors' locks are freed and their in-flight work settled; then their waiting nodes adopted,
      // and agents of nodes now owned elsewhere sent to the owner
      const freeOrphans = (options: { everyHolder?: boolean } = {}) =>
        takeOverOrphans(
          {
            store,
            membership,
            logger,
            takeOver: (uuid, holder, cause) => takeOver(provisioner, { uuid, holder, cause }),
          },
          options,
        );
      const adoption = new BootAdoption({
        store,
        membership,
        logger,
        adoptBoot: (uuid) => adoptBoot(provisioner, uuid),
      });
      // consoles follow their nodes: started here for the nodes this conductor owns (scanned at start and
      // whenever the live conductors change), stopped for nodes that moved, were disabled or deleted
      let ringSeen = "";
      const reconcileConsoles = async (): Promise<void> => {
        const ring = membership
          .alive()
          .map((r) => r.identity)
          .sort()
          .join(",");
        const scan = ring !== ringSeen;
        ringSeen = ring;
        const { started, stopped } = await consoles.reconcile({
          isMine: (node) => membership.owns(node),
          scan,
        });
        if (started + stopped > 0) logger.info({ started, stopped }, "console sessions reconciled");
      };
      const takeover = async (): Promise<void> => {
        await freeOrphans();
        await adoption.run();
        await rehomeAgents({
          store,
          membership,
          gateway,
          logger,
          isWorking: (uuid) => provisioner.isWorking(uuid),
          acceptsAgent: (node) => lookupAllowed(node, config.agent.fastTrack),
        });
        await reconcileConsoles();
      };
      await freeOrphans({ everyHolder: true });
      // nodes stored before their shown text (or by another form of it) get one, in the background: until
      // then a detail page holding one of them is written by the view path
      void store.fillShownTexts().then(
        (filled) => filled > 0 && logger.info({ filled }, "node detail texts written"),
        (error: unknown) => logger.warn({ err: error }, "node detail texts not written"),
      );
      gateway.attach(app.server, [consoleRoute]);
      const url = await app.listen({ host: config.host, port: config.port });
      listeningUrl = url;
      for (const listener of side) {
        // the schema checked the address; a refused bind (port taken) fails the start like the API's would
        const address = parseListenAddress(listener.listen)!;
        sideUrls[listener.name] = await listener.app.listen({ host: address.host, port: address.port });
        logger.info({ url: sideUrls[listener.name] }, `${listener.name} listener (plain HTTP) listening`);
      }
      // the URL other conductors forward API calls to and name to agents: the one nodes reach us at
      await membership.heartbeat(publicUrl());
      // adoption writes our URL into boot files: only once we listen
      await takeover();
      await prepareDiscoveryBoot();
      every(config.cluster.heartbeatIntervalS, () => membership.heartbeat().then(takeover), "heartbeat");
      const mine = (node: { uuid: string; conductor_group: string }) => membership.owns(node);
      // a node still waiting on a dead conductor's boot files is adopted (timer restarted), not timed out
      const timesOutHere = (
        node: Parameters<typeof awaitsAdoption>[0] & { uuid: string; conductor_group: string },
      ) => mine(node) && !awaitsAdoption(node, membership);
      every(
        config.timeoutCheckIntervalS,
        () => failTimedOut(provisioner, { isMine: timesOutHere }),
        "timeout check",
      );
      every(
        config.powerSync.intervalS,
        async () => {
          const began = performance.now();
          const { intervalS, concurrency } = config.powerSync;
          const report = await runPowerSyncPass(storePowerSyncPort(provisioner, mine), {
            concurrency,
            // a pass that would overrun its interval (the next one is skipped) gets more workers in time
            fitWithinMs: intervalS * 1000 * POWER_SYNC_FIT,
            maxConcurrency: Math.max(concurrency, config.powerSync.maxConcurrency),
            forcePowerStateDuringSync: config.powerSync.force,
            maxFailures: config.powerSync.maxFailures,
            logger,
          });
          const seconds = (performance.now() - began) / 1000;
          metrics.observePowerSync({
            seconds,
            failed: report.outcomes.failed + report.outcomes.error,
            checked: report.checked,
          });
          const workers = report.workers;
          if (workers > concurrency)
            logger.info(
              { seconds: Math.round(seconds), nodes: report.checked, workers, started_with: concurrency },
              "the power sync pass added workers to fit its interval",
            );
          const wanted = workersToFit({ seconds, intervalS, workers });
          if (wanted !== null)
            logger.warn(
              { seconds: Math.round(seconds), interval_s: intervalS, nodes: report.checked, workers, wanted },
              "the power sync pass took longer than its interval: raise --sync-power-state-max-workers",
            );
        },
        "power sync",
      );
      logger.info({ url, name: config.name, identity: membership.identity }, "conductor listening");
      return url;
    },
    async stop() {
      for (const timer of timers) clearInterval(timer);
      // Work in flight (a deploy writing its last bytes) gets a grace period to finish; what is still
      // running after it is cancelled and handed back: locks released, the next start's recovery fails or
      // resumes it.
      const finished = await Promise.race([
        provisioner.settle().then(() => true),
        new Promise<false>((resolve) => setTimeout(resolve, config.stopGraceS * 1000, false).unref()),
      ]);
      if (!finished)
        logger.warn(
          { grace_s: config.stopGraceS },
          "work still running after the grace period: cancelling it",
        );
      // agents' commands are not cancelled: the gateway closes first (its pending calls fail without a cancel
      // frame) and the steps waiting on them hand their nodes to the agents' call-backs (Provisioner.stopping)
      provisioner.stopping();
      allocations.stop();
      await gateway.close();
      consoleRoute.close();
      await consoleSessions.stopAll();
      imageServing.stop();
      provisioner.abortAll("conductor stopping");
      await provisioner.settle();
      // BMC sessions are a scarce resource on the BMC (often 4-8): end them rather than let them time out
      for (const hw of drivers.list()) await hw.stop?.().catch(() => undefined);
      await app.close();
      for (const listener of side) await listener.app.close();
      await auth.close?.();
      await membership
        .leave()
        .catch((error: unknown) => logger.error({ err: error }, "could not deregister"));
      await store.close();
    },
  };
}
