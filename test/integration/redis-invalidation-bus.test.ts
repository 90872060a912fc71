import test from "ava";
import { type ClientState, ClientStates } from "../../src/auth/client-states.js";
import { systemClock } from "../../src/platform/clock.js";
import { createLogger } from "../../src/platform/logger.js";
import { RedisInvalidationBus } from "../../src/platform/redis-invalidation-bus.js";
import { pollUntil } from "../support/poll.js";
import { TEST_REDIS_URL } from "../support/test-server.js";

const ROW: ClientState = { clientId: "bus-client", providerId: "p1", disabled: false, tokenGeneration: "g1" };

test("over Redis, client states are cached once the subscription stands, and dropped when another instance publishes", async (t) => {
  const logger = createLogger("silent");
  const [here, elsewhere] = await Promise.all([
    RedisInvalidationBus.connect(TEST_REDIS_URL, logger),
    RedisInvalidationBus.connect(TEST_REDIS_URL, logger),
  ]);
  t.teardown(async () => {
    await here.close();
    await elsewhere.close();
  });
  const clientId = `bus-client-${Date.now()}`;
  let loads = 0;
  const states = await ClientStates.create(
    async () => {
      loads++;
      return { ...ROW, clientId };
    },
    here,
    systemClock,
  );
  t.false(here.listening, "nothing is cached until the subscription surely stands");
  await pollUntil("the bus to listen", () => (here.listening ? true : undefined));
  await states.get(clientId);
  await states.get(clientId);
  t.is(loads, 1);

  const elsewhereStates = await ClientStates.create(async () => null, elsewhere, systemClock);
  await elsewhereStates.changed(clientId);
  await pollUntil("the change to arrive", async () => {
    await states.get(clientId);
    return loads > 1 ? true : undefined;
  });
  t.is(loads, 2);
});
