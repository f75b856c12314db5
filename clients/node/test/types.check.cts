// Type-checked like types.check.ts: a CommonJS TypeScript user's view (require conditions).
import tally = require("tally-redis");
import erl = require("tally-redis/express-rate-limit");
import rlf = require("tally-redis/rate-limiter-flexible");

const t: tally.Tally = new tally.Tally({ call: () => Promise.resolve(1) });
const n: Promise<number[]> = t.counter("x").sum(["1m", 60000]);
const store: erl.TallyStore = new erl.TallyStore({ client: {} });
const limiter: rlf.RateLimiterTally = new rlf.RateLimiterTally({ storeClient: {}, points: 1, duration: 1 });
void [n, store, limiter];
