/**
 * The W3C `traceparent` of the request that queued a job, so the worker
 * continues its trace: a call's outcome request, its push job, each bridge
 * exchange and each delivery attempt are one trace. NULL for rows queued
 * before this migration or outside any span.
 */
import * as Migration from "../Migration.js"

export default Migration.make([
  `ALTER TABLE crm_push_jobs ADD COLUMN traceparent text`,
  `ALTER TABLE deliveries ADD COLUMN traceparent text`
])
