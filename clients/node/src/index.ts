/** tally for Node.js: typed helpers for the tally Redis module over node-redis or ioredis. */
export { Tally, Counter, Leaderboard, Stats, Throttle } from "./client.js";
export type {
  AllowOptions, CounterInfo, Decision, Duration, LeaderboardInfo, LimitOptions, MultiDecision,
  MultiLimitOptions, ReportStat, StatsInfo, Summary, ThrottleDecision, Timestamp, WindowState,
  Windows,
} from "./client.js";
export const VERSION = "0.1.0";
