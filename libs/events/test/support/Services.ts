import { TestDatabase } from "@crm-relay/store"
import { Layer } from "effect"
import { Accounts } from "../../src/Accounts.js"
import { IntegrationKeys } from "../../src/IntegrationKeys.js"
import * as KeyTags from "../../src/KeyTags.js"
import { Preview } from "../../src/Preview.js"
import { RateLimiter } from "../../src/RateLimiter.js"
import { Subscriptions } from "../../src/Subscriptions.js"

/** The Event API services over an isolated test database. */
export const ServicesLive = Layer.mergeAll(
  Accounts.Default,
  IntegrationKeys.Default.pipe(Layer.provide(KeyTags.layerTest)),
  Subscriptions.Default,
  RateLimiter.Default,
  Preview.Default
).pipe(Layer.provideMerge(TestDatabase.layer))
