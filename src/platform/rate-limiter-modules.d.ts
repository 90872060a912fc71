// The classes Provision uses, each from its own module: the package's index loads every store it supports
// (Mongo, Postgres, DynamoDB, Etcd…), about 25 ms of start-up for nothing. Typed by the package's own types.

declare module "rate-limiter-flexible/lib/RateLimiterRes.js" {
  import { RateLimiterRes } from "rate-limiter-flexible";
  export default RateLimiterRes;
}

declare module "rate-limiter-flexible/lib/RateLimiterMemory.js" {
  import { RateLimiterMemory } from "rate-limiter-flexible";
  export default RateLimiterMemory;
}

declare module "rate-limiter-flexible/lib/RateLimiterRedis.js" {
  import { RateLimiterRedis } from "rate-limiter-flexible";
  export default RateLimiterRedis;
}

declare module "rate-limiter-flexible/lib/RLWrapperTimeouts.js" {
  import { RLWrapperTimeouts } from "rate-limiter-flexible";
  export default RLWrapperTimeouts;
}
